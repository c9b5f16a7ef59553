"""Run one casebook program, diagnose it with ``dflash-diag doctor --json`` and score the answer.

Three modes, as users meet programs:
- ``outside``: a plain ``python main.py`` that was never prepared (stdout/stderr to files, as with ``nohup``);
  ``doctor`` attaches from outside;
- ``probes``: the same program under ``dflash-diag run -- python main.py`` (in-process probes and their board);
- ``attach``: the program started plain, then ``dflash-diag attach PID --probes <the case's probes>`` once it is
  ready, then ``doctor`` (the probes start in the middle of the run). Only cases that list it in ``modes``.
  ``attach_method_for_this_machine()`` picks how: ``CASEBOOK_ATTACH_METHOD`` (``auto``, ``gdb``, ... as ``attach --method``, or
  ``stand-in``), else ``auto`` when a real attach works on this machine, else the stand-in. The stand-in starts the
  program under a two-line launcher that runs attach's fixed program when it gets SIGUSR1 (a signal handler runs in
  the main thread between two bytecodes, as the debugger's pending call does), so everything after the injection
  is the real thing: the control file, the bootstrap, the probes it starts, their board, ``doctor``. It stands in
  for the debugger only where attaching one fails (some sandboxes); the result says which method ran.

Each run copies the program to a fresh private directory (a case may edit its own files, as a user editing
code under a running job would), waits until the program's own output says it reached the state to diagnose,
applies the case's action (SIGSTOP, an edit), runs ``doctor`` and kills everything it started (its process
group). Used by ``tests/casebook/test_casebook.py`` (CI, CPU cases) and ``bench/casebook.py`` (the table).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cases import Case

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"
MODES = ("outside", "probes", "attach")
STAND_IN = "stand-in"
# The stand-in's launcher (python -c STAND_IN_LAUNCHER program.py args...): on SIGUSR1 it runs the file named by
# CASEBOOK_INJECT_FILE, which holds attach's fixed program; then it runs the program as `python program.py` would.
STAND_IN_LAUNCHER = (
    "import os, runpy, signal, sys\n"
    "def _inject(signum, frame):\n"
    "    path = os.environ['CASEBOOK_INJECT_FILE']\n"
    "    exec(compile(open(path).read(), path, 'exec'), {'__name__': '__casebook_inject__'})\n"
    "signal.signal(signal.SIGUSR1, _inject)\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)
TIME_TO_NAME_S = 10.0  # the goal: a headline within 10 s of attaching (default 5 s window), warm-up included
_RUN_PID = re.compile(r"dflash-diag run: PID (\d+) under probes")


@dataclass
class Result:
    case: str
    mode: str
    expected: tuple[str, ...]
    named: tuple[str, ...]  # expected rules that doctor named (any severity)
    headline_rule: str | None
    headline_because: tuple[str, ...]
    headline_text: str
    headline_ok: bool
    warnings: tuple[str, ...]  # rule ids at warning or above
    healthy_case: bool
    seconds_to_answer: float  # from starting doctor to its answer
    error: str = ""
    attach_method: str = ""  # attach mode: how the probes got in (auto, gdb, ..., stand-in)
    unwanted: tuple[str, ...] = ()  # forbidden rules that doctor named (a hang also called a bottleneck)
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def all_named(self) -> bool:
        return not self.error and set(self.named) == set(self.expected)

    @property
    def ok(self) -> bool:
        if self.error:
            return False
        if self.healthy_case:
            return not self.warnings
        return self.all_named and self.headline_ok and not self.unwanted

    def row(self) -> dict[str, Any]:
        return {"case": self.case, "mode": self.mode, "expected": list(self.expected), "named": list(self.named),
                "headline": self.headline_rule, "because": list(self.headline_because),
                "headline_ok": self.headline_ok, "unwanted": list(self.unwanted), "warnings": list(self.warnings),
                "healthy_case": self.healthy_case,
                "ok": self.ok, "seconds_to_answer": round(self.seconds_to_answer, 1), "error": self.error,
                "attach_method": self.attach_method,
                "headline_text": self.headline_text,
                # What doctor said, for a run that missed (the table shows only the verdict).
                "report": self.report if not self.ok else None}


def python_for_programs() -> str:
    return sys.executable


def dflash_diag_argv() -> list[str]:
    return [sys.executable, "-m", "dflash_diag"]


def run_case(case: Case, mode: str, *, duration_s: float = 5.0, python: str | None = None,
             keep: bool = False, extra_args: tuple[str, ...] = (), ready_timeout_s: float | None = None,
             attach_method: str | None = None) -> Result:
    """Start, wait, act, diagnose, stop. Never raises: a failure is a Result with ``error``.

    ``extra_args`` go after the program's own arguments (``--device cuda``); a case without a program directory
    is the reference trainer, run from the repository root (outside and attach modes: its own probes off).
    ``attach_method``: attach mode's method (default ``attach_method_for_this_machine()``).
    """
    work = Path(tempfile.mkdtemp(prefix=f"casebook-{case.name}-{mode}-"))
    os.chmod(work, 0o700)
    boards = work / "boards"
    boards.mkdir(mode=0o700)
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(boards), "PYTHONUNBUFFERED": "1", "WANDB_MODE": "disabled",
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("DFLASH_DIAG_RUN_TOKEN", None)
    method = (attach_method or attach_method_for_this_machine()) if mode == "attach" else ""
    interpreter = [python or python_for_programs()]
    if method == STAND_IN:
        interpreter += ["-c", STAND_IN_LAUNCHER]
        env["CASEBOOK_INJECT_FILE"] = str(work / "inject.py")
    argv = [*interpreter, *case.argv, *extra_args]
    if case.program:
        shutil.copytree(PROGRAMS / case.program, work / "program")
        cwd = work / "program"
    else:  # the reference trainer
        cwd = REPO
        argv += ["--checkpoint-dir", str(work / "ckpt")] + (["--probes", "none"] if mode != "probes" else [])
    if mode == "probes":
        argv = [*dflash_diag_argv(), "run", "--", *argv]
    if ready_timeout_s is not None:
        case = replace(case, ready_timeout_s=ready_timeout_s)
    out, err = open(work / "stdout.log", "wb"), open(work / "stderr.log", "wb")
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    out.close()
    err.close()
    result: Result | None = None
    try:
        pid = _wait_ready(case, mode, proc, work)
        _act(case, pid, work)
        if mode == "attach":
            failed = _attach(case, pid, env, boards, work, method)
            if failed:
                result = _failed(case, mode, f"attach ({method}) failed: {failed}")
                result.attach_method = method
                return result
        result = _diagnose(case, mode, pid, env, case.doctor_s if case.doctor_s is not None else duration_s)
        result.attach_method = method
        return result
    except _NotReady as exc:
        result = _failed(case, mode, f"{exc} (logs kept in {work})" + _tail(work))
        return result
    finally:
        _stop(proc)
        if not keep and result is not None and not result.error:
            shutil.rmtree(work, ignore_errors=True)


class _NotReady(Exception):
    pass


def _wait_ready(case: Case, mode: str, proc: subprocess.Popen[bytes], work: Path) -> int:
    deadline = time.monotonic() + case.ready_timeout_s
    ready = re.compile(case.ready)
    pid: int | None = proc.pid if mode != "probes" else None
    while time.monotonic() < deadline:
        text = _read(work / "stdout.log") + "\n" + _read(work / "stderr.log")
        if pid is None:
            match = _RUN_PID.search(text)
            pid = int(match.group(1)) if match else None
        if pid is not None and len(ready.findall(text)) >= case.ready_count:
            time.sleep(case.settle_s)
            if proc.poll() is not None and not case.exits:
                raise _NotReady(f"the program exited with {proc.returncode} before diagnosis")
            return pid
        if proc.poll() is not None:
            raise _NotReady(f"the program exited with {proc.returncode} before it was ready")
        time.sleep(0.2)
    raise _NotReady(f"not ready after {case.ready_timeout_s:.0f} s (waiting for {case.ready_count} x /{case.ready}/)")


def _act(case: Case, pid: int, work: Path) -> None:
    if case.action == "sigstop":
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)
    elif case.action.startswith("edit:"):
        # A user deploys an edit under the running job: a new helper at the top of the file.
        path = work / "program" / case.action[len("edit:"):]
        path.write_text(_DEPLOYED_EDIT + path.read_text())
        time.sleep(0.2)


_DEPLOYED_EDIT = '''import math as _math


def chunk_count(seq_len: int, budget: int = 4096) -> int:
    """How many loss chunks keep the logits under ``budget`` elements per chunk (added after the run started)."""
    if seq_len <= 0:
        return 1
    return max(1, _math.ceil(seq_len / budget))


CHUNKS_TUNED = True


'''


def _attach(case: Case, pid: int, env: dict[str, str], boards: Path, work: Path, method: str) -> str:
    """Put ``case.attach_probes`` into the running program; '' when done, else why not."""
    names = case.attach_probes
    if method == STAND_IN:
        return _attach_stand_in(pid, boards, work / "inject.py", names.split(","))
    cmd = [*dflash_diag_argv(), "attach", str(pid), "--probes", names, "--method", method, "--timeout", "30"]
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=90)
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return ""


def _attach_stand_in(pid: int, boards: Path, inject_file: Path, names: list[str], timeout_s: float = 30.0) -> str:
    """attach's own request and fixed program, delivered by SIGUSR1 to the stand-in launcher instead of a debugger."""
    from dflash_diag.sources.inject import (
        Request,
        control_document,
        fixed_program,
        package_paths,
        read_result,
        remove_quietly,
        write_private,
    )

    root, boot = package_paths()
    req = Request(boards, pid)
    doc = control_document(req, "attach", names, str(boards), time.time() + timeout_s, STAND_IN, root)
    try:
        write_private(req.control, json.dumps(doc).encode())
        inject_file.write_text(fixed_program(boot, str(req.control)))
        os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            result = read_result(req.result, req.nonce)
            if result is not None:
                return "" if result.get("ok") else str(result.get("error"))
            time.sleep(0.05)
        return f"no answer from the bootstrap in {timeout_s:.0f} s"
    finally:
        remove_quietly(req.paths())


