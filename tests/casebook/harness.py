"""Run one casebook program, diagnose it with ``dflash-diag doctor --json`` and score the answer.

Three modes, as users meet programs:
- ``outside``: a plain ``python main.py`` that was never prepared (stdout/stderr to files, as with ``nohup``);
  ``doctor`` attaches from outside;
- ``probes``: the same program under ``dflash-diag run -- python main.py`` (in-process probes and their board);
- ``attach``: the program started plain, then ``dflash-diag attach PID --probes <the case's probes>`` once it is
  ready, then ``doctor`` (the probes start in the middle of the run). Only cases that list it in ``modes``.
  the real command: ``auto`` (the ptrace injector on Linux x86-64), or ``CASEBOOK_ATTACH_METHOD`` (``gdb``, ...
  as ``attach --method``). Where no attach can work here (ptrace forbidden), the attach runs fail saying why.

Each run copies the program to a fresh private directory (a case may edit its own files, as a user editing
code under a running job would), waits until the program's own output says it reached the state to diagnose,
applies the case's action (SIGSTOP, an edit), runs ``doctor`` and kills everything it started (its process
group). ``outside`` and ``attach`` may share one start (``run_case_modes``): doctor from outside first, then
the probes are attached and doctor runs again, so a GPU program warms up once. With a ``Recording`` each
answer is kept (``<case>__<mode>.report.json``) with, where doctor can save it, the observation it was made from
(``<case>__<mode>.json``, ``doctor --save-observation``). Used by ``tests/casebook/test_casebook.py`` (CI, CPU
cases) and ``bench/casebook.py`` (the table, the GPU recording).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
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
    attach_method: str = ""  # attach mode: how the probes got in (auto, gdb, ...)
    unwanted: tuple[str, ...] = ()  # forbidden rules that doctor named (a hang also called a bottleneck)
    report: dict[str, Any] = field(default_factory=dict)
    target: str = ""  # a job's PID doctor was given: "launcher" or "rank:N" ("" for one process)
    # The program's own throughput while doctor watched: the median of the rates it printed then ("steps/s=12.5"),
    # None for a program that prints none. Says whether a planted cause cost anything in this run.
    program_rate: float | None = None

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
        return {"case": self.case, "mode": self.mode, **({"target": self.target} if self.target else {}),
                "expected": list(self.expected), "named": list(self.named),
                "headline": self.headline_rule, "because": list(self.headline_because),
                "headline_ok": self.headline_ok, "unwanted": list(self.unwanted), "warnings": list(self.warnings),
                "healthy_case": self.healthy_case,
                "ok": self.ok, "seconds_to_answer": round(self.seconds_to_answer, 1), "error": self.error,
                "attach_method": self.attach_method,
                "headline_text": self.headline_text, "program_rate": self.program_rate,
                # What doctor said, for a run that missed (the table shows only the verdict).
                "report": self.report if not self.ok else None}


def python_for_programs() -> str:
    return sys.executable


def dflash_diag_argv() -> list[str]:
    return [sys.executable, "-m", "dflash_diag"]


@dataclass(frozen=True)
class Recording:
    """Where ``doctor``'s answers are kept: ``DIR/<case>__<mode>.report.json`` (the --json report) and, when this
    doctor can (``doctor --save-observation``), ``DIR/<case>__<mode>.json``: the observation the report was made
    from, which ``doctor --replay`` turns into the same report offline (the GPU casebook's CI fixtures)."""

    directory: Path
    observations: bool = True
    # Fixtures (``bench/casebook.py --record`` on the CPU, CI's replay): each observation kept gzip'd and redacted
    # (``<case>__<mode>.json.gz``, see :func:`keep_as_fixture`), no report beside it.
    fixtures: bool = False

    def observation(self, case: str, mode: str) -> Path:
        return self.directory / f"{case}__{mode}.json"

    def fixture(self, case: str, mode: str) -> Path:
        return self.directory / f"{case}__{mode}{FIXTURE_SUFFIX}"

    def report(self, case: str, mode: str) -> Path:
        return self.directory / f"{case}__{mode}.report.json"


FIXTURE_SUFFIX = ".json.gz"


def keep_as_fixture(saved: Path, fixture: Path) -> None:
    """A saved observation as a test fixture: every string redacted once more (as a bundle's are), written compact
    and gzip'd without a timestamp (the same observation, the same bytes), the plain file removed."""
    import gzip

    from dflash_contract.redact import redact_text
    from dflash_diag import __version__
    from dflash_diag.observe.codec import encode_observation, read_observation

    obs = read_observation(saved.read_bytes())
    data = gzip.compress(encode_observation(obs, tool_version=__version__, text=redact_text), compresslevel=9,
                         mtime=0)
    tmp = fixture.with_name(f".{fixture.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, fixture)
    saved.unlink()


SHARED_START = ("outside", "attach")  # the modes one plain start serves, in this order: doctor, then attach + doctor


def run_case(case: Case, mode: str, *, duration_s: float = 5.0, python: str | None = None,
             keep: bool = False, extra_args: tuple[str, ...] = (), ready_timeout_s: float | None = None,
             target: str = "", attach_method: str | None = None, record: Recording | None = None) -> Result:
    """Start, wait, act, diagnose, stop. Never raises: a failure is a Result with ``error``.

    ``extra_args`` go after the program's own arguments (``--device cuda``); a case without a program directory
    is the reference trainer, run from the repository root (outside and attach modes: its own probes off).
    ``target``: which PID doctor is given for a job (``launcher``, the default, or ``rank:N``).
    ``attach_method``: attach mode's method (default ``attach_method_for_this_machine()``).
    ``record``: keep doctor's report (and its observation) in ``record.directory``.
    """
    return run_case_modes(case, (mode,), duration_s=duration_s, python=python, keep=keep, extra_args=extra_args,
                          ready_timeout_s=ready_timeout_s, target=target, attach_method=attach_method,
                          record=record)[0]


def run_case_modes(case: Case, modes: tuple[str, ...], *, duration_s: float = 5.0, python: str | None = None,
                   keep: bool = False, extra_args: tuple[str, ...] = (), ready_timeout_s: float | None = None,
                   target: str = "", attach_method: str | None = None,
                   record: Recording | None = None) -> list[Result]:
    """``modes`` diagnosed on one start of the program: ``("probes",)`` alone (under `dflash-diag run`), or any of
    ``outside`` and ``attach``, which share the plain process: doctor from outside first, then the probes are
    attached and doctor runs again (a GPU program warms up once, not twice). One Result per mode, in ``modes``'
    order; never raises for a program that fails (each Result then carries ``error``)."""
    started = ProgramRun(case, _start_mode(modes), python=python, extra_args=extra_args,
                         ready_timeout_s=ready_timeout_s)
    results: list[Result] = []
    try:
        started.wait_ready()
        results = started.diagnose(modes, duration_s=duration_s, target=target, attach_method=attach_method,
                                   record=record)
        return results
    except _NotReady as exc:
        results = started.failed(modes, exc)
        return results
    finally:
        started.stop(clean=not keep and bool(results) and not any(r.error for r in results))


def _start_mode(modes: tuple[str, ...]) -> str:
    if modes == ("probes",):
        return "probes"
    if not modes or modes != tuple(m for m in SHARED_START if m in modes):
        # outside must come first: once attached, the process has probes and is no longer seen from outside
        raise ValueError(f"one start serves ('probes',) or modes of {SHARED_START} in that order, not {modes}")
    return "plain"


class ProgramRun:
    """One start of a casebook program in a fresh private directory: plain (``outside``/``attach`` diagnose it)
    or under ``dflash-diag run`` (``probes``). ``wait_ready``, ``diagnose`` and ``stop`` may be called apart, so
    a slow starter (the reference trainer) can warm up while other programs are diagnosed."""

    def __init__(self, case: Case, start_mode: str, *, python: str | None = None, extra_args: tuple[str, ...] = (),
                 ready_timeout_s: float | None = None) -> None:
        self.case = replace(case, ready_timeout_s=ready_timeout_s) if ready_timeout_s is not None else case
        self.start_mode = start_mode
        self.work = Path(tempfile.mkdtemp(prefix=f"casebook-{case.name}-{start_mode}-"))
        os.chmod(self.work, 0o700)
        self.boards = self.work / "boards"
        self.boards.mkdir(mode=0o700)
        self.env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(self.boards), "PYTHONUNBUFFERED": "1",
                    "WANDB_MODE": "disabled", "PYTHONDONTWRITEBYTECODE": "1"}
        self.env.pop("DFLASH_DIAG_RUN_TOKEN", None)
        argv = [python or python_for_programs(), *case.argv, *extra_args]
        if case.program:
            shutil.copytree(PROGRAMS / case.program, self.work / "program")
            cwd = self.work / "program"
        else:  # the reference trainer
            cwd = REPO
            argv += ["--checkpoint-dir", str(self.work / "ckpt")] + (["--probes", "none"]
                                                                     if start_mode != "probes" else [])
        if start_mode == "probes":
            argv = [*dflash_diag_argv(), "run", "--", *argv]
        out, err = open(self.work / "stdout.log", "wb"), open(self.work / "stderr.log", "wb")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=self.env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        out.close()
        err.close()
        self.pid: int | None = None

    def wait_ready(self) -> int:
        """The program's PID once its output says it is ready and the case's action is applied; _NotReady if not."""
        if self.pid is None:
            self.pid = _wait_ready(self.case, self.start_mode, self.proc, self.work)
            _act(self.case, self.pid, self.work)
        return self.pid

    def diagnose(self, modes: tuple[str, ...], *, duration_s: float = 5.0, target: str = "",
                 attach_method: str | None = None, record: Recording | None = None) -> list[Result]:
        """doctor in each of ``modes``, in order (after ``wait_ready``); attach mode attaches the probes first."""
        pid = self.wait_ready()
        case, results = self.case, []
        window_s = case.doctor_s if case.doctor_s is not None else duration_s
        for mode in modes:
            method = (attach_method or attach_method_for_this_machine()) if mode == "attach" else ""
            failed = _attach(case, pid, self.env, self.boards, self.work, method) if mode == "attach" else ""
            if failed:
                result = _failed(case, mode, f"attach ({method}) failed: {failed}")
            else:
                printed = len(_read(self.work / "stdout.log"))
                result = _diagnose(case, mode, _target_pid(pid, target), self.env, window_s, record)
                result.program_rate = printed_rate(_read(self.work / "stdout.log")[printed:])
                if target:
                    result.target = target
            if result.error and self.proc.poll() is not None and not case.exits:
                # The program died under diagnosis: its own last words say whether the tool had a hand in it.
                result.error += f" (the program exited with {self.proc.returncode}){_tail(self.work)}"
            result.attach_method = method
            results.append(result)
        return results

    def failed(self, modes: tuple[str, ...], why: Exception) -> list[Result]:
        """One failed Result per mode: why, and where the program's logs are kept."""
        return [_failed(self.case, m, f"{why} (logs kept in {self.work})" + _tail(self.work)) for m in modes]

    def stop(self, clean: bool = False) -> None:
        """Kill everything it started; ``clean``: remove its directory too (kept, with the logs, after a failure)."""
        _stop(self.proc)
        if clean:
            shutil.rmtree(self.work, ignore_errors=True)


class _NotReady(Exception):
    pass


def _target_pid(pid: int, target: str) -> int:
    """The launcher's PID as started (``launcher`` or ""), or the PID of rank N of its job (``rank:N``)."""
    if not target or target == "launcher":
        return pid
    from dflash_diag.sources.job import find_job

    want = int(target.split(":", 1)[1])
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        job = find_job(pid)
        ranks = {r.rank: r.pid for r in job.ranks} if job is not None else {}
        if want in ranks:
            return ranks[want]
        time.sleep(0.5)
    raise _NotReady(f"no rank {want} below PID {pid}")


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
    cmd = [*dflash_diag_argv(), "attach", str(pid), "--probes", case.attach_probes, "--method", method, "--timeout", "30"]
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=90)
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return ""


