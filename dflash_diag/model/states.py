"""The thread-state taxonomy (docs/states.md): where one sample of one thread spends its time."""

from __future__ import annotations

from enum import Enum


class ThreadState(str, Enum):  # noqa: UP042 - str() and f-strings keep the enum name; JSON sees the value
    PYTHON = "python"  # holding the GIL, Python frames on top
    NATIVE = "native"  # active without the GIL in libtorch/aten/triton/fla
    GPU_WAIT = "gpu_wait"  # synchronize, .item(), .cpu(), event/stream sync
    GIL_WAIT = "gil_wait"  # runnable Python code waiting to take the GIL
    QUEUE_PUT = "queue_put"  # blocked in Queue.put on a full queue: producer starved
    QUEUE_GET = "queue_get"  # blocked in Queue.get on an empty queue: consumer starved
    COMPILE = "compile"  # inside torch._dynamo / torch._inductor / triton compile
    CHECKPOINT = "checkpoint"  # activation-checkpoint recompute or saved-tensor hooks
    IDLE = "idle"  # sleeping, waiting on an event/lock, or anything else

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    ThreadState.PYTHON: "python+GIL",
    ThreadState.NATIVE: "native",
    ThreadState.GPU_WAIT: "GPU wait",
    ThreadState.GIL_WAIT: "GIL wait",
    ThreadState.QUEUE_PUT: "queue put",
    ThreadState.QUEUE_GET: "queue get",
    ThreadState.COMPILE: "compile",
    ThreadState.CHECKPOINT: "ckpt recompute",
    ThreadState.IDLE: "idle",
}
