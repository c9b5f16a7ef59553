"""The outside evidence, read for real: /proc of a live child, its stderr file (and never a pipe), source files
on disk (functions at lines, queue calls, unused logits, an edit after the start)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from dflash_diag.model import Frame, StackSample, ThreadSample
from dflash_diag.model.evidence import ENV_LIBRARY
from dflash_diag.sources.outside import OutsideReader
from dflash_diag.sources.redaction import ProcessRedactor

PROGRAM = '''import queue, sys, time


class Worker:
    def run(self, q):
        while True:
            item = q.get(timeout=5)
            cfg = {}.get("x", 1)
            logits = self.lm_head(item)
            self.out_q.put(item)


def main():
    print("Exception in thread w-1:", file=sys.stderr)
    print("ready", flush=True)
    time.sleep(60)


main()
'''


def _sample(pid: int, frames: list[Frame]) -> StackSample:
    thread = ThreadSample(thread_id=1, os_thread_id=pid, name="MainThread", active=True, owns_gil=True,
                          frames=tuple(frames))
    return StackSample(pid=pid, monotonic_s=0.0, wall_s=time.time(), duration_s=0.01, native=False, threads=(thread,))


def _reader_in(tmp_path: Path, pid: int, app: Path, cmdline: bytes,
               secrets: frozenset[str] = frozenset()) -> OutsideReader:
    """An OutsideReader of a process ``pid`` as a fake /proc under ``tmp_path`` shows it: its command line and its
    working directory ``app``."""
    proc_dir = tmp_path / "proc" / str(pid)
    proc_dir.mkdir(parents=True)
    (proc_dir / "cmdline").write_bytes(cmdline)
    (proc_dir / "cwd").symlink_to(app)
    return OutsideReader(pid, proc_root=tmp_path / "proc", redactor=ProcessRedactor(secrets))


def _start(tmp_path: Path, stderr: int | None) -> subprocess.Popen[bytes]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    err = open(tmp_path / "err.log", "wb") if stderr is None else stderr
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def test_process_facts_of_a_live_child_with_stderr_in_a_file(tmp_path: Path) -> None:
    proc = _start(tmp_path, None)
    try:
        facts = OutsideReader(proc.pid).process_facts()
        assert facts.state in ("S", "R")
        assert facts.start_wall_s is not None and abs(facts.start_wall_s - time.time()) < 60
        assert facts.stderr_target == str(tmp_path / "err.log")
        assert facts.stderr_tail is not None and "Exception in thread w-1:" in facts.stderr_tail
        assert facts.uses_cuda is False
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while OutsideReader(proc.pid).process_facts().state != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert OutsideReader(proc.pid).process_facts().state == "T"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_a_pipe_on_stderr_is_never_read(tmp_path: Path) -> None:
    proc = _start(tmp_path, subprocess.PIPE)
    try:
        facts = OutsideReader(proc.pid).process_facts()
        assert facts.stderr_target.startswith("pipe:") and facts.stderr_tail is None
        assert proc.stderr is not None
        proc.kill()
        proc.wait()
        # What the program wrote is still in the pipe for its reader: we took nothing out of it.
        assert b"Exception in thread w-1:" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_code_facts_read_the_files_on_disk(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    frames = [Frame("Worker.run", str(script), 7), Frame("main", str(script), 16),
              Frame("get", "/usr/lib/python3.11/queue.py", 180)]
    code, files = OutsideReader(os.getpid()).code_facts([_sample(os.getpid(), frames)])
    by_line = {c.line: c for c in code}
    assert set(by_line) == {7, 16}  # library frames are not the program's code
    run = by_line[7]
    assert run.function == "Worker.run" and run.text == "item = q.get(timeout=5)"
    assert run.queue_calls == ("q.get", "self.out_q.put")  # the dict's .get("x", 1) is not a queue
    assert run.unused_logits == ((9, "logits = self.lm_head(item)"),)
    assert by_line[16].function == "main" and by_line[16].unused_logits == ()
    assert files[0].exists and files[0].mtime_wall_s == script.stat().st_mtime


def test_an_edit_moves_the_function_away_from_the_sampled_line(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    reader = OutsideReader(os.getpid())
    sample = _sample(os.getpid(), [Frame("Worker.run", str(script), 7)])
    assert reader.code_facts([sample])[0][0].function == "Worker.run"
    time.sleep(0.01)
    script.write_text("def helper():\n    return 1\n\n\n\n\n\n\n\n\n\n" + PROGRAM)  # new mtime: re-read
    os.utime(script, (time.time() + 5, time.time() + 5))
    moved = reader.code_facts([sample])[0][0]
    assert moved.function is None and moved.text == ""  # the old line 7 is now blank space below helper()
    script.write_text("def broken(:\n")
    os.utime(script, (time.time() + 10, time.time() + 10))
    (line,) = reader.code_facts([sample])[0]
    assert line.parsed is False and line.function is None
    script.unlink()
    code, files = reader.code_facts([sample])
    assert code == () and files[0].exists is False


def test_modules_a_sampled_file_imports_are_listed_with_their_mtime(tmp_path: Path) -> None:
    package = tmp_path / "dtrain"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "losses.py").write_text("def ce():\n    return 0\n")
    loop = package / "loop.py"
    loop.write_text("import os\nfrom dtrain.losses import ce\n\n\ndef train():\n    return ce()\n")
    code, files = OutsideReader(os.getpid()).code_facts([_sample(os.getpid(), [Frame("train", str(loop), 6)])])
    by_path = {f.path: f for f in files}
    imported = by_path[str(package / "losses.py")]
    assert imported.imported_by == "loop.py" and imported.mtime_wall_s == (package / "losses.py").stat().st_mtime
    assert str(loop) in by_path and by_path[str(loop)].imported_by == ""
    assert len(files) == 2  # os is the standard library's, not the program's


def test_the_loop_around_a_line_says_whether_it_runs_backward_and_the_optimizer_step() -> None:
    """The casebook's gradient-averaging trainer, as written: the per-tensor all_reduce is called in the micro-batch
    loop beside backward() (the step outside it); the bucketed one after that loop, in the loop that also steps."""
    program = Path(__file__).resolve().parents[1] / "casebook" / "programs" / "gpu_gloo_microstep_allreduce"
    script = str(program / "dp_train.py")
    frames = [Frame("average_each", script, 37), Frame("main.<locals>.train", script, 86),
              Frame("main.<locals>.train", script, 88), Frame("main.<locals>.sample", script, 74)]
    code, _ = OutsideReader(os.getpid()).code_facts([_sample(os.getpid(), frames)])
    by_line = {c.line: c for c in code}
    assert (by_line[86].loop_line, by_line[86].loop_backward, by_line[86].loop_step) == (79, True, False)
    assert (by_line[88].loop_line, by_line[88].loop_backward, by_line[88].loop_step) == (78, True, True)
    assert (by_line[37].loop_line, by_line[37].loop_backward) == (35, False)  # `for p in params:` in the helper
    assert by_line[74].loop_line == 73 and not by_line[74].loop_backward  # the sampler's loop


HEADS = '''\
class Model:
    def forward(self, h, aux_weight):
        logits = self.classifier(h)
        recon = self.decoder(h)
        _probe = self.probe(h)
        feats = self.encoder.pool(h)
        if aux_weight > 0:
            return logits, feats
        return logits

    def step(self, x):
        global CACHE
        z = self.body(x)
        CACHE = self.cache.build(x)

        def use():
            return z
        return use
'''


def test_a_module_call_whose_output_the_function_never_reads_is_an_unused_output(tmp_path: Path) -> None:
    """`recon = self.decoder(h)` is never read; `feats` is (under a condition), `_probe` is a meant discard, and a
    name a nested function reads is read."""
    script = tmp_path / "heads.py"
    script.write_text(HEADS)
    frames = [Frame("Model.forward", str(script), 4), Frame("Model.step", str(script), 13)]
    code, _ = OutsideReader(os.getpid()).code_facts([_sample(os.getpid(), frames)])
    by_line = {c.line: c for c in code}
    assert by_line[4].unused_outputs == ((4, "recon = self.decoder(h)"),)
    assert by_line[13].unused_outputs == ()  # a global is read elsewhere


def test_a_gpu_device_file_open_is_what_says_cuda_is_in_use(tmp_path: Path) -> None:
    from dflash_diag.model.evidence import ProcessFacts
    from dflash_diag.sources.outside import gpu_device_open

    fds = tmp_path / "fd"
    fds.mkdir()
    (fds / "0").symlink_to("/dev/null")
    (fds / "3").symlink_to("/dev/nvidiactl")  # the control device: the driver loaded, no context on a GPU
    assert gpu_device_open(fds) is False
    (fds / "4").symlink_to("/dev/nvidia0")
    assert gpu_device_open(fds) is True
    assert gpu_device_open(tmp_path / "gone") is None
    facts = ProcessFacts(state="S", start_wall_s=None, stderr_target="", stderr_tail=None, uses_cuda=True)
    assert facts.cuda_in_use is True  # an older recording: the mapping alone, as before
    assert replace(facts, gpu_device_open=False).cuda_in_use is False  # torch's CUDA build, CPU work only
    assert replace(facts, gpu_device_open=True).cuda_in_use is True
    assert replace(facts, uses_cuda=False, gpu_device_open=None).cuda_in_use is False


DECORATED = '''import functools
import torch


@torch.jit.script
def smooth(x: torch.Tensor) -> torch.Tensor:
    return x * 0.9


@functools.lru_cache(maxsize=None)
@torch.compile(mode="reduce-overhead")
def step(x):
    return x + 1


def plain(x):
    return x
'''


def test_a_sampled_functions_decorators_are_read_as_dotted_names(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(DECORATED)
    frames = [Frame("smooth", str(script), 7), Frame("step", str(script), 13), Frame("plain", str(script), 17)]
    code, _ = OutsideReader(os.getpid()).code_facts([_sample(os.getpid(), frames)])
    by_line = {c.line: c for c in code}
    assert by_line[7].decorators == ("torch.jit.script",)
    assert by_line[13].decorators == ("functools.lru_cache", "torch.compile")  # a call's arguments dropped
    assert by_line[17].decorators == ()


KNOBS = '''import json
import sqlite3


def open_store(cfg):
    fast = sqlite3.connect(":memory:", cached_statements=0)
    slow = sqlite3.connect(cfg["path"], cached_statements=int(cfg["statement_cache"]))
    other = sqlite3.connect(cfg["path"], timeout=5.0)  # not in the catalogue: never recorded
    model_config = {"regex_engine": cfg.get("engine", "rust-regex"), "password": "hunter2"}
    text = json.dumps(fast, indent=2)
    writer.dump(x, indent=4)  # another callable than the catalogue's: not recorded
    fast.execute("PRAGMA foreign_keys = 1")
    slow.execute(f"PRAGMA synchronous = {cfg['sync']}")
    slow.execute("PRAGMA journal_mode = WAL")  # not in the catalogue: not recorded
    slow.execute("SELECT * FROM t WHERE k = 'PRAGMA foreign_keys = ON'")
    sys.set_coroutine_origin_tracking_depth(int(cfg.coroutine_origin_depth))
    np.setbufsize(256)
    sys.setrecursionlimit(5000)  # not in the catalogue: not recorded
    return fast, slow, other, model_config, text
'''


def test_the_catalogued_settings_a_file_passes_are_read_with_their_literal_or_configuration_key(
        tmp_path: Path) -> None:
    script = tmp_path / "store.py"
    script.write_text(KNOBS)
    (tmp_path / "main.py").write_text("import store\n\n\nstore.open_store({})\n")
    frames = [Frame("<module>", str(tmp_path / "main.py"), 4)]
    _, files = OutsideReader(os.getpid()).code_facts([_sample(os.getpid(), frames)])
    imported = next(f for f in files if f.path.endswith("store.py"))
    assert imported.imported_by == "main.py"  # not sampled: read because the sampled file imports it
    assert [(k.line, k.call, k.name, k.value, k.key) for k in imported.knobs] == [
        (6, "sqlite3.connect", "cached_statements", "0", ""),
        (7, "sqlite3.connect", "cached_statements", "", "statement_cache"),
        (9, "{...}", "regex_engine", "", "engine"),
        (10, "json.dumps", "indent", "2", ""),
        (12, "fast.execute", "PRAGMA foreign_keys", "ON", ""),  # SQL text: SQLite's 1 is ON
        (13, "slow.execute", "PRAGMA synchronous", "", "sync"),
        # A positional argument the catalogue names: the call's own, read as a keyword's value is.
        (16, "sys.set_coroutine_origin_tracking_depth", "set_coroutine_origin_tracking_depth", "",
         "coroutine_origin_depth"),
        (17, "np.setbufsize", "setbufsize", "256", "")]
    assert "hunter2" not in repr(files)  # a key the catalogue does not name is never read out


def test_a_setting_read_from_a_configuration_key_gets_the_value_the_files_on_the_command_line_set(
        tmp_path: Path) -> None:
    # The program was started as `python train.py --config=configs/live.toml run.json`: its settings read from
    # configuration keys get those files' values; a key set twice to different values, or to a long text, gets none.
    app = tmp_path / "app"
    (app / "configs").mkdir(parents=True)
    (app / "configs" / "live.toml").write_text('[store]\nstatement_cache = 0\n[schema]\nengine = "python-re"\n'
                                               '[db]\nforeign_keys = "on"\nsync = "FULL"\n[auth]\ntoken = "hunter2"\n'
                                               '[diagnostics]\ncoroutine_origin_depth = 64\n')
    (app / "run.json").write_text('{"other": {"sync": "OFF"}}')
    (app / "store.py").write_text(KNOBS)
    frames = [Frame("open_store", str(app / "store.py"), 6)]
    reader = _reader_in(tmp_path, 4242, app, b"python\0train.py\0--config=configs/live.toml\0run.json\0")
    _, files = reader.code_facts([_sample(4242, frames)])
    (store,) = files
    assert [(k.name, k.value, k.key, k.configured_in) for k in store.knobs] == [
        ("cached_statements", "0", "", ""),
        ("cached_statements", "0", "statement_cache", "live.toml"),
        ("regex_engine", "'python-re'", "engine", "live.toml"),
        ("indent", "2", "", ""),
        ("PRAGMA foreign_keys", "ON", "", ""),
        ("PRAGMA synchronous", "", "sync", ""),  # FULL in one file, OFF in the other: not said
        ("set_coroutine_origin_tracking_depth", "64", "coroutine_origin_depth", "live.toml"),
        ("setbufsize", "256", "", "")]
    assert "hunter2" not in repr(files)  # a key no setting reads is never read out


def test_a_module_imported_inside_a_function_is_read_and_says_so(tmp_path: Path) -> None:
    # train.py imports its tokenizer module in main(): its settings are read as a module-level import's are.
    (tmp_path / "store.py").write_text(KNOBS)
    (tmp_path / "train.py").write_text("import os\n\n\ndef main():\n    from store import open_store\n"
                                       "    open_store({})\n")
    frames = [Frame("main", str(tmp_path / "train.py"), 6)]
    _, files = OutsideReader(os.getpid()).code_facts([_sample(os.getpid(), frames)])
    store = next(f for f in files if f.path.endswith("store.py"))
    assert store.imported_by == "train.py inside a function"
    assert ("cached_statements", "0") in [(k.name, k.value) for k in store.knobs]


def test_pragmas_whose_names_the_program_computes_are_read_from_its_configuration(tmp_path: Path) -> None:
    # `execute(f"PRAGMA {name} = {value}")` over a configuration table: the catalogued pragmas that table sets are
    # the settings (a pragma the catalogue does not name, and a default, are left as they are said).
    app = tmp_path / "app"
    (app / "configs").mkdir(parents=True)
    (app / "configs" / "field.toml").write_text('[catalog.pragmas]\nautomatic_index = "OFF"\ntemp_store = "MEMORY"\n'
                                                'foreign_keys = "off"\n')
    (app / "catalog.py").write_text("def open_catalog(db, pragmas):\n    for name, value in pragmas.items():\n"
                                    "        db.execute(f\"PRAGMA {name} = {value}\")\n")
    reader = _reader_in(tmp_path, 4243, app, b"python\0train.py\0--config\0configs/field.toml\0")
    _, (catalog,) = reader.code_facts([_sample(4243, [Frame("open_catalog", str(app / "catalog.py"), 3)])])
    assert [(k.name, k.value, k.configured_in) for k in catalog.knobs] == [
        ("PRAGMA *", "", ""), ("PRAGMA foreign_keys", "OFF", "field.toml"),
        ("PRAGMA automatic_index", "OFF", "field.toml")]


PASSED = '''import subprocess
import numpy as np
from tokenizers import models


def build(cfg, opts):
    bpe = models.BPE(dropout=cfg["bpe_dropout"], continuing_subword_prefix=cfg["unk"], cache_capacity=cfg["words"])
    arr = np.zeros(8, dtype=np.float32)  # a module's constant: not a configuration's value
    proc = subprocess.Popen(["x"], stdout=subprocess.PIPE, bufsize=int(opts.pipe_buffer))
    client = connect(timeout=cfg["timeout"])  # not an imported library's callable
    auth = models.Remote(api_key=cfg["api_key"], retries=cfg["secret_retries"])  # credentials: never read
    lost = models.WordPiece(max_input_chars_per_word=cfg["unset_key"])  # no file sets it: not kept
    packer = subprocess.list2cmdline(opts.level)  # a positional argument: the call's own
    return bpe, arr, proc, client, auth, lost, packer
'''


def test_arguments_passed_to_a_library_from_a_configuration_key_are_read_with_the_files_values(
        tmp_path: Path) -> None:
    # Outside the catalogue: a keyword argument of an imported library's callable whose value a configuration key
    # gives is kept with that value where the files on the command line set it; credentials' names, constants of a
    # module, literals and the program's own callables are never read.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text('[tokenizer]\nbpe_dropout = 0.3\nwords = 0\nunk = ""\n[io]\npipe_buffer = 4096\n'
                                  'timeout = 5\nlevel = 9\n[auth]\napi_key = "hunter2"\nsecret_retries = 3\n')
    (app / "feed.py").write_text(PASSED)
    reader = _reader_in(tmp_path, 4244, app, b"python\0train.py\0--config\0run.toml\0")
    _, (feed,) = reader.code_facts([_sample(4244, [Frame("build", str(app / "feed.py"), 7)])])
    assert [(k.line, k.call, k.name, k.value, k.key, k.configured_in, k.library) for k in feed.passed] == [
        (7, "models.BPE", "dropout", "0.3", "bpe_dropout", "run.toml", "tokenizers"),
        (7, "models.BPE", "continuing_subword_prefix", "''", "unk", "run.toml", "tokenizers"),  # '': said too
        (9, "subprocess.Popen", "bufsize", "4096", "pipe_buffer", "run.toml", "subprocess"),
        (13, "subprocess.list2cmdline", "", "9", "level", "run.toml", "subprocess")]
    assert [(k.name, k.value) for k in feed.knobs] == [("cache_capacity", "0")]  # the catalogue's, as before
    assert "hunter2" not in repr(feed) and "secret_retries" not in repr(feed)


TRACED = '''
import numpy as np
import zlib

PATHS = {"none": False, "greedy": "greedy"}


class Featurizer:
    def __init__(self, feat):
        self.path = PATHS[feat.contraction_path]
        self.table = np.zeros(4)

    def __call__(self, vol, cfg):
        geo, opt = self.table, self.path
        level = 9 if cfg["fast"] else cfg.get("level")
        data = vol * geo  # data, passed positionally: not a setting
        out = np.einsum("ab,b->a", vol, geo, optimize=opt)
        packer = zlib.compressobj(level=level)
        token = cfg["auth_token"]
        sent = np.save("x", data, allow_pickle=token)  # a credential's key, even traced: never read
        return out, packer, np.asarray(data), sent
'''


def test_an_argument_the_code_computed_from_configuration_is_traced_to_its_key(tmp_path: Path) -> None:
    # ``optimize=opt`` after ``geo, opt = self.table, self.path`` and ``self.path = PATHS[feat.contraction_path]``
    # in another method: the catalogued setting is said with the key its value came from; a library's keyword
    # computed in a condition is traced to the first key the configuration sets; data passed positionally is not.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text('[features]\ncontraction_path = "none"\nlevel = 1\nfast = false\n'
                                  'auth_token = "hunter2"\n')
    (app / "feat.py").write_text(TRACED)
    reader = _reader_in(tmp_path, 4246, app, b"python\0train.py\0--config\0run.toml\0")
    _, (feat,) = reader.code_facts([_sample(4246, [Frame("__call__", str(app / "feat.py"), 17)])])
    assert [(k.line, k.call, k.name, k.via, k.key, k.value, k.configured_in) for k in feat.knobs] == [
        (17, "np.einsum", "optimize", "opt", "contraction_path", "'none'", "run.toml")]
    assert [(k.line, k.call, k.name, k.via, k.key, k.value) for k in feat.passed] == [
        (18, "zlib.compressobj", "level", "level", "level", "1")]  # the value's key before the condition's
    assert "hunter2" not in repr(feat)


EXPORTED = '''
import os
from os import environ


def setup(cfg):
    os.environ["POLARS_MAX_THREADS"] = str(cfg["polars_threads"])
    environ.setdefault("ZQ_MODE", cfg.mode)
    os.environ["OMP_NUM_THREADS"] = str(cfg["omp"])  # the catalogue's: a setting with its effect, not this
    os.environ["ZQ_API_TOKEN"] = cfg["zq_key"]  # a credential's name: never read
    os.environ["ZQ_FIXED"] = "1"  # a literal: the code's own
'''


def test_a_variable_the_program_exports_from_its_configuration_is_read_with_the_files_value(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text('polars_threads = 1\nmode = "exact"\nomp = 2\nzq_key = "hunter2"\n')
    (app / "boot.py").write_text(EXPORTED)
    reader = _reader_in(tmp_path, 4247, app, b"python\0boot.py\0run.toml\0")
    _, (boot,) = reader.code_facts([_sample(4247, [Frame("setup", str(app / "boot.py"), 7)])])
    assert [(k.line, k.call, k.name, k.key, k.value, k.library) for k in boot.passed] == [
        (7, "os.environ", "POLARS_MAX_THREADS", "polars_threads", "1", ENV_LIBRARY),
        (8, "os.environ", "ZQ_MODE", "mode", "'exact'", ENV_LIBRARY)]
    assert "hunter2" not in repr(boot)


PROFILE_CODE = '''
import argparse
from dataclasses import dataclass


@dataclass
class Uplink:
    nodelay: bool = True
    max_pacing_mbit: int = 0  # 0: no cap on the connection's pacing rate
    lr: float = 1e-3
    seed: int = 2
    api_token: str = "x"  # a credential's name: never read


@dataclass
class Train:
    seed: int = 0  # declared twice with two defaults: which one the file sets is not known


def parse(argv, cfg):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("-w", "--workers", dest="loader_workers", default=4)
    return ap.parse_args(argv), cfg.get("cache_words", 10000)
'''


def test_the_configurations_departures_from_the_codes_declared_defaults_are_read(tmp_path: Path) -> None:
    # A dataclass's fields, argparse's defaults and a lookup's fallback are the code's own defaults; the profile on
    # the command line that sets them otherwise is what this run changed. The same value written another way (1e-3
    # as 0.001) is no change; a name declared with two defaults is not judged; a credential's name is never read.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text("[uplink]\nnodelay = true\nmax_pacing_mbit = 300\nlr = 0.001\n"
                                  'api_token = "hunter2"\n[train]\nseed = 5\n[loader]\nbatch_size = 32\n'
                                  "loader_workers = 0\ncache_words = 0\n")
    (app / "profile.py").write_text(PROFILE_CODE)
    reader = _reader_in(tmp_path, 4248, app, b"python\0train.py\0--config\0run.toml\0")
    _, (profile,) = reader.code_facts([_sample(4248, [Frame("parse", str(app / "profile.py"), 22)])])
    assert [(d.name, d.default, d.configured, d.configured_in, d.line, d.note) for d in profile.overridden] == [
        ("max_pacing_mbit", "0", "300", "run.toml", 9, "0: no cap on the connection's pacing rate"),
        ("loader_workers", "4", "0", "run.toml", 23, ""),
        ("cache_words", "10000", "0", "run.toml", 24, "")]
    assert profile.reads_departures == (("cache_words", 24),)  # the file's own reads of the changed values
    assert "hunter2" not in repr(profile)
    from dflash_diag.sources.outside import same_literal
    assert same_literal("0.001", "1e-3") and same_literal("1", "1.0") and not same_literal("True", "1")
    assert not same_literal("'none'", "None") and not same_literal("x(", "1")


PATHS_CODE = '''
from dataclasses import dataclass


@dataclass
class Site:
    shell_env: str = ""  # file every non-interactive bash sources first
    spool: str = "data/spool.bin"
    home_rc: str = ""
'''


def test_a_relative_path_where_the_code_declares_none_is_a_changed_value_and_one_path_for_another_is_not(
        tmp_path: Path) -> None:
    # A file where the code's default has none turns something on (a script every shell sources); another data file
    # for the default one places the run; an absolute path may name a person's home and is never shown.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text('[site]\nshell_env = "env/site_modules.sh"\nspool = "data/other.bin"\n'
                                  'home_rc = "/home/alice/.bashrc"\n')
    (app / "sitecfg.py").write_text(PATHS_CODE)
    reader = _reader_in(tmp_path, 4252, app, b"python\0train.py\0--config\0run.toml\0")
    _, (site,) = reader.code_facts([_sample(4252, [Frame("Site", str(app / "sitecfg.py"), 7)])])
    assert [(d.name, d.default, d.configured) for d in site.overridden] == [
        ("shell_env", "''", "'env/site_modules.sh'")]
    assert "alice" not in repr(site)


def test_the_script_a_process_at_the_other_end_runs_is_read_for_the_changed_values_it_reads(tmp_path: Path) -> None:
    # The trainer waits on a server child (`python server.py --config run.toml`): the child's script is read like
    # the program's own files, marked as that process's, and the value the profile changed that it reads is kept.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text("[uplink]\nmax_pacing_mbit = 300\n")
    (app / "profile.py").write_text(PROFILE_CODE)
    (app / "train.py").write_text("import profile\n\ndef main():\n    return profile\n")
    (app / "server.py").write_text("import profile\n\n\ndef serve(prof):\n    rate = prof.uplink.max_pacing_mbit\n"
                                   "    return rate\n")
    root = tmp_path / "proc"
    for pid, argv in ((4249, b"python\0train.py\0run.toml\0"), (4250, b"python3\0server.py\0--config\0run.toml\0"),
                      (4251, b"sleep\0server.py\0")):
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cmdline").write_bytes(argv)
        (root / str(pid) / "cwd").symlink_to(app)
    reader = OutsideReader(4249, proc_root=root, redactor=ProcessRedactor(frozenset()))
    _, files = reader.code_facts([_sample(4249, [Frame("main", str(app / "train.py"), 4)])], peers=(4250, 4251))
    by_name = {f.path.rsplit("/", 1)[-1]: f for f in files}
    assert set(by_name) == {"train.py", "profile.py", "server.py"}  # `sleep` runs no Python script
    server = by_name["server.py"]
    assert server.run_by == 4250 and server.reads_departures == (("max_pacing_mbit", 5),)
    assert [d.name for d in by_name["profile.py"].overridden] == ["max_pacing_mbit"]
    assert by_name["train.py"].run_by == 0


def test_a_passed_value_that_is_one_of_the_processs_secrets_is_redacted(tmp_path: Path) -> None:
    # The same text as a secret of the process's environment or argv (a key named innocently in the profile).
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text('[tokenizer]\nbpe_dropout = "zq81Kx0pLm"\n')
    (app / "feed.py").write_text(PASSED)
    reader = _reader_in(tmp_path, 4245, app, b"python\0train.py\0run.toml\0", secrets=frozenset({"zq81Kx0pLm"}))
    _, (feed,) = reader.code_facts([_sample(4245, [Frame("build", str(app / "feed.py"), 7)])])
    (dropout,) = feed.passed
    assert dropout.name == "dropout" and "zq81Kx0pLm" not in repr(feed)


def test_a_yaml_profile_gives_its_values_and_an_alias_bomb_stays_bounded(tmp_path: Path) -> None:
    # Most trainers' profiles are YAML: read through PyYAML's safe loader (here from the trainer's extras). A file
    # whose aliases share one subtree a billion times over is walked within a bounded number of entries.
    from dflash_diag.sources.configs import ConfigReader

    profile = tmp_path / "run.yaml"
    profile.write_text("tokenizer:\n  bpe_dropout: 0.3\n  words: 0\nauth:\n  api_key: hunter2\n")
    assert ConfigReader().lookup((str(profile),), "bpe_dropout") == ("0.3", "run.yaml")
    bomb = tmp_path / "bomb.yml"
    lines = ["a0: &a0 {x: 1}"] + [f"a{i}: &a{i} {{{', '.join(f'k{j}: *a{i - 1}' for j in range(9))}}}"
                                   for i in range(1, 9)] + ["statement_cache: 0"]
    bomb.write_text("\n".join(lines) + "\n")
    assert ConfigReader().lookup((str(bomb),), "x") == ("1", "bomb.yml")  # found before the budget ends
    # The key after the shared subtrees is past the budget: not found, rather than a walk of 9^8 entries (without
    # the budget this call would not return within the test's timeout).
    assert ConfigReader().lookup((str(bomb),), "statement_cache") is None


BUILDER_CODE = '''
from dataclasses import dataclass

from heavylib import Config, Engine


@dataclass
class Options:
    keep_cache: bool = True  # reuse what the engine computed for the prefix
    width: int = 64


def build(opts):
    config = Config(keep=opts.keep_cache, width=opts.width)
    engine = Engine(config)
    return engine, config


def helper(opts):
    return build(opts)
'''

WORKER_CODE = '''
from builder import helper


class Worker:
    def __init__(self, opts):
        self.engine, self.config = helper(opts)

    def run(self, batch):
        out = self.engine.generate(batch)
        return out, len(batch)

    def warm(self, opts, batch):
        if opts.keep_cache:
            print(len(batch))
'''


def test_a_call_on_an_object_built_from_a_changed_value_carries_it_across_the_programs_files(tmp_path: Path) -> None:
    # `self.engine.generate(batch)` names no configuration value; its object was built by `helper` (worker.py
    # imports it), which returns `build`'s, which builds the engine from a config taking `keep_cache`: the
    # call runs with the value the profile changed. A value the profile keeps at its default is carried nowhere.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text("[options]\nkeep_cache = false\nwidth = 64\n")
    (app / "builder.py").write_text(BUILDER_CODE)
    (app / "worker.py").write_text(WORKER_CODE)
    reader = _reader_in(tmp_path, 4262, app, b"python\0worker.py\0--config\0run.toml\0")
    _, files = reader.code_facts([_sample(4262, [Frame("Worker.run", str(app / "worker.py"), 10)])])
    by_name = {f.path.rsplit("/", 1)[-1]: f for f in files}
    assert [d.name for d in by_name["builder.py"].overridden] == ["keep_cache"]
    assert ("keep_cache", 10) in by_name["worker.py"].carries  # the method call on the built engine
    assert ("keep_cache", 15) in by_name["worker.py"].carries  # a call the value's condition chose to run
    assert all(name == "keep_cache" for name, _ in (*by_name["worker.py"].carries, *by_name["builder.py"].carries))
    assert ("keep_cache", 15) in by_name["builder.py"].carries  # Engine(config) after config = Config(keep=...)
    (app / "run.toml").write_text("[options]\nkeep_cache = true\nwidth = 128\n")
    reader = _reader_in(tmp_path / "again", 4263, app, b"python\0worker.py\0--config\0run.toml\0")
    _, files = reader.code_facts([_sample(4263, [Frame("Worker.run", str(app / "worker.py"), 10)])])
    assert {f.path.rsplit("/", 1)[-1]: f.carries for f in files}["worker.py"] == (("width", 10),)


TRAIN_WITH_DEFAULT_CONFIG = '''
import argparse
import os
import tomllib

from heavylib import Engine

DEFAULT_CONFIG = os.path.join("configs", "fleet.toml")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--log", default="run.log")
    cfg = tomllib.load(open(ap.parse_args().config, "rb"))
    return Engine(mode=cfg["engine"]["mode"])
'''


def test_the_configuration_file_the_scripts_option_reads_by_default_is_read_where_the_command_line_names_none(
        tmp_path: Path) -> None:
    # `python train.py` with no --config: the script's parser reads configs/fleet.toml by default; what it sets is
    # this run's configuration. Named on the command line, another file wins.
    app = tmp_path / "app"
    (app / "configs").mkdir(parents=True)
    (app / "configs" / "fleet.toml").write_text('[engine]\nmode = "careful"\n')
    (app / "configs" / "bench.toml").write_text('[engine]\nmode = "fast"\n')
    (app / "train.py").write_text(TRAIN_WITH_DEFAULT_CONFIG)
    frame = Frame("main", str(app / "train.py"), 17)
    reader = _reader_in(tmp_path, 4264, app, b"python\0train.py\0")
    _, (train,) = reader.code_facts([_sample(4264, [frame])])
    assert [(u.call, u.name, u.value, u.configured_in) for u in train.passed] == [
        ("Engine", "mode", "'careful'", "fleet.toml")]
    reader = _reader_in(tmp_path / "named", 4265, app, b"python\0train.py\0--config\0configs/bench.toml\0")
    _, (train,) = reader.code_facts([_sample(4265, [frame])])
    assert [(u.value, u.configured_in) for u in train.passed] == [("'fast'", "bench.toml")]
    (app / "configs" / "fleet.toml").unlink()  # the default names a file that is not there: nothing is read
    reader = _reader_in(tmp_path / "gone", 4266, app, b"python\0train.py\0")
    _, (train,) = reader.code_facts([_sample(4266, [frame])])
    assert train.passed == ()


def test_an_object_made_by_a_callable_chosen_from_a_table_by_a_changed_value_carries_it(tmp_path: Path) -> None:
    # `loop = asyncio.SelectorEventLoop(SELECTORS[cfg.selector]())`: the callable is the table's entry, chosen by
    # the key; the loop built from what it returns runs every later line that uses it.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text('[hub]\nselector = "poll"\n')
    (app / "hub.py").write_text(
        "import asyncio\nimport selectors\nfrom dataclasses import dataclass\n\n\n@dataclass\nclass Hub:\n"
        "    selector: str = 'epoll'\n\n\nSELECTORS = {'epoll': selectors.EpollSelector, 'poll': selectors.PollSelector}"
        "\n\n\ndef run(cfg, main):\n    loop = asyncio.SelectorEventLoop(SELECTORS[cfg.selector]())\n"
        "    loop.run_until_complete(main())\n")
    reader = _reader_in(tmp_path, 4267, app, b"python\0hub.py\0--config\0run.toml\0")
    _, (hub,) = reader.code_facts([_sample(4267, [Frame("run", str(app / "hub.py"), 16)])])
    assert ("selector", 16) in hub.carries and ("selector", 15) in hub.carries


OPTIONS_CODE = '''
import json
import re
from dataclasses import dataclass


@dataclass
class Parse:
    exact: bool = False
    longest: bool = False


def options(cfg):
    opts = {"strict": True}
    if cfg.exact:
        opts["parse_float"] = float
    return opts


def compile_pattern(cfg):
    flags = re.ASCII
    if cfg.longest:
        flags |= re.IGNORECASE
    return re.compile("[a-z]+", flags)


def run(cfg, lines):
    opts = options(cfg)
    pattern = compile_pattern(cfg)
    recs = [json.loads(line, **opts) for line in lines]
    return pattern.findall(str(recs))
'''


def test_a_value_stored_into_a_name_or_added_to_it_under_a_condition_carries_the_conditions_key(
        tmp_path: Path) -> None:
    # `opts["parse_float"] = ...` and `flags |= ...`, each under an `if` on a changed value: what the function
    # returns is computed from that value, and so is every call on what it returned.
    app = tmp_path / "app"
    app.mkdir()
    (app / "run.toml").write_text("[parse]\nexact = true\nlongest = true\n")
    (app / "prog.py").write_text(OPTIONS_CODE)
    reader = _reader_in(tmp_path, 4268, app, b"python\0prog.py\0--config\0run.toml\0")
    _, (prog,) = reader.code_facts([_sample(4268, [Frame("run", str(app / "prog.py"), 30)])])
    assert ("exact", 30) in prog.carries  # json.loads(line, **opts)
    assert ("longest", 31) in prog.carries  # pattern.findall(...)
    assert ("longest", 30) not in prog.carries and ("exact", 24) not in prog.carries
