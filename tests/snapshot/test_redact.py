"""Secret redaction: names, option forms, URLs, token formats, nested JSON; and what must stay readable."""

from __future__ import annotations

import pytest

from dflash_diag.redact import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_json,
    redact_text,
    scrub_values,
    secret_values,
)


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "MY_KEY",
                                  "DB_PASSWORD", "client_secret", "--api-key", "--token", "api_key", "SESSION_KEY"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "TOKENIZERS_PARALLELISM", "tokens_per_s", "max_tokens", "keyboard",
                                  "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "monkey", "--lr", "PATH"])
def test_names_that_stay_readable(name: str) -> None:
    assert not is_secret_name(name)


def test_argv_both_option_forms() -> None:
    argv = ["python", "train.py", "--api-key=abc123xyz", "--token", "t0k3nvalue", "--lr=3e-4", "--tokens_per_s", "5"]
    assert redact_argv(argv) == ("python", "train.py", f"--api-key={REDACTED}", "--token", REDACTED, "--lr=3e-4",
                                 "--tokens_per_s", "5")
    assert set(secret_values({}, argv)) == {"abc123xyz", "t0k3nvalue"}


def test_embedded_secrets_in_text() -> None:
    assert redact_text("https://user:hunter2@example.com/x") == f"https://{REDACTED}@example.com/x"
    assert redact_text("Authorization: Bearer abcdef0123456789") == f"Authorization: Bearer {REDACTED}"
    assert redact_text("HF_TOKEN=hf_abcdefghijklmnopqrstuvwx python x.py") == f"HF_TOKEN={REDACTED} python x.py"
    assert "AKIAABCDEFGHIJKLMNOP" not in redact_text("key id AKIAABCDEFGHIJKLMNOP in a log line")
    assert redact_text("token embeddings are large") == "token embeddings are large"


def test_env_and_nested_json() -> None:
    env = redact_env({"WANDB_API_KEY": "w" * 40, "PATH": "/usr/bin", "EMPTY_TOKEN": ""})
    assert env == {"WANDB_API_KEY": REDACTED, "PATH": "/usr/bin", "EMPTY_TOKEN": ""}
    doc = redact_json({"config": {"hf_token": "x1", "lr": 0.1, "nested": [{"password": "p@ss"}]},
                       "argv": ["train.py", "--token", "zzz"], "tokens_per_s": 100.0})
    assert doc == {"config": {"hf_token": REDACTED, "lr": 0.1, "nested": [{"password": REDACTED}]},
                   "argv": ["train.py", "--token", REDACTED], "tokens_per_s": 100.0}


def test_scrub_values_everywhere_but_short_ones() -> None:
    assert scrub_values("a /tmp/supersecret/x and abc", ["supersecret", "abc"]) == f"a /tmp/{REDACTED}/x and abc"
