"""Which collective a thread is in, read off one stack sample. Pure.

A rank that waits for its peers sits inside a torch.distributed call: ``all_reduce``, ``barrier``,
``broadcast``... in ``torch/distributed/distributed_c10d.py`` (under its ``c10d_logger`` wrapper), the rendezvous
of ``init_process_group``, or DDP's own broadcasts in ``torch/nn/parallel/distributed.py``. The call the program
made is the outermost public function of those files (``all_gather_object`` calls ``all_gather``: the program
called the first). A wait on a work handle (``work.wait()`` after ``async_op=True``) leaves no Python frame of
torch's: native frames name it (``c10d::Work::wait``, gloo, NCCL), and without them the program's line does
(``handle.wait()``). Where the program made the call is its innermost own frame.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from dflash_diag.model import Frame, ThreadSample
from dflash_diag.model.evidence import is_library_file

LineLookup = Callable[[str, int], "str | None"]

_DIST_FILES = (
    "torch/distributed/distributed_c10d.py",
    "torch/distributed/c10d_logger.py",
    "torch/distributed/rendezvous.py",
    "torch/distributed/_functional_collectives.py",
    "torch/distributed/nn/functional.py",
    "torch/distributed/elastic/utils/store.py",
    "torch/nn/parallel/distributed.py",
)
# Helpers in those files that are not a call a program makes (their callers are).
_NOT_AN_OP = re.compile(r"^_|<locals>|^wrapper$|^_exception_logger")
_NATIVE_COLLECTIVE = re.compile(r"c10d::Work::wait|c10d::ProcessGroup|ProcessGroupGloo|ProcessGroupNCCL|gloo::|nccl",
                                re.I)
_HANDLE_WAIT = re.compile(r"\b\w*(work|handle|req|request|fut|future)\w*\.wait\(", re.I)
WORK_WAIT = "wait (work handle)"
_DDP_FILE = "torch/nn/parallel/distributed.py"


def _norm(filename: str) -> str:
    return filename.replace("\\", "/")


@functools.lru_cache(maxsize=1 << 14)
def _dist_frame(frame: Frame) -> bool:
    return not frame.native and any(_norm(frame.filename).endswith(f) or f + "/" in _norm(frame.filename)
                                    for f in _DIST_FILES)


def collective_op(thread: ThreadSample, lines: LineLookup | None = None) -> str | None:
    """The collective call the thread is in (``all_reduce``, ``barrier``, ``wait (work handle)``), or None."""
    python = [f for f in thread.frames if not f.native]
    op: str | None = None
    for frame in python:  # innermost first: the stack must start in torch.distributed, outward to the program
        if not _dist_frame(frame):
            break
        name = frame.name.rsplit(".", 1)[-1]
        if _norm(frame.filename).endswith(_DDP_FILE):
            op = op or f"DDP {name}"  # DDP's own broadcasts and bucket syncs: name the innermost
        elif not _NOT_AN_OP.search(frame.name) and not _NOT_AN_OP.search(name):
            op = name  # the outermost public call is the one the program made
    if op is not None:
        return op
    innermost_native = []
    for frame in thread.frames:
        if not frame.native:
            break
        innermost_native.append(frame)
    if any(_NATIVE_COLLECTIVE.search(f.name) for f in innermost_native):
        return WORK_WAIT
    if lines is not None and python and not is_library_file(python[0].filename):
        text = lines(python[0].filename, python[0].line) or ""
        if _HANDLE_WAIT.search(text):
            return WORK_WAIT
    return None


def program_site(thread: ThreadSample) -> str:
    """The program's innermost frame, ``train_step (train.py:40)``; "" when the stack has none of its own."""
    for frame in thread.frames:
        if not frame.native and not is_library_file(frame.filename):
            return f"{frame.name} ({frame.short_filename}:{frame.line})" if frame.line else frame.name
    return ""


__all__ = ["WORK_WAIT", "collective_op", "program_site"]
