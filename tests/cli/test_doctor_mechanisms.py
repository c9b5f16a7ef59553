"""A real program whose consumer writes a JSON journal line per batch: with ``indent=2`` json.dumps runs the
pure-Python encoder (json/encoder.py) and the consumer limits the queue; with ``indent=None`` the C encoder does the
same work. From outside, doctor's verdict says the mechanism where it runs, with its share, and not where it does
not (the twin's verdict names only the C encoder's time); the indent the program's code passes is named as its
cause (``setting-slows-code``, read from the source on disk, its value from the configuration file on the program's
command line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "dflash_diag"]

PROGRAM = r"""
import json, queue, sys, threading

with open(sys.argv[1]) as fh:
    cfg = json.load(fh)
indent = cfg["journal"]["indent"]
q = queue.Queue(maxsize=8)

def produce():
    n = 0
    while True:
        n += 1
        q.put([{"id": n * 100 + i, "loss": 0.5 / (i + 1), "tokens": list(range(i % 7, i % 7 + 12)),
                "tags": {"split": "train", "shard": i % 4}} for i in range(64)])


threading.Thread(target=produce, name="producer", daemon=True).start()
print("READY", flush=True)
written = 0
while True:
    written += len(json.dumps(q.get(), indent=indent))  # the journal line of each batch
"""


@pytest.mark.parametrize("indent", ["2", "none"])
def test_the_pure_python_json_encoder_is_said_where_the_consumers_time_goes(tmp_path: Path, indent: str) -> None:
    script = tmp_path / "journal.py"
    script.write_text(PROGRAM)
    (tmp_path / "journal.json").write_text(json.dumps({"journal": {"indent": None if indent == "none" else 2}}))
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "boards")}
    proc = subprocess.Popen([sys.executable, str(script), "journal.json"], stdout=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(1.0)
        out = subprocess.run([*CLI, "doctor", str(proc.pid), "--json", "--no-native-stacks"], capture_output=True,
                             text=True, timeout=120, env=env)
    finally:
        proc.kill()
        proc.wait()
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    head = report["headline"]
    # With the C encoder the two stages are close: under a loaded box's scheduling either may limit the queue (the
    # fresh clone's four workers saw the producer limit it); what the twin must show is no encoder blamed, no warning.
    assert head is not None and ("consumer stage" in head["text"] or indent == "none"), head
    said = "JSON encoded by the pure-Python encoder" in head["text"]
    assert said == (indent == "2"), head["text"]
    warned = [f for f in report["findings"] if f["severity"] in ("warning", "critical")]
    if not said:
        assert not warned, warned
        return
    share = int(head["text"].split("runs the C encoder): ", 1)[1].split("%", 1)[0])
    assert share >= 50, head["text"]  # nearly all the consumer's work is the encoder's
    # The program's own code passes the indent, a name it read from its configuration file (named on its command
    # line): the setting that puts the time there is the cause, with the key and the file's value
    # (setting-slows-code), and nothing else is warned.
    assert [f["rule_id"] for f in warned] == ["setting-slows-code"], warned
    assert warned[0]["claim"].startswith("json.dumps(indent=indent (`indent` = 2 in journal.json)) at journal.py:21 "
                                         "(default "
                                         "None) puts MainThread's time into JSON encoded by the pure-Python encoder")
