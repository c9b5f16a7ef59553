"""The settings catalogue's values as they may be shown: a proxy's URL only where it is on this machine, and then
without credentials or path (the connections to it are told apart by its port); every other odd value reads
``<set>``."""

from __future__ import annotations

import pytest

from dflash_contract.settings import ENV_BY_NAME, SET_VALUE, known_env, loopback_proxy, shown_env_value


@pytest.mark.parametrize(("value", "shown"), [
    ("http://127.0.0.1:3128", "http://127.0.0.1:3128"),
    ("http://user:s3cret@127.0.0.1:3128/path?q=1", "http://127.0.0.1:3128"),
    ("localhost:8080", "http://localhost:8080"),
    ("https://127.0.0.1", "https://127.0.0.1:443"),
    ("socks5://[::1]:1080", "socks5://[::1]:1080"),
    ("http://proxy.corp.example:3128", SET_VALUE),
    ("http://user:pw@10.0.0.5:3128", SET_VALUE),
    ("http://127.0.0.1.evil.example:80", SET_VALUE),
    ("", ""),
])
def test_a_proxy_is_shown_only_on_the_loopback_and_never_with_its_credentials(value: str, shown: str) -> None:
    assert shown_env_value("http_proxy", value) == shown
    assert "s3cret" not in (shown_env_value("HTTPS_PROXY", value) or "")


def test_the_catalogue_keeps_known_names_only_and_their_defaults() -> None:
    env = {"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1", "PYTORCH_JIT": "1", "no_proxy": "", "SECRET_TOKEN": "x"}
    assert dict(known_env(env)) == {"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1", "PYTORCH_JIT": "1", "no_proxy": ""}
    assert ENV_BY_NAME["PYTORCH_JIT"].is_default("1") and not ENV_BY_NAME["PYTORCH_JIT"].is_default("0")
    assert ENV_BY_NAME["TORCH_FORCE_WEIGHTS_ONLY_LOAD"].is_default("0")
    assert loopback_proxy("not a url at all") is None
