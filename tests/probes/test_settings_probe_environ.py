"""The settings probe copies the environment while another thread of the program sets variables: no error reaches
its reading (CI's tiny trainer once read 'dictionary changed size during iteration')."""

from __future__ import annotations

import os
import threading

from probes import settings as settings_probe


def test_the_environment_is_copied_while_another_thread_changes_it() -> None:
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            os.environ[f"DFLASH_DIAG_TEST_CHURN_{i % 50}"] = "1"
            os.environ.pop(f"DFLASH_DIAG_TEST_CHURN_{(i + 25) % 50}", None)
            i += 1

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        copies = [settings_probe._environ_now() for _ in range(300)]
    finally:
        stop.set()
        t.join(5)
        for i in range(50):
            os.environ.pop(f"DFLASH_DIAG_TEST_CHURN_{i}", None)
    assert all(isinstance(c, dict) for c in copies) and any(c for c in copies)
    assert copies[-1].get("PATH") == os.environ.get("PATH")
