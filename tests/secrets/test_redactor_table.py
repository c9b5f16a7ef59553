"""The one redactor (dflash_contract.redact) against the table of real secret forms and look-alikes.

The same table drives the end-to-end test (test_no_secret_in_any_output.py): here each form is checked
alone, in the structure it is planted in, so a failure names the exact rule that broke.
"""

from __future__ import annotations

import json

import pytest
from secret_table import LOOKALIKE_ARGV, LOOKALIKE_CONFIG, LOOKALIKE_ENV, SECRETS, Secret

from dflash_contract.redact import (
    OMITTED,
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_lines,
    redact_text,
    redact_tree,
    scrub_text,
    scrub_tree,
    secret_values,
)


def _forms(needle: str) -> list[str]:
    """The needle as it would appear raw or JSON-escaped."""
    return [needle, json.dumps(needle)[1:-1]]


def test_the_table_is_big_enough() -> None:
    assert len(SECRETS) >= 100
    assert len({s.id for s in SECRETS}) == len(SECRETS)
    assert all(s.env or s.argv or s.config or s.names for s in SECRETS)


@pytest.mark.parametrize("secret", SECRETS, ids=[s.id for s in SECRETS])
def test_each_form_is_redacted_where_it_is_planted(secret: Secret) -> None:
    """Each form as the one redactor sees it: env, argv and config as structures; names as the sources redact them
    (the rules, then the secret values of the process's env and argv); an exception message as a stderr tail."""
    known = secret_values(secret.env, ["python", *secret.argv])
    shown = json.dumps({
        "env": redact_env(secret.env),
        "argv": list(redact_argv(["python", "train.py", *secret.argv])),
        "config": redact_tree(secret.config),
        "names": [scrub_text(redact_text(name), known) for name in secret.names],
        "stderr": scrub_text(redact_lines(f"Exception in thread t:\nRuntimeError: {secret.exception}\n"), known),
    })
    for form in _forms(secret.needle):
        assert form not in shown, f"{secret.id}: {shown}"
    assert all(kept in shown for kept in secret.keep), shown


_PLANTED_IN_VALUES = [s for s in SECRETS if s.env or s.argv or s.config]


@pytest.mark.parametrize("secret", _PLANTED_IN_VALUES, ids=[s.id for s in _PLANTED_IN_VALUES])
def test_each_form_is_hidden_wherever_else_it_appears(secret: Secret) -> None:
    """A secret read from env/argv/config is also scrubbed from unrelated strings (a path, a thread name)."""
    known = secret_values(secret.env, ["python", *secret.argv], tree=secret.config)
    whole = next(v for v in [*secret.env.values(), *secret.argv, *map(str, _leaves(secret.config))] if secret.needle in v)
    tree = {"frame": f"/data/{whole}/train.py", "thread": f"worker {whole}", "n": 3}
    out = json.dumps(scrub_tree(tree, known))
    for form in _forms(secret.needle):
        assert form not in out, f"{secret.id}: {out}"


@pytest.mark.parametrize("secret", [s for s in SECRETS if s.argv], ids=[s.id for s in SECRETS if s.argv])
def test_argv_forms_are_redacted_inside_free_text_too(secret: Secret) -> None:
    """A shell line on the board, a log message: the same forms inside one string."""
    line = " ".join(["python", "train.py", *secret.argv])
    assert secret.needle not in redact_text(line) or secret.id in _NEEDS_STRUCTURE


# Forms that can only be told apart as structured argv (the value is an arbitrary word after a flag that a
# free-text reader cannot know takes a value, or a multi-line value).
_NEEDS_STRUCTURE: set[str] = {"argv -pX"}


def _leaves(tree: object) -> list[object]:
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in _leaves(v)]
    if isinstance(tree, list):
        return [leaf for v in tree for leaf in _leaves(v)]
    return [tree]


def test_lookalikes_stay_readable() -> None:
    tree = redact_tree({"config": LOOKALIKE_CONFIG, "argv": ["python", *LOOKALIKE_ARGV]})
    assert tree["config"] == LOOKALIKE_CONFIG
    assert tree["argv"] == ["python", *LOOKALIKE_ARGV]
    assert redact_env(LOOKALIKE_ENV) == LOOKALIKE_ENV


@pytest.mark.parametrize("name", ["tokenizer", "--tokenizer", "tokens_per_s", "mask_token_id", "pad_token", "eos_token",
                                  "num_key_heads", "linear_num_key_heads", "TOKENIZERS_PARALLELISM", "PWD", "OLDPWD",
                                  "sort_key", "keep_keys", "max_tokens", "keyboard", "monkey", "num_passes", "author",
                                  "signature_version", "X-Amz-Date", "X-Amz-Expires", "PYTORCH_CUDA_ALLOC_CONF", "--lr"])