def attach_method_for_this_machine() -> str:
    """``CASEBOOK_ATTACH_METHOD`` if set, else ``auto`` (what a user's `dflash-diag attach` uses)."""
    return os.environ.get("CASEBOOK_ATTACH_METHOD") or "auto"


def _diagnose(case: Case, mode: str, pid: int, env: dict[str, str], duration_s: float,
              record: Recording | None = None) -> Result:
    cmd = [*dflash_diag_argv(), "doctor", str(pid), "--json", "--duration", f"{duration_s:g}"]
    if record is not None and record.observations:
        cmd += ["--save-observation", str(record.observation(case.name, mode))]
    t0 = time.monotonic()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, timeout=duration_s + 60)
    except subprocess.TimeoutExpired:  # a starved box: a failed run, said so, never an exception out of the harness
        return _failed(case, mode, f"doctor did not answer in {duration_s + 60:g} s")
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        return _failed(case, mode, f"doctor exited {done.returncode}: {done.stderr.decode(errors='replace')[-300:]}")
    report = json.loads(done.stdout)
    if record is not None and record.fixtures:
        saved = record.observation(case.name, mode)
        if saved.exists():
            keep_as_fixture(saved, record.fixture(case.name, mode))
    elif record is not None:
        _write_private(record.report(case.name, mode), done.stdout)
    return score(case, mode, report, seconds)