_ATTACH_CHECKED: dict[str, str] = {}


def attach_method_for_this_machine() -> str:
    """``CASEBOOK_ATTACH_METHOD`` if set; else ``auto`` when a real attach works here (tried once, on a throwaway
    Python), else the stand-in."""
    chosen = os.environ.get("CASEBOOK_ATTACH_METHOD")
    if chosen:
        return chosen
    if "method" not in _ATTACH_CHECKED:
        _ATTACH_CHECKED["method"] = "auto" if _real_attach_works() else STAND_IN
    return _ATTACH_CHECKED["method"]


def _real_attach_works() -> bool:
    work = Path(tempfile.mkdtemp(prefix="casebook-attach-check-"))
    os.chmod(work, 0o700)
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(work)}
    sleeper = subprocess.Popen([python_for_programs(), "-c", "import time\nwhile True: time.sleep(0.05)"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        time.sleep(0.5)
        done = subprocess.run([*dflash_diag_argv(), "attach", str(sleeper.pid), "--probes", "threads",
                               "--timeout", "20"], env=env, capture_output=True, timeout=60)
        return done.returncode == 0 and sleeper.poll() is None
    except subprocess.TimeoutExpired:
        return False
    finally:
        _stop(sleeper)
        shutil.rmtree(work, ignore_errors=True)


def _diagnose(case: Case, mode: str, pid: int, env: dict[str, str], duration_s: float) -> Result:
    cmd = [*dflash_diag_argv(), "doctor", str(pid), "--json", "--duration", f"{duration_s:g}"]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=duration_s + 60)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        return _failed(case, mode, f"doctor exited {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}")
    report = json.loads(done.stdout)
    return score(case, mode, report, seconds)


def score(case: Case, mode: str, report: dict[str, Any], seconds: float) -> Result:
    expect = case.expect[mode]
    found = {f["rule_id"] for f in report["findings"]}
    headline = report.get("headline") or {}
    rule, because = headline.get("rule_id"), tuple(headline.get("because") or ())
    text = headline.get("text") or ""
    headline_ok = True
    if expect.headline:
        headline_ok = rule in expect.headline or (bool(because) and because[0] in expect.headline)
    if expect.headline_text and not re.search(expect.headline_text, text):
        headline_ok = False
    warnings = tuple(sorted(f["rule_id"] for f in report["findings"] if f["severity"] in ("warning", "critical")))
    return Result(case=case.name, mode=mode, expected=tuple(sorted(expect.rules)),
                  named=tuple(sorted(expect.rules & found)), headline_rule=rule, headline_because=because,
                  headline_text=text, headline_ok=headline_ok, warnings=warnings, healthy_case=case.healthy,
                  seconds_to_answer=seconds, report=report, unwanted=tuple(sorted(expect.forbid & found)))


def _failed(case: Case, mode: str, error: str) -> Result:
    return Result(case=case.name, mode=mode, expected=tuple(sorted(case.expect[mode].rules)), named=(),
                  headline_rule=None, headline_because=(), headline_text="", headline_ok=False, warnings=(),
                  healthy_case=case.healthy, seconds_to_answer=0.0, error=error)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the group this harness started (the program, and `dflash-diag run` with its child)."""
    try:
        os.killpg(proc.pid, signal.SIGCONT)  # a stopped process cannot die of SIGTERM's handler
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _tail(work: Path) -> str:
    return " | stderr: " + _read(work / "stderr.log")[-400:].replace("\n", " / ")


def run_all(cases: list[Case], modes: tuple[str, ...] = MODES, *, parallel: int = 2, duration_s: float = 5.0,
            python: str | None = None, progress: Any = None, extra_args: tuple[str, ...] = (),
            ready_timeout_s: float | None = None) -> list[Result]:
    """Every (case, mode) of ``modes`` that the case runs in, ``parallel`` at a time; results in case order."""
    from concurrent.futures import as_completed

    jobs = [(c, m) for c in cases for m in modes if m in c.modes]
    method = attach_method_for_this_machine() if any(m == "attach" for _, m in jobs) else None
    results: dict[tuple[str, str], Result] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(run_case, c, m, duration_s=duration_s, python=python, extra_args=extra_args,
                               ready_timeout_s=ready_timeout_s, attach_method=method): (c.name, m) for c, m in jobs}
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            if progress is not None:
                progress(result)
    return [results[(c.name, m)] for c, m in jobs]