def test_names_that_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize("name", ["DB_PASS", "GITHUB_PAT", "AUTH_HEADER", "SSHPASS", "GPG_PASSPHRASE", "SLACK_WEBHOOK_URL",
                                  "AZURE_STORAGE_CONNECTION_STRING", "--db-pass", "--passphrase", "--tokenizer-token",
                                  "HF_TOKEN", "AccountKey", "SharedAccessSignature", "X-Amz-Signature", "X-Amz-Credential",
                                  "X-Amz-Security-Token", "sig", "WANDB_API_KEY", "APIKey", "MYSQL_PWD", "Password",
                                  "client_secret", "SENTRY_DSN", "--x-api-key", "cookie"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


def test_environment_is_an_allow_list() -> None:
    env = redact_env({"CUDA_VISIBLE_DEVICES": "0,1", "MY_APP_SETTING": "blue", "HOME": "/home/u", "HF_TOKEN": "x" * 12,
                      "EMPTY": ""})
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "MY_APP_SETTING": OMITTED, "HOME": OMITTED, "HF_TOKEN": REDACTED,
                   "EMPTY": ""}


def test_structured_scrubbing_never_corrupts_numbers_or_json() -> None:
    """The old regex pass over serialised JSON turned 1796550.25 into ``1796<redacted>.25``."""
    secret = "179655"
    tree = {"lr": 1796550.25, "step": 1796551, "note": f"x{secret}y", "quoted": 'a"b\\c'}
    out = scrub_tree(tree, secret_values({"DB_PASSWORD": secret}, []))
    assert out == {"lr": 1796550.25, "step": 1796551, "note": f"x{REDACTED}y", "quoted": 'a"b\\c'}
    json.loads(json.dumps(out))


def test_secret_with_quotes_and_backslashes_never_survives_serialisation() -> None:
    secret = 'p"w\\d\\x'
    doc = {"argv": ["train.py", "--password", secret], "note": f"used {secret} here"}
    text = json.dumps(scrub_tree(redact_tree(doc), secret_values({}, ["--password", secret])))
    assert secret not in text and json.dumps(secret)[1:-1] not in text


def test_deep_trees_are_cut_not_crashed() -> None:
    deep: object = "leaf"
    for _ in range(2000):
        deep = {"k": deep}
    redact_tree(deep)  # no RecursionError
    scrub_tree(deep, ["leaf12"])


_PEM_POSITIONAL = ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIpositionalPemKeyBody0123456789\n"
                   "-----END EC PRIVATE KEY-----")


@pytest.mark.parametrize("pem", [_PEM_POSITIONAL, _PEM_POSITIONAL.replace("\n", " "),
                                 "-----BEGIN PRIVATE KEY-----\nMIIpemWithPadding0123456789abc=\n-----END PRIVATE KEY-----"])
def test_a_positional_that_starts_with_a_dash_is_not_an_option(pem: str) -> None:
    """A PEM key given as an argument starts with ``-----`` and holds the words *private key*: it is a value, not
    a secret-named option (which kept it whole and hid the innocent argument after it instead)."""
    argv = ["python", "sign.py", pem, "innocent-after-pem", "--db-pass", "hidden"]
    shown = redact_argv(argv)
    assert "positionalPemKeyBody" not in " ".join(shown) and "pemWithPadding" not in " ".join(shown), shown
    assert shown[1:] == ("sign.py", REDACTED, "innocent-after-pem", "--db-pass", REDACTED)
    known = secret_values({}, argv)
    assert "innocent-after-pem" not in known and "hidden" in known
    assert any("MHcCAQEEIpositionalPemKeyBody" in v or "pemWithPadding" in v for v in known), known


def test_option_shapes_still_hide_their_values() -> None:
    argv = ["x", "--api-key=a1b2c3d4e5", "-p", "pw123456", "-pAttached99", "--token", "t0k3n-value", "--lr=3e-4",
            "---", "-", "--", "keep-me"]
    assert redact_argv(argv) == ("x", f"--api-key={REDACTED}", "-p", REDACTED, f"-p{REDACTED}", "--token", REDACTED,
                                 "--lr=3e-4", "---", "-", "--", "keep-me")


def test_a_log_tail_is_redacted_line_by_line_and_pem_keys_across_lines() -> None:
    tail = ("Exception in thread auth-refresh:\nTraceback (most recent call last):\n"
            '  File "/srv/app.py", line 3, in refresh\n'
            "RuntimeError: GET https://svc:tailUrlPw0123@api/v1 token tailTokenValue0123\n"
            f"ValueError: bad key\n{_PEM_POSITIONAL}\nafter the key\n")
    out = redact_lines(tail)
    assert "tailUrlPw0123" not in out and "tailTokenValue0123" not in out and "positionalPemKeyBody" not in out
    # a name that says secret at the end of one line never takes the next line for its value
    assert out.startswith("Exception in thread auth-refresh:\nTraceback (most recent call last):\n"), out
    assert out.endswith(f"ValueError: bad key\n{REDACTED}\nafter the key\n"), out
