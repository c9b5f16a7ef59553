"""A wait on child processes that spend their time starting, not working (``analysis.waits``): the children's
samples inside the import system or multiprocessing's preparation of a fresh interpreter are their start-up; the
chain's root says so, with the start method their stacks show and the parent's line they run again. Built
observations with the frames py-spy reports for a spawned pool worker (recorded: tests/casebook's
settings5_ocr replays the same through the casebook lane)."""

from __future__ import annotations

from dataclasses import replace

from findings_builders import NOW_S, observation, stack, thread_sample

from dflash_diag.analysis import analyse
from dflash_diag.model import Frame, StackSample, ThreadSample

LIB = "/usr/lib/python3.11"
TRAIN = "/app/train.py"
WAITING = (Frame("Condition.wait", f"{LIB}/threading.py", 320), Frame("ApplyResult.wait", f"{LIB}/multiprocessing/pool.py", 765),
           Frame("Pool.map", f"{LIB}/multiprocessing/pool.py", 367), Frame("main", TRAIN, 58))
SPAWNED = (Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176), Frame("<module>", TRAIN, 3),
           Frame("run_path", "<frozen runpy>", 291), Frame("_fixup_main_from_path", f"{LIB}/multiprocessing/spawn.py", 297),
           Frame("prepare", f"{LIB}/multiprocessing/spawn.py", 246), Frame("_main", f"{LIB}/multiprocessing/spawn.py", 131),
           Frame("spawn_main", f"{LIB}/multiprocessing/spawn.py", 122), Frame("<module>", "<string>", 1))
WORKING = (Frame("render", "/app/glyphs.py", 40), Frame("worker", f"{LIB}/multiprocessing/pool.py", 125),
           Frame("_bootstrap", f"{LIB}/multiprocessing/process.py", 314))
SOURCE = {f"{TRAIN}:58": "    for batch in pool.map(render, jobs):", f"{TRAIN}:3": "import torch"}


def _analysis(child_frames: list[tuple[Frame, ...]]):  # type: ignore[no-untyped-def]
    parent = [stack([thread_sample("MainThread", WAITING, tid=11, active=False)], t=i * 0.2) for i in range(20)]
    children = tuple(StackSample(pid=500 + i % 2, monotonic_s=i * 0.2, wall_s=NOW_S + i * 0.2, duration_s=0.01,
                                 native=False, threads=(ThreadSample(thread_id=1, os_thread_id=500 + i % 2,
                                                                     name="MainThread", active=True, owns_gil=True,
                                                                     frames=frames),))
                     for i, frames in enumerate(child_frames))
    obs = replace(observation(stacks=parent), children=children, source_lines=SOURCE, now_wall_s=NOW_S)
    return analyse(obs)


def test_children_that_spend_their_samples_importing_are_starting_up_with_the_start_method_their_stacks_show() -> None:
    analysis = _analysis([SPAWNED] * 8 + [WORKING] * 2)
    chain = [f for f in analysis.findings if f.rule_id == "wait-chain"]
    assert chain, [f.rule_id for f in analysis.findings]
    claim = chain[0].claim
    assert "starting up, not working: 80% of their samples import modules" in claim
    assert "multiprocessing's 'spawn' start method" in claim and "<module> (train.py:3) `import torch`" in claim
    assert "forkserver" in chain[0].remedy and "Start" in chain[0].remedy


def test_children_that_mostly_work_are_named_by_their_work_and_a_lazy_import_is_not_start_up() -> None:
    lazy = (Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176), *WORKING)
    analysis = _analysis([lazy] * 2 + [WORKING] * 8)
    claim = next(f.claim for f in analysis.findings if f.rule_id == "wait-chain")
    assert "starting up" not in claim and "render (glyphs.py:40)" in claim
