"""Secret redaction for environment variables, command lines and arbitrary JSON (pure functions).

A bug-report bundle is meant to be shared, so anything that looks like a credential is replaced by
``<redacted>`` before it is written: values of secret-named variables and options, ``user:pass@`` in
URLs, bearer tokens, and well-known token formats wherever they appear.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"

# Names whose value is a secret (env vars, dict keys, --options); matched case-insensitively on the whole name.
_SECRET_NAME = re.compile(
    r"""(?ix)
    ( ^(wandb_api_key|hf_token|hugging_?face_hub_token|aws_secret_access_key|aws_session_token|
        github_token|gh_token|openai_api_key|anthropic_api_key|netrc)$
    | (^|[_\-.])(token|key|apikey|api_key|secret|password|passwd|pwd|credentials?|auth|cookie|session_?key)$
    | secret | password | passwd | credential | private[_\-]?key | access[_\-]?key | api[_\-]?key
    )
    """
)
# Names that look secret but are not (a tokenizer's name, a sort key...): do not hide what a maintainer needs.
_NOT_SECRET = re.compile(r"(?i)^(pwd|oldpwd|.*tokeni[sz]er.*|.*_tokens?_per_s|max_tokens|num_tokens|tokens|keep_keys?|.*sort_key)$")

# Token formats that are secrets wherever they appear (in any string).
_TOKEN_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),  # GitHub
    re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}\b"),  # OpenAI / Anthropic style
    re.compile(r"\bxox[abpors]-[A-Za-z0-9\-]{10,}\b"),  # Slack
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\b"),  # JWT
)
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/\s:@]+):([^/\s@]+)@")
# "Authorization: Bearer X", "token=X", "token: X" (but not "token embeddings" in prose).
_BEARER = re.compile(r"(?i)\b(bearer\s+|basic\s+|token\s*[=:]\s*|auth\s*[=:]\s*)([A-Za-z0-9._~+/\-]{8,}=*)")
# KEY=VALUE inside a larger string (e.g. `env FOO_TOKEN=abc python ...` or a shell line on the board).
_INLINE_ASSIGN = re.compile(r"(?<![\w-])([A-Za-z_][A-Za-z0-9_.\-]*)=(\S+)")


def is_secret_name(name: str) -> bool:
    """True when a variable / option / key of this name holds a secret."""
    bare = name.lstrip("-").strip()
    if not bare or _NOT_SECRET.match(bare):
        return False
    return bool(_SECRET_NAME.search(bare))


def redact_text(value: str) -> str:
    """Redact secrets embedded in free text: URL credentials, bearer tokens, known token formats, NAME=secret."""
    out = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}@", value)
    out = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", out)
    for pattern in _TOKEN_PATTERNS:
        out = pattern.sub(REDACTED, out)
    return _INLINE_ASSIGN.sub(lambda m: f"{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0), out)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment with secret-named variables' values replaced, and embedded secrets redacted in the rest."""
    return {k: (REDACTED if is_secret_name(k) and v else redact_text(v)) for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line with the values of secret options (``--api-key=X``, ``--token X``) replaced."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and "=" in arg:
            name, _, value = arg.partition("=")
            out.append(f"{name}={REDACTED}" if is_secret_name(name) and value else redact_text(arg))
            continue
        if arg.startswith("-") and is_secret_name(arg):
            out.append(arg)
            hide_next = True
            continue
        out.append(redact_text(arg))
    return tuple(out)


def redact_json(value: Any, *, key: str | None = None) -> Any:
    """Redact a JSON-like tree: secret-named keys lose their values, strings get :func:`redact_text`."""
    if key is not None and is_secret_name(key) and isinstance(value, str | int | float) and not isinstance(value, bool):
        return REDACTED if value not in ("", None) else value
    if isinstance(value, Mapping):
        return {k: redact_json(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if key in ("argv", "cmdline") and all(isinstance(v, str) for v in value):
            return list(redact_argv(value))
        return [redact_json(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def scrub_values(text: str, secrets: Sequence[str]) -> str:
    """Replace every occurrence of known secret values (>= 6 chars, to avoid hiding common words) in text.

    Used as a last pass over the whole bundle: a secret read from the environment can also sit in a stack
    frame's file name, a board field or a config value under an innocent key.
    """
    for secret in sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def secret_values(env: Mapping[str, str], argv: Sequence[str]) -> tuple[str, ...]:
    """The raw secret values found in an environment and a command line (to scrub them everywhere else)."""
    values = [v for k, v in env.items() if is_secret_name(k) and v]
    hide_next = False
    for arg in argv:
        if hide_next:
            values.append(arg)
            hide_next = False
        elif arg.startswith("-") and "=" in arg:
            name, _, value = arg.partition("=")
            if is_secret_name(name) and value:
                values.append(value)
        elif arg.startswith("-") and is_secret_name(arg):
            hide_next = True
    return tuple(values)
