"""The host-sync family (analysis/findings/hostsync.py): a device sync per step, at the line that makes it."""

from __future__ import annotations

from dataclasses import replace

from findings_builders import (
    NOW_S,
    _one,
    _run,
    board,
    healthy_board,
    observation,
    pipeline,
    stack,
    thread_sample,
    thread_stats,
)

from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import Frame, ThreadState


def test_host_sync_storm_points_at_the_line() -> None:
    sync = (Frame("cudaStreamSynchronize", "libcudart.so", 0, native=True),
            Frame("_chunked_loss", "/app/loss.py", 42), Frame("step", "/app/train.py", 9))
    work = (Frame("mm", "libtorch.so", 0, native=True), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT, ThreadState.GPU_WAIT, ThreadState.NATIVE, ThreadState.GPU_WAIT] * 2
    stacks = [stack([thread_sample("drafter-0", sync if s == ThreadState.GPU_WAIT else work, tid=12)], t=i)
              for i, s in enumerate(timeline)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 0.75, ThreadState.NATIVE: 0.25}, tid=12,
                            n=8, timeline=timeline),)
    f = _one(_run(threads=threads, stacks=stacks), "host-sync-storm")
    assert "loss.py:42" in f.claim and dict(f.evidence)["drafter in explicit host syncs"] == "75%"
    assert dict(f.evidence)["sync site"] == "loss.py:42 (_chunked_loss) (6 samples)"


def test_waiting_on_a_busy_gpu_in_ops_is_not_a_sync_storm() -> None:
    """A thread in backward() or an op while the GPU is busy waits on a full launch queue: GPU-bound, healthy
    (the H200 casebook's healthy programs: 30-68% GPU wait at loss.backward() and opt.step())."""
    busy = (Frame("_engine_run_backward", "/sp/torch/autograd/graph.py", 829), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT, ThreadState.GPU_WAIT, ThreadState.NATIVE, ThreadState.GPU_WAIT] * 5
    stacks = [stack([thread_sample("drafter-0", busy, tid=12)], t=i) for i in range(len(timeline))]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 0.75, ThreadState.NATIVE: 0.25}, tid=12,
                            n=len(timeline), timeline=timeline),)
    assert "host-sync-storm" not in {f.rule_id for f in _run(threads=threads, stacks=stacks)}


def test_one_sample_is_not_a_rate() -> None:
    threads = (
        thread_stats("logger", "other", {ThreadState.PYTHON: 1.0}, tid=13, gil_held_pct=100.0, n=1),
        thread_stats("drafter-0", "drafter", {ThreadState.GIL_WAIT: 1.0}, tid=12, n=1),
    )
    assert _run(threads=threads) == ()


def test_host_sync_site_shows_the_line_text() -> None:
    import dataclasses

    sync = (Frame("_chunked_loss", "/app/loss.py", 42), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT] * 6
    stacks = [stack([thread_sample("drafter-0", sync, tid=12)], t=i) for i in range(6)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 1.0}, tid=12, n=6, timeline=timeline),)
    obs = dataclasses.replace(observation((healthy_board(),), stacks),
                              source_lines={"/app/loss.py:42": "total += loss.item()"})
    f = _one(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S), "host-sync-storm")
    assert "`total += loss.item()`" in f.claim


# --- a sync recognised by the line the thread sits at (the H200's spinning waits: `py-spy dump --nonblocking`) ----

_LOSS = "/srv/spec/chunked.py"
_LOSS_LINES = {
    31: "        logits = self.head(piece)",
    33: "        n_valid = int(mask.sum())",
    34: "        if not bool(torch.isfinite(loss)):",
    36: "        running += float(loss)",
}


def _h200_shaped(line: int, *, active: bool = True) -> tuple[Frame, ...]:
    """One nonblocking py-spy sample of the drafter: no native frames, the chunked loss at ``line``."""
    return (Frame("chunked_loss", _LOSS, line), Frame("train_step", "/srv/spec/train.py", 88),
            Frame("Thread.run", "/usr/lib/python3.12/threading.py", 1010))


def _h200_observation(uses_cuda: bool | None) -> object:
    """20 samples of a drafter that spins (active, no GIL) at `int(t)`, `bool(torch.isfinite(t))` and `float(t)` 3
    samples in 4, and computes its logits in 1 (the H200 program read "native 64%, no cause found")."""
    import dataclasses

    from dflash_diag.model import ProcessFacts

    order = [33, 34, 36, 31] * 5
    stacks = [stack([thread_sample("drafter-0", _h200_shaped(line), tid=12, gil=False, active=True)], t=i * 0.05)
              for i, line in enumerate(order)]
    facts = ProcessFacts(state="S", start_wall_s=NOW_S - 300.0, stderr_target="pipe:[1]", stderr_tail=None,
                         uses_cuda=uses_cuda)
    return dataclasses.replace(observation((), stacks), process=facts,
                               source_lines={f"{_LOSS}:{n}": text for n, text in _LOSS_LINES.items()})


