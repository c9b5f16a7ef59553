"""Host-to-device copies that hold the thread feeding the GPU (analysis/findings/transfers.py): the line a thread sits
at in nonblocking py-spy samples (no native frames, as on the H200), and a kernel trace's 'Pageable -> Device' copies;
silent for a pinned side-stream prefetcher, for casts, for copies back to the host (host syncs), and on CPU. The
observations go through the whole analysis (classification, stages from the queues, the causal links)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from findings_builders import NOW_S, _ids, cuda_facts, gpu_sample, observation, stack, thread_sample
from kernel_traces import A, TorchTrace

from dflash_diag.analysis import analyse
from dflash_diag.analysis.findings.transfers import is_h2d_copy_line
from dflash_diag.model import Analysis, Frame, Observation, Severity
from dflash_diag.sources.kernel_trace import parse_trace

RULE = "pageable-h2d-copy"
PROG = "/srv/tab/tabular_regression.py"
LINES = {
    33: "            self.out.put((self.features[lo:lo + self.batch_size], self.targets[lo:lo + self.batch_size]))",
    45: "            self.next = (x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True))",
    94: "                x_cpu, y_cpu = batches.get()",
    95: "                x = x_cpu.to(device, non_blocking=True)",
    98: "                pred = model(x)",
    100: "            loss.backward()",
    101: "            opt.step()",
}
QUEUE_PUT = (Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 320),
             Frame("Queue.put", "/usr/lib/python3.11/queue.py", 140), Frame("run", PROG, 33))
BACKWARD = (Frame("_engine_run_backward", "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", 829),
            Frame("backward", "/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", 347),
            Frame("backward", "/venv/lib/python3.11/site-packages/torch/_tensor.py", 626), Frame("train", PROG, 100))


def _at(line: int) -> tuple[Frame, ...]:
    return (Frame("train", PROG, line), Frame("Thread.run", "/usr/lib/python3.11/threading.py", 1010))


def _observation(train_lines: list[int | None], util: float) -> Observation:
    """60 samples: the loader blocked in put (the queue is full), the training thread at ``train_lines`` (None: in
    backward), on CPU and without the GIL in C as a copy or a launch is."""
    stacks = []
    for i, line in enumerate(train_lines * (60 // len(train_lines))):
        train = BACKWARD if line is None else _at(line)
        stacks.append(stack([thread_sample("shard-loader", QUEUE_PUT, tid=11, active=False),
                             thread_sample("train-loop", train, tid=12, active=True)], t=i * 0.05))
    obs = observation((), stacks)
    return replace(obs, source_lines={f"{PROG}:{n}": t for n, t in LINES.items()}, process=cuda_facts(),
                   gpus=tuple((gpu_sample(t=float(i), util=util),) for i in range(5)))


def _analyse(obs: Observation) -> Analysis:
    return analyse(obs, now_wall_s=NOW_S)


def test_a_training_thread_held_at_a_non_blocking_copy_is_a_pageable_copy_that_leads_the_headline() -> None:
    """The planted program: 64 MiB batches of a pageable shard copied with non_blocking=True, the GPU 40% busy."""
    analysis = _analyse(_observation([95, 95, 95, 95, 98, None], util=40.0))
    f = next(f for f in analysis.findings if f.rule_id == RULE)
    assert f.severity == Severity.WARNING and f.stages == ("drafter",)
    assert f.claim.startswith("train-loop is held by host-to-device copies")
    assert "tabular_regression.py:95 (train) `x = x_cpu.to(device, non_blocking=True)`" in f.claim
    assert "its source is pageable memory" in f.claim
    ev = dict(f.evidence)
    assert ev["train-loop at host-to-device copies"].startswith("67% of its 60 samples")
    assert ev["GPU utilisation"].startswith("40%")
    assert analysis.headline is not None and RULE in (analysis.headline.rule_id, *analysis.headline.because[:1])
    assert "pin_memory" in analysis.headline.remedy


def test_on_a_saturated_gpu_the_copy_wait_is_information() -> None:
    f = next(f for f in _analyse(_observation([95, 95, 95, None], util=97.0)).findings if f.rule_id == RULE)
    assert f.severity == Severity.INFO and "97% busy" in f.claim


def test_the_pinned_side_stream_prefetcher_and_a_cpu_process_are_silent() -> None:
    """The twin: the copy at line 45 from pinned memory returns at once (1 sample in 30); GPU-bound in backward."""
    twin = _observation([45] + [None] * 14 + [101] * 10 + [98] * 5, util=97.0)
    assert RULE not in _ids(_analyse(twin).findings)
    cpu = replace(_observation([95, 95, 95, 98], util=0.0), process=replace(cuda_facts(), uses_cuda=False),
                  gpus=())
    assert RULE not in _ids(_analyse(cpu).findings)


@pytest.mark.parametrize(("line", "copy"), [
    ("x = x_cpu.to(device, non_blocking=True)", True),
    ("batch = {k: v.to(self.device) for k, v in batch.items()}", True),
    ("ids = ids.cuda(non_blocking=True)", True),
    ("t = torch.as_tensor(arr, device=dev)", True),
    ("buf.copy_(host, non_blocking=True)", True),
    ("h = h.to(torch.bfloat16)", False),
    ("h = h.to(dtype=torch.float32)", False),
    ("cpu = t.to('cpu')", False),
    ("vals = t.cpu().numpy()", False),
    ("# x.to(device)", False),
])
def test_copy_lines_are_told_from_casts_and_copies_back(line: str, copy: bool) -> None:
    assert is_h2d_copy_line(line) is copy


def test_a_trace_of_pageable_copies_names_the_copies_and_how_long_they_held_the_thread() -> None:
    t = TorchTrace().thread(A, "train-loop")
    corr, now = 1, 0.0
    for step in range(6):
        t.launch(A, now, corr, name="cudaMemcpyAsync", dur=5000.0)
        t.gpu("Memcpy HtoD (Pageable -> Device)", now + 50, now + 5050, corr, cat="gpu_memcpy", nbytes=64 << 20)
        t.op(A, "aten::mm", now + 5100, now + 5200).launch(A, now + 5110, corr + 1)
        t.gpu("nvjet_sm90_tst_256x128", now + 5150, now + 9150, corr + 1)
        t.op(A, f"ProfilerStep#{step}", now, now + 9200, cat="user_annotation")
        corr, now = corr + 2, now + 9200
    obs = replace(observation(), process=cuda_facts(), kernels=parse_trace(t.data(), source="trace.json"))
    f = next(f for f in _analyse(obs).findings if f.rule_id == RULE)
    assert f.severity == Severity.WARNING and "of the traced window" in f.claim and "'Pageable -> Device'" in f.claim
    assert dict(f.evidence)["pageable host-to-device copies (kernel trace)"].startswith("6 copies, 384 MiB")
