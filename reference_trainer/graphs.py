"""CUDA graphs captured per thread, the safe way, and the length buckets that give them static shapes.

The seed incident ran ``torch.compile(mode="reduce-overhead")`` from several threads: CUDAGraph Trees keep one
tree per device for the whole process and assert that a graph is replayed from the thread that recorded it,
and a graph's outputs live in its memory pool, so one thread's replay overwrote tensors another thread still
read ("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run"). The rules here,
each against one of those failures:

1. **One owner.** A ``ThreadGraphs`` belongs to the thread that created it (one per thread and role: a target
   thread's forward, a drafter thread's step). Every capture and replay checks the calling thread and refuses
   any other with ``GraphOwnershipError``; nothing is shared, so no lock is needed on the replay path.
2. **Its own pool and stream.** Each ``ThreadGraphs`` captures into its own memory pool
   (``torch.cuda.graph_pool_handle()``) on its own capture stream; replays run on the owner's own stream. No
   other thread's graph ever allocates from that pool.
3. **One capture at a time in the process** (``CAPTURE_LOCK``): torch.cuda.graph's documented restriction.
   Captures use ``capture_error_mode="thread_local"``, so the other threads' CUDA calls meanwhile (pinned
   allocations, event queries, their own kernels) neither break the capture nor are refused.
4. **Static inputs copied in.** Input buffers are allocated before the capture (outside the pool); each replay
   first copies the new values into them on the owner's stream, so the copy and the replay are ordered.
5. **Outputs copied out.** Right after a replay, before the owner replays anything again, the outputs are
   copied out (``copy_out``): the graphs of one ``ThreadGraphs`` share its pool, so a later replay may
   overwrite an earlier graph's outputs, and the consumer (another thread, through q_hs) reads the copy.
6. **Warm-up before capture**, on the capture stream: first calls compile (flex_attention, torch.compile) and
   Triton kernels autotune (fla's GatedDeltaNet kernels, once per sequence length) there, where syncs are
   allowed; the capture then records only launches.
7. **Fail soft.** A capture that raises is reported once (``failures``) and that graph runs eagerly; the run
   goes on.

Without CUDA (CPU runs, tests) ``EmulatedBackend`` keeps the same life cycle: static buffers, copy in, replay
into the *same* output tensors (a second replay overwrites the first's outputs, as on a GPU), copy out, the
same ownership checks. Only the capture itself is missing.

Length buckets: the target forward runs on the batch cut (or right-padded) to the smallest of a few fixed
lengths that holds its longest sequence, so a captured graph exists per bucket and ~6 % of the padding is
never computed. Only causal attention runs in the target (full-attention layers with ``is_causal``, GatedDeltaNet
is causal by construction): the hidden states of the real positions do not depend on what follows them. The
states are padded back with zeros to the batch's width for the drafter, whose block mask never shows it a
context position at or past its anchor (< length): the loss and every gradient are unchanged (tested).
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from reference_trainer.data import Batch
    from reference_trainer.target import FrozenTarget

MODES = ("off", "target", "all")
# One capture at a time in the process (torch.cuda.graph: "only one capture may be underway at a time").
CAPTURE_LOCK = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class GraphConfig:
    """``--cuda-graphs`` and ``--length-buckets``."""

    mode: str = "off"  # off | target (the target forward per bucket) | all (target + the drafter step)
    # Length buckets of the target forward: 0 = every batch at its padded width (as before); with graphs on,
    # 0 means one bucket (the full length).
    length_buckets: int = 0
    warmup_iters: int = 2  # eager calls on the capture stream before each capture

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"--cuda-graphs must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not 0 <= self.length_buckets <= 64:
            raise ValueError(f"--length-buckets must be in [0, 64], got {self.length_buckets}")
        if self.warmup_iters < 1:
            raise ValueError("graph warm-up needs at least one eager call before the capture")

    @property
    def target(self) -> bool:
        return self.mode in ("target", "all")

    @property
    def drafter(self) -> bool:
        return self.mode == "all"

    def buckets(self, min_len: int, max_len: int) -> tuple[int, ...]:
        """The target forward's lengths; () = no bucketing (the batch's own width)."""
        count = self.length_buckets or (1 if self.target else 0)
        return bucket_lengths(min_len, max_len, count) if count else ()


# --------------------------------------------------------------------------------------------------------
# Length buckets
# --------------------------------------------------------------------------------------------------------


def bucket_multiple(max_len: int) -> int:
    """Bucket lengths are multiples of 64 (fla's chunk, tensor-core tiles) on real sequences, 16 on tiny ones."""
    return 64 if max_len >= 1024 else 16


def bucket_lengths(min_len: int, max_len: int, count: int) -> tuple[int, ...]:
    """``count`` lengths (fewer where rounding merges them) covering [min_len, max_len]: the upper edges of
    ``count`` equal slices of the range, rounded up to ``bucket_multiple``; the last is ``max_len`` itself."""
    if count < 1 or not 1 <= min_len <= max_len:
        raise ValueError(f"need count >= 1 and 1 <= min_len <= max_len, got {count}, {min_len}, {max_len}")
    multiple = bucket_multiple(max_len)
    edges = {min(max_len, math.ceil((min_len + (max_len - min_len) * i / count) / multiple) * multiple)
             for i in range(1, count)}
    return tuple(sorted(edges | {max_len}))


def bucket_for(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds ``length`` tokens."""
    for bucket in buckets:
        if length <= bucket:
            return bucket
    raise ValueError(f"a sequence of {length} tokens is longer than the largest bucket ({buckets[-1]})")


def fit_width(ids: torch.Tensor, width: int) -> torch.Tensor:
    """[B, S] host ids cut to ``width`` columns, or right-padded with 0 (the padding id) up to it."""
    if ids.shape[1] >= width:
        return ids[:, :width].contiguous()
    return torch.nn.functional.pad(ids, (0, width - ids.shape[1]))


def pad_positions(hidden: torch.Tensor, width: int) -> torch.Tensor:
    """[B, L, W] -> a new [B, width, W]: the first min(L, width) positions, zeros after (never visible to the
    drafter: its block mask shows context positions strictly before an anchor, and anchors are < length)."""
    batch, length, size = hidden.shape
    keep = min(length, width)
    out = hidden.new_empty(batch, width, size)
    out[:, :keep].copy_(hidden[:, :keep])
    if keep < width:
        out[:, keep:].zero_()  # only the tail: no memset of positions the copy writes anyway
    return out


# --------------------------------------------------------------------------------------------------------
# Backends: how a graph is captured and replayed
# --------------------------------------------------------------------------------------------------------


@dataclass
class Captured:
    """A captured graph: its static input buffers, its static outputs, and how to replay it."""

    inputs: tuple[torch.Tensor, ...]
    outputs: Any  # a tensor or a tuple of tensors (None entries allowed)
    replay: Callable[[], None]
    handle: Any = None  # the torch.cuda.CUDAGraph, kept alive with its pool


class GraphBackend(Protocol):
    kind: str

    def capture(self, fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], warmup_iters: int) -> Captured: ...


def _copy_into(static: Any, fresh: Any) -> None:
    if isinstance(static, torch.Tensor):
        static.copy_(fresh)
    elif isinstance(static, (tuple, list)):
        for s, f in zip(static, fresh, strict=True):
            _copy_into(s, f)


class EmulatedBackend:
    """No CUDA: the graph life cycle without a capture. 'Capture' runs ``fn`` on the static inputs once;
    'replay' runs it again and copies the results into the *same* output tensors, so a second replay
    overwrites the first one's outputs exactly as a CUDA graph's replay does."""

    kind = "emulated"

    def capture(self, fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], warmup_iters: int) -> Captured:
        with CAPTURE_LOCK:  # the same serialisation as on CUDA: what runs under it is the same code
            for _ in range(warmup_iters):
                fn(*inputs)
            outputs = fn(*inputs)
        return Captured(inputs=inputs, outputs=outputs, replay=lambda: _copy_into(outputs, fn(*inputs)))


class CudaBackend:
    """Real CUDA graphs: this backend's own capture stream and memory pool (one backend per ThreadGraphs)."""

    kind = "cuda"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)  # this owner's capture (and warm-up) stream
        self.pool: Any = None  # this owner's memory pool, shared by its graphs (rule 5 makes that safe)

    def capture(self, fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], warmup_iters: int) -> Captured:
        current = torch.cuda.current_stream(self.device)
        with CAPTURE_LOCK:
            # The static inputs were written on `current`: the warm-up (on the capture stream) reads them after.
            self.stream.wait_stream(current)
            with torch.cuda.stream(self.stream):
                for _ in range(warmup_iters):  # first calls compile / autotune here, outside the capture
                    fn(*inputs)
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            # SYNC: torch.cuda.graph's __enter__ synchronises the device (once per capture, at start-up).
            with torch.cuda.graph(graph, pool=self.pool, stream=self.stream, capture_error_mode="thread_local"):
                outputs = fn(*inputs)
            current.wait_stream(self.stream)  # GPU-side: later work on `current` after the capture stream's
        return Captured(inputs=inputs, outputs=outputs, replay=graph.replay, handle=graph)