def _write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner may read, whole or not at all (a temporary name, then a rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def doctor_can_save_observations() -> bool:
    """Whether this checkout's doctor has ``--save-observation`` (the replayable observation)."""
    done = subprocess.run([*dflash_diag_argv(), "doctor", "--help"], capture_output=True, text=True, timeout=60)
    return "--save-observation" in done.stdout


def assert_diagnosed(case: Case, r: Result) -> None:
    """The casebook's verdict on one answer, live or replayed: no error; a healthy program draws no warning; a planted
    cause is named, leads the headline, and nothing the case forbids is named."""
    assert not r.error, r.error
    if case.healthy:
        assert r.warnings == (), f"warnings on a healthy program: {r.warnings}: {r.headline_text}"
        return
    assert r.all_named, f"expected {r.expected}, named {r.named}; headline: {r.headline_text}"
    assert r.headline_ok, f"headline {r.headline_rule} because {r.headline_because}: {r.headline_text}"
    assert not r.unwanted, f"named {r.unwanted}, which this case forbids: {r.headline_text}"


def replayed_report(path: Path) -> dict[str, Any]:
    """The report `doctor --replay PATH --json` prints for a recorded observation, made in-process through its own
    functions (CI's replay of the casebook and of its jobs)."""
    import io

    from dflash_diag.analysis import analyse
    from dflash_diag.cli._output import dump_json
    from dflash_diag.snapshot.bundle import load_observation
    from dflash_diag.view.doctor import doctor_doc

    out = io.StringIO()
    dump_json(doctor_doc(analyse(load_observation(str(path)))), out)
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


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
    """Kill the group this harness started (the program, and `dflash-diag run` with its child), and every process
    below it: torchrun starts each rank in a session of its own, out of the group's reach."""
    below = _descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGCONT)  # a stopped process cannot die of SIGTERM's handler
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first), read from /proc before anything is killed."""
    from dflash_diag.sources.procfs import all_children

    out: list[int] = []
    level = [pid]
    while level and len(out) < 1024:
        level = [c for p in level for c in all_children(p)]
        out.extend(level)
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


_RATE = re.compile(r"(?:steps|it|samples|batches|tok)/s\s*[=:]\s*([0-9][0-9,]*\.?[0-9]*)")


def printed_rate(text: str) -> float | None:
    """The median of the rates a program printed in ``text`` ("steps/s=12.5", "it/s: 3"); None when it printed
    none."""
    rates = [float(m.group(1).replace(",", "")) for m in _RATE.finditer(text)]
    return statistics.median(rates) if rates else None


def _tail(work: Path) -> str:
    return " | stderr: " + _read(work / "stderr.log")[-400:].replace("\n", " / ")


def run_all(cases: list[Case], modes: tuple[str, ...] = MODES, *, parallel: int = 2, duration_s: float = 5.0,
            python: str | None = None, progress: Any = None, extra_args: tuple[str, ...] = (),
            ready_timeout_s: float | None = None, record: Recording | None = None) -> list[Result]:
    """Every (case, mode) of ``modes`` that the case runs in, ``parallel`` at a time; results in case order."""
    return run_jobs([(c, m) for c in cases for m in modes if m in c.modes], parallel=parallel, duration_s=duration_s,
                    python=python, progress=progress, extra_args=extra_args, ready_timeout_s=ready_timeout_s,
                    record=record)


def run_jobs(jobs: list[tuple[Case, str]], *, parallel: int = 2, duration_s: float = 5.0, python: str | None = None,
             progress: Any = None, extra_args: tuple[str, ...] = (), ready_timeout_s: float | None = None,
             record: Recording | None = None) -> list[Result]:
    """Each (case, mode) of ``jobs``, ``parallel`` at a time; results in the order of ``jobs``."""
    from concurrent.futures import as_completed

    results: dict[tuple[str, str], Result] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(run_case, c, m, duration_s=duration_s, python=python, extra_args=extra_args,
                               ready_timeout_s=ready_timeout_s, record=record): (c.name, m) for c, m in jobs}
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            if progress is not None:
                progress(result)
    return [results[(c.name, m)] for c, m in jobs]


def starts_for(case: Case, modes: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The starts that diagnose ``case`` in ``modes`` (those it lists): one plain start for outside and attach
    together, one under `dflash-diag run` for probes."""
    wanted = [m for m in modes if m in case.modes]
    shared = tuple(m for m in SHARED_START if m in wanted)
    return ([shared] if shared else []) + ([("probes",)] if "probes" in wanted else [])


def run_starts(starts: list[tuple[Case, tuple[str, ...]]], *, parallel: int = 2, duration_s: float = 5.0,
               python: str | None = None, progress: Any = None, extra_args: tuple[str, ...] = (),
               ready_timeout_s: float | None = None, record: Recording | None = None) -> list[Result]:
    """Each (case, modes of one start) of ``starts``, ``parallel`` programs at a time; results in that order."""
    from concurrent.futures import as_completed

    done: dict[int, list[Result]] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(run_case_modes, c, ms, duration_s=duration_s, python=python, extra_args=extra_args,
                               ready_timeout_s=ready_timeout_s, record=record): i
                   for i, (c, ms) in enumerate(starts)}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            if progress is not None:
                for result in done[futures[future]]:
                    progress(result)
    return [r for i in range(len(starts)) for r in done[i]]
