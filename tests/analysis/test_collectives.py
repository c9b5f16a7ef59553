"""Which collective a thread is in, from its stack (analysis/collectives.py), and how a sample in one is classified
and followed in the wait-for graph: a wait on the peer ranks, never the program's work."""

from __future__ import annotations

from dflash_diag.analysis.classify import explain
from dflash_diag.analysis.collectives import WORK_WAIT, collective_op, program_site
from dflash_diag.model import Frame, ThreadSample, ThreadState

SITE = "/opt/venv/lib/python3.11/site-packages/torch/distributed"
C10D = f"{SITE}/distributed_c10d.py"
LOGGER = f"{SITE}/c10d_logger.py"
DDP = "/opt/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py"
USER = "/home/u/proj/train.py"


def _thread(*frames: Frame, active: bool = False) -> ThreadSample:
    return ThreadSample(thread_id=1, os_thread_id=11, name="MainThread", active=active, owns_gil=False,
                        frames=tuple(frames))


def _f(name: str, filename: str, line: int = 10, native: bool = False) -> Frame:
    return Frame(name=name, filename=filename, line=line, native=native)


def test_the_call_the_program_made_is_named_with_its_site() -> None:
    t = _thread(_f("all_reduce", C10D, 3252), _f("_exception_logger.<locals>.wrapper", LOGGER, 83),
                _f("train_step", USER, 40), _f("<module>", USER, 90))
    assert collective_op(t) == "all_reduce"
    assert program_site(t) == "train_step (train.py:40)"


def test_a_collective_called_inside_another_is_named_by_the_outer_one() -> None:
    t = _thread(_f("all_gather", C10D), _f("_exception_logger.<locals>.wrapper", LOGGER),
                _f("all_gather_object", C10D), _f("_exception_logger.<locals>.wrapper", LOGGER), _f("sync", USER))
    assert collective_op(t) == "all_gather_object"


def test_rendezvous_and_ddp_waits_are_collectives() -> None:
    init = _thread(_f("_store_based_barrier", C10D), _f("init_process_group", C10D), _f("main", USER))
    assert collective_op(init) == "init_process_group"
    ddp = _thread(_f("_sync_buffers", DDP), _f("_pre_forward", DDP), _f("forward", DDP), _f("main", USER))
    assert collective_op(ddp) == "DDP _sync_buffers"


def test_computing_inside_a_ddp_wrapped_model_is_not_a_collective() -> None:
    t = _thread(_f("linear", "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py"),
                _f("forward", "/home/u/proj/model.py"), _f("forward", DDP), _f("main", USER))
    assert collective_op(t) is None


def test_a_wait_on_a_work_handle_is_named_by_native_frames_or_by_the_line() -> None:
    native = _thread(_f("pthread_cond_wait", "libc.so.6", native=True), _f("c10d::Work::wait", "libtorch_cpu.so",
                                                                           native=True), _f("step", USER, 12))
    assert collective_op(native) == WORK_WAIT
    plain = _thread(_f("step", USER, 12))
    assert collective_op(plain) is None
    assert collective_op(plain, lambda f, n: "handle.wait()") == WORK_WAIT
    assert collective_op(plain, lambda f, n: "self.done.wait()") is None  # an Event, not a work handle


def test_a_sample_in_a_collective_is_a_wait_even_on_a_cpu() -> None:
    t = _thread(_f("all_reduce", C10D), _f("train_step", USER), active=True)
    c = explain(t)
    assert c.state is ThreadState.IDLE and "all_reduce" in c.rule