def make_backend(device: torch.device) -> GraphBackend:
    return CudaBackend(device) if device.type == "cuda" else EmulatedBackend()


# --------------------------------------------------------------------------------------------------------
# One thread's graphs
# --------------------------------------------------------------------------------------------------------


class GraphOwnershipError(RuntimeError):
    """A thread tried to capture, replay or release graphs that another thread owns."""


@dataclass
class ThreadGraphs:
    """One thread's CUDA graphs for one role: captured, replayed and released only by the thread that created
    it (rule 1), in its own pool and on its own capture stream (rule 2, ``backend``)."""

    role: str  # e.g. "target-0 forward": named in errors and in the summary
    backend: GraphBackend
    owner: threading.Thread = field(default_factory=threading.current_thread)
    graphs: dict[Hashable, Captured] = field(default_factory=dict)
    failures: dict[Hashable, str] = field(default_factory=dict)
    captured: list[Hashable] = field(default_factory=list)  # every key captured, kept after release (summary)

    def _check_owner(self, action: str) -> None:
        caller = threading.current_thread()
        if caller is not self.owner:
            raise GraphOwnershipError(
                f"{action} of the CUDA graphs of {self.role!r} from thread {caller.name!r} refused: they belong to "
                f"thread {self.owner.name!r}. Each thread captures and replays only its own graphs (its own memory "
                "pool, static buffers and stream); give the other thread its own ThreadGraphs.")

    def has(self, key: Hashable) -> bool:
        return key in self.graphs

    def capture(self, key: Hashable, fn: Callable[..., Any], example_inputs: Sequence[torch.Tensor],
                warmup_iters: int) -> bool:
        """Warm up and capture ``fn`` for ``key``; False (and one warning) when the capture failed: that key then
        runs eagerly (rule 7)."""
        self._check_owner("capture")
        if key in self.graphs or key in self.failures:
            return key in self.graphs
        static = tuple(t.clone() for t in example_inputs)  # rule 4: allocated here, outside the graph's pool
        try:
            self.graphs[key] = self.backend.capture(fn, static, warmup_iters)
            self.captured.append(key)
        except Exception as err:  # a capture that fails must not end the run: that graph runs eagerly
            reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            self.failures[key] = reason
            print(f"reference_trainer: warning: CUDA graph capture of {self.role} {key} failed ({reason}); it runs "
                  "eagerly", file=sys.stderr, flush=True)
            return False
        return True

    def replay(self, key: Hashable, inputs: Sequence[torch.Tensor], copy_out: Callable[[Any], Any]) -> Any:
        """Copy ``inputs`` into the static buffers, replay, and return ``copy_out(static outputs)``: the copy
        is issued before this thread can replay anything else (rule 5)."""
        self._check_owner("replay")
        graph = self.graphs[key]
        for buffer, value in zip(graph.inputs, inputs, strict=True):
            buffer.copy_(value, non_blocking=True)  # same stream as the replay: ordered, no sync
        graph.replay()
        return copy_out(graph.outputs)

    def release(self) -> None:
        """Drop the graphs (and with them their pool): by the owner, or by anyone once the owner has ended."""
        if self.owner.is_alive():
            self._check_owner("release")
        self.graphs.clear()

    def describe(self) -> dict[str, Any]:
        return {"kind": self.backend.kind, "owner": self.owner.name, "captured": [str(k) for k in self.captured],
                "failed": {str(k): v for k, v in self.failures.items()}}


