"""The one secret redactor, for the probe board (written inside the user's program), everything the tool reads
from an inspected process (``dflash_diag.sources.redaction``) and the bug-report bundle.

Everything here works on structured values, before anything is serialised: an environment (a mapping), a
command line (a list of arguments), a JSON-like tree (config, board, snapshot document). Plain strings go
through :func:`redact_text`, multi-line text (a stderr tail) through :func:`redact_lines`. Nothing is ever
done with regular expressions on serialised JSON, so a secret holding ``"`` or ``\\`` cannot slip through and
a number can never be corrupted. docs/security.md lists the rules; ``tests/secrets/test_redactor_table.py`` holds them to a
table of real secret forms and of look-alikes that must stay.

The rules, in short:

- **Environment: an allow-list.** Values are kept only for variables that change how torch, CUDA, threads,
  allocators and Python behave (:data:`ENV_VALUE_ALLOWED`), and then still redacted if the name says secret
  (``HF_TOKEN``) or the value holds one. Every other variable is listed by name only (:data:`OMITTED`).
- **Names that hold secrets** (:func:`is_secret_name`), split into words (``--db-pass``, ``AccountKey``,
  ``X-Amz-Signature``): *password*, *passwd*, *passphrase*, *pass*, *pwd*, *secret*, *credential(s)*,
  *auth*, *authorization*, *cookie*, *apikey*, *pat*, *dsn*, *webhook*, *connection string* anywhere;
  *token*, *key*, *signature*, *sig* as the last word (``hf_token``, ``api_key``, ``--tokenizer-token``),
  except where the word before makes it a vocabulary or lookup term (``pad_token``, ``sort_key``).
  ``tokenizer``, ``tokens_per_s``, ``mask_token_id``, ``num_key_heads`` are not secret.
- **Command lines**: the value of a secret-named option in both forms (``--token X``, ``--token=X``),
  ``-p X`` / ``-pX`` (the password flag of mysql, sshpass and friends), ``NAME=value`` with a secret name.
- **Anywhere in any string**: URL user info (``https://user:pw@``, ``redis://:pw@``), secret query and
  connection-string parameters (``X-Amz-Signature=``, ``sig=``, ``AccountKey=``, ``Password=``) wherever
  they sit, ``Authorization: Bearer ...``, ``--password X`` inside a shell line, PEM private keys, and
  well-known token formats (:data:`TOKEN_FORMATS`).
- **Known values everywhere**: every secret value found by the rules above (>= 6 characters) is also
  replaced wherever else it appears, in strings only (:func:`scrub_tree`).

Standard library only: the probes import this inside the user's program.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"
OMITTED = "<omitted>"  # an environment variable outside the allow-list: its name is kept, its value is not
TOO_DEEP = "<nested too deep>"
MIN_SCRUB_CHARS = 6  # shorter known secrets are not searched for in unrelated text (they would hit words)
MAX_DEPTH = 64

# --- names ---------------------------------------------------------------------------------------------------

# Secret wherever the word sits in the name.
_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "pass", "pwd", "secret", "secrets", "credential", "credentials",
    "creds", "auth", "authorization", "cookie", "cookies", "apikey", "pat", "dsn", "webhook", "sshpass",
    "pgpass", "pgpassword", "privatekey", "clientsecret", "accesskey", "secretkey", "passcode", "otp",
})
# Secret as the last word of the name (``hf_token``, ``api_key``, ``X-Amz-Signature``, ``sig``).
_SECRET_LAST_WORDS = frozenset({"token", "key", "signature", "sig", "apitoken", "accesstoken"})
# ... unless the word before says it is vocabulary or a lookup, not a credential.
_BENIGN_BEFORE = frozenset({
    "pad", "eos", "bos", "unk", "mask", "sep", "cls", "special", "start", "end", "stop", "image", "audio",
    "video", "vision", "placeholder", "default", "first", "last", "next", "prev", "bot", "eot", "fim",
    "think", "sort", "cache", "primary", "partition", "foreign", "group", "index", "lookup", "dict", "map",
    "hash", "column", "row", "shard", "rng", "prng", "seed", "sorting", "metric", "monitor", "batch",
    "dataset", "feature", "label", "input", "output", "text", "field", "join", "merge", "hot", "num", "max",
    "min", "total",
})
# Vocabulary glued before "token" (``padtoken``, ``subtoken``): not a credential either.
_BENIGN_GLUED = _BENIGN_BEFORE | frozenset({
    "sub", "word", "piece", "byte", "char", "extra", "added", "vocab", "speech", "multi", "de", "re",
})
# Secret inside any word, glued to others (``--dbpassword``, ``-Dpassword``).
_SECRET_INFIXES = ("password", "passwd", "passphrase", "secret", "credential", "apikey", "privatekey")
# Secret at the end of a word after one of these (``dbpass``, ``rootpw``, ``authkey``); alone these endings are
# too common (``bypass``, ``compass``, ``monkey``, ``hotkey``) to say anything.
_GLUED_OWNERS = frozenset({
    "db", "root", "admin", "user", "sql", "mysql", "pg", "postgres", "redis", "ldap", "smtp", "mail", "ftp", "ssh",
    "sudo", "vault", "proxy", "api", "app", "login", "wifi", "store", "keystore", "truststore", "access", "auth",
    "master", "signing", "encryption", "client", "account", "storage", "gpg", "pgp", "hmac", "session", "bot",
    "service", "license", "hf", "gh", "github", "gitlab", "wandb", "openai", "aws", "azure", "gcp", "slack",
})
_GLUED_ENDINGS = ("pass", "pwd", "pw", "key", "token")
# Whole names that look secret but are not.
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(name) if w]


def is_secret_name(name: str) -> bool:
    """True when a variable, option or key of this name holds a secret (``--db-pass``, ``AccountKey``)."""
    bare = name.strip().lstrip("-")
    if not bare or bare in _NOT_SECRET_NAMES:
        return False
    words = _words(bare)
    if not words:
        return False
    if any(w in _SECRET_WORDS or _glued_secret(w) for w in words):
        return True
    for a, b in zip(words, words[1:], strict=False):
        if (a, b) in (("connection", "string"), ("conn", "str"), ("conn", "string"), ("private", "key"),
                      ("session", "id")):
            return True
    last = words[-1]
    if last in _SECRET_LAST_WORDS:
        return not (len(words) >= 2 and words[-2] in _BENIGN_BEFORE)
    return False


def _glued_secret(word: str) -> bool:
    """A secret word glued to another (``dbpassword``, ``hftoken``, ``authtoken``, ``rootpw``): no separator for
    the word split to find. ``token`` glued after anything but vocabulary (``padtoken``); the short endings only
    after an owner that makes them a credential."""
    if any(infix in word for infix in _SECRET_INFIXES):
        return True
    for ending in _GLUED_ENDINGS:
        if word.endswith(ending) and len(word) > len(ending):
            owner = word[: -len(ending)]
            if owner in _GLUED_OWNERS or (ending == "token" and owner not in _BENIGN_GLUED and len(owner) >= 2):
                return True
    return False


# --- values --------------------------------------------------------------------------------------------------

_B = r"(?<![A-Za-z0-9])"  # no letter or digit right before a token (``_`` and ``-`` may be)
_E = r"(?![A-Za-z0-9])"
# Token formats that are secrets wherever they appear; (label, pattern), the label is for docs and tests.
TOKEN_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((label, re.compile(p)) for label, p in (
    # real ones are hf_ + 34 mixed-case letters; an upper-case letter or digit tells them from hf_transfer
    ("Hugging Face token", _B + r"hf_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{8,}" + _E),
    ("GitHub token", _B + r"gh[pousr]_[A-Za-z0-9]{20,}" + _E),
    ("GitHub fine-grained PAT", _B + r"github_pat_[A-Za-z0-9_]{20,}" + _E),
    ("GitLab token", _B + r"gl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_\-]{20,}" + _E),
    ("OpenAI / Anthropic key", _B + r"sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}" + _E),
    ("Stripe key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}" + _E),
    ("AWS access key id", _B + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}" + _E),
    ("Slack token", _B + r"xox[abeoprs]-[A-Za-z0-9\-]{10,}"),
    ("Slack app token", _B + r"xapp-\d-[A-Za-z0-9\-]{10,}"),
    ("Slack webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+"),
    ("Discord webhook", r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+"),
    ("Google API key", _B + r"AIza[0-9A-Za-z_\-]{35}"),
    ("Google OAuth token", _B + r"ya29\.[0-9A-Za-z_\-]{20,}"),
    ("Google OAuth client secret", _B + r"GOCSPX-[0-9A-Za-z_\-]{20,}"),
    ("JWT", _B + r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("npm token", _B + r"npm_[A-Za-z0-9]{30,}" + _E),
    ("PyPI token", _B + r"pypi-[A-Za-z0-9_\-]{40,}"),
    ("SendGrid key", _B + r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("DigitalOcean token", _B + r"do[por]_v1_[a-f0-9]{40,}"),
    ("Databricks token", _B + r"dapi[a-f0-9]{32}" + _E),
    ("Shopify token", _B + r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}" + _E),
    ("Telegram bot token", _B + r"\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _E),
    ("Twilio key", _B + r"SK[0-9a-f]{32}" + _E),
    ("PEM private key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)"),
))

# All token formats in one pass (the labels above are for docs and tests).
_ANY_TOKEN = re.compile("|".join(f"(?:{pattern.pattern})" for _label, pattern in TOKEN_FORMATS))
# Cheap first look: a string without any of these cannot hold anything the rules below would change (most
# strings: names, paths, numbers), and skips them all. Keep in step with the patterns.
_HINT = re.compile(
    r"[=:@;]|(?:^|\s)-|hf_|gh[pousr]_|github_pat_|gl(?:pat|dt|rt|ptt|cbt)-|sk-|[sr]k_(?:live|test)_|"
    r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)|xox|xapp-|AIza|ya29\.|GOCSPX-|eyJ|npm_|pypi-|SG\.|_v1_|dapi|shp|"
    r"SK[0-9a-f]|PRIVATE KEY|(?i:bearer|basic|digest|token)"
)

# scheme://userinfo@ : the whole user info goes when it holds a password (``user:pw``, ``:pw``) or a token. A
# password may hold ``/``, ``#`` and ``?`` (an AWS secret key in ``s3://KEY:SECRET@bucket`` often does, unescaped):
# it runs to the first ``@``, unless what follows the ``:`` is a port and a path (``http://host:8080/a?b=c@d``).
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#@:\"'<>]*)(?::([^\s\"'<>]*?))?@")
_PORT_AND_PATH = re.compile(r"\d{1,5}[/?#]")
# "Authorization: Bearer X", "Basic X", "Digest X" (HTTP authorization schemes): the credential is every character
# up to a space, a quote or a separator (a percent-encoded one too); "token X" only in a token's own alphabet (it is
# also a word of prose).
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic|digest)(\s+)([^\s\"'<>,;]{8,})"
                          r"|\b(token)(\s+)([A-Za-z0-9._~+/%\-]{8,}=*)")
# A Cookie header holds every cookie of the request, ``;``-separated: all of them go, to the end of the line.
_COOKIE_HEADER = re.compile(r"(?i)(?<![A-Za-z0-9_\-])((?:set-)?cookie2?)(\s*:[ \t]*)([^\r\n]+)")
# NAME=value and NAME: value inside text: query strings (&sig=...), connection strings (;AccountKey=...;),
# shell lines (env DB_PASS=x), headers (X-Api-Key: ...), JSON-ish text ("password": "x").
_ASSIGN = re.compile(
    r"""(?<![A-Za-z0-9_\-])(["']?)([A-Za-z_][A-Za-z0-9_.\-]*)\1(\s*)([=:])(\s*)("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s&;,"'<>]+)"""
)
# --option value / --option=value inside a shell line held in one string.
_OPTION_IN_TEXT = re.compile(r"(?<!\S)(--?[A-Za-z][A-Za-z0-9_.\-]*)([ =:])([^\s]+)")


def _userinfo_secrets(m: re.Match[str]) -> tuple[str, ...] | None:
    """The secrets of a URL's user info (the password, or a token-looking user), None when it holds none."""
    user, password = m.group(2), m.group(3)
    if password is not None:
        if _PORT_AND_PATH.match(password):
            return None  # host:port/path...@: a port, not a password
        return (password, user) if _looks_like_token(user) else (password,)
    return (user,) if _looks_like_token(user) else None


def _userinfo(m: re.Match[str]) -> str:
    if _userinfo_secrets(m) is None:
        return m.group(0)  # a plain user name (git@, ssh://deploy@), or a port: not a secret, and useful
    return f"{m.group(1)}{REDACTED}@"


def _auth_scheme(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        return f"{m.group(1)}{m.group(2)}{REDACTED}"
    return f"{m.group(4)}{m.group(5)}{REDACTED}"


def _cookie_values(header_value: str) -> Iterable[str]:
    yield header_value.strip()
    for part in header_value.split(";"):
        yield part.partition("=")[2].strip()


def _looks_like_token(text: str) -> bool:
    return len(text) >= 20 and any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _assign(m: re.Match[str]) -> str:
    quote, name, sp1, op, sp2, value = m.groups()
    if not is_secret_name(name) or value in (REDACTED, f'"{REDACTED}"', f"'{REDACTED}'"):
        return m.group(0)
    if op == ":" and value.lower() in ("bearer", "basic", "digest", "token"):
        return m.group(0)  # the scheme; the credential after it is redacted by _AUTH_SCHEME
    if op == ":" and value.startswith("//"):
        return m.group(0)  # a URL's scheme separator (``auth:`` would be odd, but never eat a URL)
    if value[:1] in "\"'" and len(value) >= 2:
        value = f"{value[0]}{REDACTED}{value[0]}"
    else:
        value = REDACTED
    return f"{quote}{name}{quote}{sp1}{op}{sp2}{value}"


def _connection_string(text: str) -> str:
    """``Key=Value;Key=Value`` (ADO.NET, Azure, ODBC): a secret value runs to the next ``;``, spaces and all."""
    parts = text.split(";")
    for i, part in enumerate(parts):
        name, eq, value = part.partition("=")
        if eq and value.strip() and value != REDACTED and is_secret_name(name.strip()):
            parts[i] = f"{name}={REDACTED}"
    return ";".join(parts)


def _connection_values(text: str) -> Iterable[str]:
    for part in text.split(";"):
        name, eq, value = part.partition("=")
        if eq and value.strip() and is_secret_name(name.strip()):
            yield value.strip()


def _option_in_text(m: re.Match[str]) -> str:
    name, sep, value = m.groups()
    if value == REDACTED or not (is_secret_name(name) or (name == "-p" and sep != ":")):
        return m.group(0)
    return f"{name}{sep}{REDACTED}"


def redact_text(text: str) -> str:
    """``text`` with every secret the rules can see replaced by ``<redacted>`` (pure, linear time)."""
    if not text or not isinstance(text, str) or not _HINT.search(text):
        return text
    # URLs first: a token format inside the user info (``s3://AKIA...:SECRET@``) must not hide the password's context
    out = _URL_USERINFO.sub(_userinfo, text) if "@" in text else text
    out = _ANY_TOKEN.sub(REDACTED, out)
    if ":" in out:
        out = _COOKIE_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", out)
    if ";" in out and "=" in out:
        out = _connection_string(out)
    out = _AUTH_SCHEME.sub(_auth_scheme, out)
    out = _ASSIGN.sub(_assign, out)
    if "-" in out:
        out = _OPTION_IN_TEXT.sub(_option_in_text, out)
    return out


# A PEM key spans lines: the one rule :func:`redact_lines` applies to the whole text.
_PEM_BLOCK = next(pattern for label, pattern in TOKEN_FORMATS if label == "PEM private key")


def redact_lines(text: str) -> str:
    """Multi-line text (the tail of a log) with every line through :func:`redact_text` on its own, PEM keys
    (which span lines) first over the whole: no other rule reaches across a line end (``auth-worker:`` at the end
    of ``Exception in thread auth-worker:`` must not take the next line for its value)."""
    if not text or not isinstance(text, str):
        return text
    out = _PEM_BLOCK.sub(REDACTED, text) if "PRIVATE KEY" in text else text
    return "".join(redact_text(line) for line in out.splitlines(keepends=True))


# --- command lines -------------------------------------------------------------------------------------------


def _is_password_flag(arg: str) -> bool:
    return arg == "-p"


# What an option's name looks like: ``-p``, ``--db-pass``, ``--x.api_key``. An argument that starts with ``-``
# but is not shaped like this (a PEM key, ``-----BEGIN ... PRIVATE KEY-----``; ``---``) is a value.
_OPTION_NAME = re.compile(r"--?[A-Za-z][A-Za-z0-9_.\-]*")


def _attached_password(arg: str) -> bool:
    """``-pSECRET``: mysql's password flag with its value attached."""
    return arg.startswith("-p") and len(arg) > 2 and arg[2] != "=" and not arg.startswith("--")


def _option(arg: str) -> tuple[str, str | None] | None:
    """``(name, value)`` of an option-shaped argument (``value`` None without ``=``), else None. ``--name:value``
    (Windows tools, and some others) counts only for a secret name: elsewhere ``:`` is too common a character."""
    if not arg.startswith("-"):
        return None
    name, eq, value = arg.partition("=")
    if not _OPTION_NAME.fullmatch(name):
        colon_name, colon, colon_value = arg.partition(":")
        if colon and _OPTION_NAME.fullmatch(colon_name) and is_secret_name(colon_name):
            return colon_name, colon_value
        return None
    return name, value if eq else None


def _option_sep(arg: str, name: str) -> str:
    return arg[len(name)] if len(arg) > len(name) else "="


def _secret_option(name: str) -> bool:
    return is_secret_name(name) or _is_password_flag(name)


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line with secret option values, ``-p X``, ``NAME=secret`` and embedded secrets redacted."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if not isinstance(arg, str):
            arg = str(arg)
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if _attached_password(arg):
            out.append(f"-p{REDACTED}")
            continue
        option = _option(arg)
        if option is not None and _secret_option(option[0]):
            name, value = option
            if value is None:
                out.append(arg)
                hide_next = True  # its value is the next argument
            else:
                out.append(f"{name}{_option_sep(arg, name)}{REDACTED}" if value else arg)
            continue
        out.append(redact_text(arg))
    return tuple(out)


# --- environment ---------------------------------------------------------------------------------------------

# Variables whose values a diagnosis needs: how torch, CUDA, NCCL, threads, allocators, Python behave.
ENV_VALUE_ALLOWED = re.compile(
    r"^(CUDA_.*|CUBLAS.*|CUDNN.*|CUPTI.*|NCCL_.*|NVIDIA_.*|NV_.*|TORCH.*|PYTORCH_.*|TRITON_.*|OMP_.*|MKL_.*|"
    r"OPENBLAS_.*|KMP_.*|GOMP_.*|BLIS_.*|HF_.*|HUGGINGFACE_.*|TRANSFORMERS_.*|TOKENIZERS_PARALLELISM|"
    r"PYTHON.*|DFLASH_DIAG_.*|WANDB_MODE|WANDB_DISABLED|WANDB_SILENT|MALLOC_.*|LD_PRELOAD|LD_LIBRARY_PATH|"
    r"PATH|VIRTUAL_ENV|CONDA_PREFIX|CONDA_DEFAULT_ENV|RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|"
    r"GROUP_RANK|ROLE_RANK|MASTER_PORT|TORCHELASTIC_.*|ACCELERATE_.*|XLA_.*|JAX_.*|LANG|LC_ALL|TZ)$"
)


def env_value_allowed(name: str) -> bool:
    """True when the value of this environment variable may be recorded (allow-listed, not secret-named)."""
    return bool(ENV_VALUE_ALLOWED.match(name)) and not is_secret_name(name)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Every variable by name; values only for allow-listed, non-secret names, and those redacted too."""
    out: dict[str, str] = {}
    for name, value in env.items():
        shown_name = redact_text(str(name))
        if not value:
            out[shown_name] = value
        elif env_value_allowed(str(name)):
            out[shown_name] = redact_text(str(value))
        else:
            out[shown_name] = REDACTED if is_secret_name(str(name)) else OMITTED
    return out


# --- trees (config, board, documents) ------------------------------------------------------------------------

_ARGV_KEYS = frozenset({"argv", "cmdline", "command_line", "orig_argv"})


def redact_tree(value: Any, *, key: str | None = None, depth: int = 0) -> Any:
    """A JSON-like tree (dicts, lists, tuples, scalars) with secrets redacted; a new object, same shape.

    A secret-named key loses its value (strings and numbers; not booleans, None or empty strings), a list
    under an argv-like key is a command line, every other string goes through :func:`redact_text`.
    Trees deeper than :data:`MAX_DEPTH` are cut there (a reader must never recurse without bound)."""
    if depth > MAX_DEPTH:
        return TOO_DEEP
    secret_key = key is not None and is_secret_name(key)
    if isinstance(value, Mapping):
        return {redact_text(str(k)): redact_tree(v, key=str(k), depth=depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if key in _ARGV_KEYS and all(isinstance(v, str) for v in value):
            return list(redact_argv(value))
        return [redact_tree(v, key=key if secret_key else None, depth=depth + 1) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if secret_key and isinstance(value, (str, int, float)) and value != "":
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_strings(value: Any, depth: int = 0) -> Any:
    """Every string of a tree through :func:`redact_text`, keys left as they are: the last gate on output that
    follows our own schemas (a diff's ``"key"`` field names a config key, it is not a secret)."""
    if depth > MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_strings(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_strings(v, depth + 1) for v in value]
    return value


# --- known secret values, scrubbed everywhere ----------------------------------------------------------------


def _values_in_text(text: str) -> Iterable[str]:
    """The raw secret values :func:`redact_text` would hide in ``text`` (to hide them everywhere else)."""
    if not _HINT.search(text):
        return
    yield from (m.group(0) for m in _ANY_TOKEN.finditer(text))
    for m in _URL_USERINFO.finditer(text):
        yield from _userinfo_secrets(m) or ()
    for m in _COOKIE_HEADER.finditer(text):
        yield from _cookie_values(m.group(3))
    if ";" in text and "=" in text:
        yield from _connection_values(text)
    for m in _AUTH_SCHEME.finditer(text):
        yield m.group(3) if m.group(1) is not None else m.group(6)
    for m in _ASSIGN.finditer(text):
        if is_secret_name(m.group(2)):
            yield m.group(6).strip("\"'")
    for m in _OPTION_IN_TEXT.finditer(text):
        if is_secret_name(m.group(1)) or (m.group(1) == "-p" and m.group(2) != ":"):
            yield m.group(3)


def secret_values(env: Mapping[str, str] | None = None, argv: Sequence[str] = (), tree: Any = None) -> frozenset[str]:
    """The raw secret values in an environment, a command line and a JSON-like tree (>= 6 characters)."""
    found: list[str] = []
    for name, value in (env or {}).items():
        if not value:
            continue
        if is_secret_name(str(name)):
            found.append(str(value))
        found.extend(_values_in_text(str(value)))
    hide_next = False
    for arg in argv:
        option = _option(arg)
        if hide_next:
            found.append(arg)
            hide_next = False
        elif _attached_password(arg):
            found.append(arg[2:])
        elif option is not None and _secret_option(option[0]):
            if option[1] is None:
                hide_next = True
            else:
                found.append(option[1])
        else:
            found.extend(_values_in_text(arg))
    if tree is not None:
        found.extend(_values_in_tree(tree, None, 0))
    return frozenset(v for v in found if len(v) >= MIN_SCRUB_CHARS and v not in (REDACTED, OMITTED))


def _values_in_tree(value: Any, key: str | None, depth: int) -> Iterable[str]:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _values_in_tree(v, str(k), depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _values_in_tree(v, key, depth + 1)
    elif isinstance(value, str):
        if key is not None and is_secret_name(key):
            yield value
        yield from _values_in_text(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and key is not None and is_secret_name(key):
        yield str(value)


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """Replace every known secret value in a plain string (longest first)."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub_tree(value: Any, secrets: Iterable[str], depth: int = 0) -> Any:
    """A JSON-like tree with every known secret value replaced inside its strings (keys too), never in numbers."""
    ordered = tuple(sorted(set(secrets), key=len, reverse=True))
    return _scrub(value, ordered, depth) if ordered else value


def _scrub(value: Any, secrets: tuple[str, ...], depth: int) -> Any:
    if depth > MAX_DEPTH:
        return TOO_DEEP
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if isinstance(value, Mapping):
        return {scrub_text(str(k), secrets): _scrub(v, secrets, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v, secrets, depth + 1) for v in value]
    return value