def test_a_spinning_sync_at_int_float_bool_of_a_tensor_is_a_gpu_wait_and_names_its_line() -> None:
    from dflash_diag.analysis import analyse

    analysis = analyse(replace(_h200_observation(uses_cuda=True), now_wall_s=NOW_S))  # type: ignore[arg-type]
    (drafter,) = [t for t in analysis.threads if t.name == "drafter-0"]
    assert drafter.shares[ThreadState.GPU_WAIT] == 0.75 and drafter.shares.get(ThreadState.NATIVE, 0.0) == 0.25
    f = next(f for f in analysis.findings if f.rule_id == "host-sync-storm")
    sites = [value for name, value in f.evidence if name == "sync site"]
    assert len(sites) == 3 and all("chunked.py:3" in s for s in sites)
    assert "`n_valid = int(mask.sum())`" in " ".join(sites) and "`running += float(loss)`" in " ".join(sites)
    assert "chunked.py:3" in f.claim


def test_without_cuda_known_a_conversion_is_not_read_as_a_sync() -> None:
    """`int(x)` in C without the GIL is a tensor's read only in a process with CUDA: unknown or absent, no claim."""
    from dflash_diag.analysis import analyse

    for uses_cuda in (None, False):
        analysis = analyse(replace(_h200_observation(uses_cuda=uses_cuda), now_wall_s=NOW_S))  # type: ignore[arg-type]
        (drafter,) = [t for t in analysis.threads if t.name == "drafter-0"]
        # `bool(torch.isfinite(...))` says tensor in its text: a sync unless CUDA is known absent
        assert drafter.shares.get(ThreadState.GPU_WAIT, 0.0) == (0.25 if uses_cuda is None else 0.0)
        assert "n_valid" not in " ".join(v for f in analysis.findings for _, v in f.evidence)


def test_samples_the_states_called_native_still_count_at_a_sync_line() -> None:
    """States computed elsewhere (another classifier version, a board's thread table) said native compute: the rule
    reads the lines the thread sat at and names them."""
    import dataclasses

    from dflash_diag.model import ProcessFacts

    order = [33, 36, 33, 36]
    stacks = [stack([thread_sample("drafter-0", _h200_shaped(line), tid=12, gil=False, active=True)], t=i)
              for i, line in enumerate(order * 2)]
    timeline = [ThreadState.NATIVE] * 8
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.NATIVE: 1.0}, tid=12, n=8, timeline=timeline),)
    obs = dataclasses.replace(
        observation((), stacks), source_lines={f"{_LOSS}:{n}": text for n, text in _LOSS_LINES.items()},
        process=ProcessFacts(state="S", start_wall_s=NOW_S - 300.0, stderr_target="", stderr_tail=None,
                             uses_cuda=True))
    f = _one(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S), "host-sync-storm")
    assert "chunked.py:33" in f.claim or "chunked.py:36" in f.claim
    assert dict(f.evidence)["of them read as native compute"].startswith("8 samples")


def test_the_syncs_probes_counts_are_evidence() -> None:
    import dataclasses

    counted = {"syncs": {"total": 5210, "per_s": 412.5, "top_lines": [
        {"site": "spec/chunked.py:33", "thread": "drafter-0", "count": 4800}]}}
    sync = (Frame("_chunked_loss", "/app/loss.py", 42), Frame("step", "/app/train.py", 9))
    stacks = [stack([thread_sample("drafter-0", sync, tid=12)], t=i) for i in range(6)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 1.0}, tid=12, n=6,
                            timeline=[ThreadState.GPU_WAIT] * 6),)
    obs = dataclasses.replace(observation((board(counted),), stacks),
                              source_lines={"/app/loss.py:42": "total += loss.item()"})
    f = _one(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S), "host-sync-storm")
    evidence = dict(f.evidence)
    assert evidence["host syncs counted (syncs probe)"] == "412/s"
    assert evidence["counted sync line"] == "spec/chunked.py:33 in drafter-0: 4800 syncs"


def test_a_line_the_syncs_probe_counted_is_a_sync_whatever_its_text() -> None:
    """An implicit sync no reading of the text can tell (a helper's `torch.bincount(...)` sizes its output on the
    host): spinning there reads as native compute; the syncs probe's count at that very line makes it a sync (the
    H200 casebook's per-chunk metrics program, attached: not named before)."""
    import dataclasses

    from dflash_diag.model import ProcessFacts

    site = (Frame("fit", "/tmp/x/program/tagger.py", 83), Frame("main", "/tmp/x/program/tagger.py", 120))
    stacks = [stack([thread_sample("fit", site, tid=12, gil=False, active=True)], t=i) for i in range(8)]
    threads = (thread_stats("fit", "drafter", {ThreadState.NATIVE: 1.0}, tid=12, n=8,
                            timeline=[ThreadState.NATIVE] * 8),)
    lines = {"/tmp/x/program/tagger.py:83": "pair = confusion_cells(gold, pred)"}
    facts = ProcessFacts(state="S", start_wall_s=NOW_S - 300.0, stderr_target="", stderr_tail=None, uses_cuda=True)

    def judged(count: int) -> list[str]:
        counted = {"syncs": {"total": count, "per_s": 400.0, "top_lines": [
            {"site": "program/tagger.py:83", "thread": "fit", "count": count}]}}
        obs = dataclasses.replace(observation((board(counted),), stacks), source_lines=lines, process=facts)
        return [f.claim for f in evaluate(obs, threads, pipeline(), now_wall_s=NOW_S) if f.rule_id == "host-sync-storm"]

    (claim,) = judged(4378)
    assert "tagger.py:83" in claim and "(syncs counted there)" in claim
    assert judged(3) == []  # a stray sync or two at that line is not what the thread spins on