# --------------------------------------------------------------------------------------------------------
# The target forward over length buckets
# --------------------------------------------------------------------------------------------------------


def _pinned(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    # Pinned, so the copy into the static buffer is asynchronous (a pageable copy would block the CPU).
    return tensor.pin_memory() if device.type == "cuda" else tensor


class BucketedTarget:
    """One target thread's forward: the batch at its bucket's length, through that bucket's graph when
    ``graphs`` is given (captured by ``prepare``), else eagerly; returns [B, width, n_tapped * H]."""

    def __init__(self, target: FrozenTarget, buckets: tuple[int, ...], batch_size: int,
                 graphs: ThreadGraphs | None, warmup_iters: int) -> None:
        if not buckets:
            raise ValueError("BucketedTarget needs at least one bucket")
        self.target, self.buckets, self.batch_size = target, buckets, batch_size
        self.graphs, self.warmup_iters = graphs, warmup_iters

    def prepare(self) -> None:
        """Capture every bucket now (the owner thread, before its first batch): captures sync the device, so
        they happen once, up front, not in the middle of a measured run."""
        if self.graphs is None:
            return
        for length in self.buckets:
            example = torch.zeros(self.batch_size, length, dtype=torch.long, device=self.target.device)
            self.graphs.capture(("target", self.batch_size, length), self.target.hidden_states, (example,),
                                self.warmup_iters)

    def forward(self, batch: Batch) -> torch.Tensor:
        width = batch.input_ids.shape[1]
        length = bucket_for(int(batch.lengths.max()), self.buckets)  # a host tensor: no sync
        ids = fit_width(batch.input_ids, length)
        key = ("target", ids.shape[0], length)
        device = self.target.device
        if self.graphs is not None and self.graphs.has(key):
            return self.graphs.replay(key, (_pinned(ids, device),), lambda out: pad_positions(out, width))
        ids_device = ids.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else ids.to(device)
        return pad_positions(self.target.hidden_states(ids_device), width)


__all__ = [
    "CAPTURE_LOCK", "MODES", "BucketedTarget", "Captured", "CudaBackend", "EmulatedBackend", "GraphConfig",
    "GraphOwnershipError", "ThreadGraphs", "bucket_for", "bucket_lengths", "fit_width", "make_backend",
    "pad_positions",
]
