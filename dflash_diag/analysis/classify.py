"""Classify one sample of one thread into a :class:`ThreadState`. Pure functions; docs/states.md has the rules.

Evidence, from strongest to weakest:

1. native frames (``py-spy dump --native``): ``cudaStreamSynchronize`` & co. mean GPU wait, ``take_gil`` /
   ``PyEval_RestoreThread`` / ``gil_scoped_acquire`` / a bare ``pthread_cond_timedwait`` right under a Python
   frame mean GIL wait, ``cuLaunchKernel`` into a saturated GPU means GPU wait;
2. Python frames: ``Queue.put``/``Queue.get`` parked in ``threading.Condition.wait``; ``torch.cuda.synchronize``
   and ``Event/Stream.synchronize``; torch._dynamo / torch._inductor / triton compiler frames; the
   torch.utils.checkpoint recompute and saved-tensor hooks; ``Event.wait``, ``Lock.acquire``, ``select``...;
3. the source text of the innermost Python line, when a line lookup is injected (``.item()``, ``.cpu()``,
   ``synchronize()``, ``time.sleep(``, ``q.get(``): C functions such as ``Tensor.item`` leave no Python frame;
4. what the kernel says (:class:`OsEvidence`): a thread that used ~0% CPU around the sample is blocked (a lock,
   a socket, a C-level queue), not computing and not contending for the GIL; and how busy the thread's GPU was
   (:class:`DeviceEvidence`): in torch ops while the device is saturated, the host waits on the device;
5. py-spy's ``owns_gil`` and ``active`` flags, and whether *another* thread held the GIL in the same dump
   (a thread that is off-CPU in plain Python code while someone else holds the GIL is waiting for it).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from dflash_diag.analysis.collectives import collective_op
from dflash_diag.model import Frame, StackSample, ThreadSample, ThreadState

# (filename, line) -> the stripped source text of that line, or None when unknown. Injected so that the
# analysis stays pure: sources.lines.LineCache reads files from disk, tests pass a dict.
LineLookup = Callable[[str, int], "str | None"]


@dataclass(frozen=True, slots=True)
class Classification:
    """A state and the rule that chose it (shown by ``top``'s stack pane and ``doctor``'s evidence)."""

    state: ThreadState
    rule: str


# Under 0.5% of one core (2.5 ms in a 0.5 s /proc interval) around a sample: the thread did not run. A thread
# waiting for the GIL gets it within a few 5 ms switch intervals and runs bytecode (seen: 1.9% for a drafter
# starved by a GIL hog on a loaded box); one parked in a lock, socket or C-level queue uses nothing (0.0%).
BLOCKED_CPU_SHARE = 0.005
MIN_EVIDENCE_S = 0.2  # ... measured over at least this long (tens of GIL switch intervals of 5 ms)
GPU_BUSY_PCT = 90.0  # NVML utilisation at which the device, not the host, sets the pace


@dataclass(frozen=True, slots=True)
class OsEvidence:
    """What /proc said about one thread around one stack sample."""

    cpu_share: float | None  # CPU time used / wall time, over the /proc readings around the sample (1.0 = a core)
    span_s: float  # how long those readings span
    state: str | None = None  # R, S, D... from the nearest reading
    wchan: str | None = None  # kernel wait channel, from the nearest reading
    syscall: str | None = None  # blocking system call, from the nearest reading

    @property
    def blocked(self) -> bool:
        """The thread did not run around the sample (and was not runnable at the nearest reading)."""
        return (self.cpu_share is not None and self.span_s >= MIN_EVIDENCE_S
                and self.cpu_share < BLOCKED_CPU_SHARE and self.state != "R")

    def blocked_in(self) -> str:
        """What the thread is blocked in, in words ("a socket read (recvfrom)")."""
        return wait_kind(self.wchan, self.syscall)


@dataclass(frozen=True, slots=True)
class DeviceEvidence:
    """How busy the GPU a thread works on was (NVML utilisation, %) when the sample was taken."""

    index: int
    util_pct: float


_WAIT_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"futex"), "a lock, condition or C-level queue"),
    (re.compile(r"recv|sk_wait|unix_stream_read|tcp_recv|inet_csk_accept|accept"), "a socket read"),
    (re.compile(r"poll|select|ep_poll|epoll"), "poll/select"),
    (re.compile(r"nanosleep|hrtimer|do_nanosleep"), "a sleep"),
    (re.compile(r"pipe_read|wait_woken|^read|pread|readv"), "a read"),
    (re.compile(r"wait4|do_wait"), "waiting for a child process"),
    (re.compile(r"ioctl"), "a device ioctl"),
)


def wait_kind(wchan: str | None, syscall: str | None) -> str:
    """A kernel wait in words, from the wait channel and the system call (either may be unknown)."""
    for text in (syscall, wchan):
        if text:
            for pattern, words in _WAIT_KINDS:
                if pattern.search(text):
                    detail = ", ".join(x for x in (syscall, wchan) if x)
                    return f"{words} ({detail})"
    detail = ", ".join(x for x in (syscall, wchan) if x)
    return f"the kernel ({detail})" if detail else "the kernel"


# --- native-frame evidence --------------------------------------------------------------------------------

_NATIVE_GPU_SYNC = re.compile(
    r"cudaStreamSynchronize|cudaEventSynchronize|cudaDeviceSynchronize|cuStreamSynchronize|cuEventSynchronize"
    r"|cuCtxSynchronize|cudaMemcpy(?!Async)|cuMemcpyDtoH(?!Async)|device_synchronize|stream_synchronize"
    r"|_local_scalar_dense_cuda|CUDAStream::synchronize|CUDAEvent::synchronize|memcpy_and_sync"
)
# take_gil is usually inlined and never shows; its callers do.
_NATIVE_GIL_TAKE = re.compile(
    r"\btake_gil\b|PyEval_RestoreThread|PyEval_AcquireThread|PyEval_AcquireLock|PyGILState_Ensure"
    r"|gil_scoped_acquire|~gil_scoped_release|\bdrop_gil\b"
)
_NATIVE_PYLOCK = re.compile(r"PyThread_acquire_lock|lock_PyThread_acquire_lock|acquire_timed|PyMutex")
_NATIVE_BINDING_LIB = re.compile(r"^(libpython|libtorch_python)")
_NATIVE_CONDWAIT = re.compile(r"^(pthread_cond_timedwait|pthread_cond_wait|__pthread_cond_wait|futex_wait|__futex)")
_NATIVE_COMPUTE_LIB = re.compile(
    r"libtorch|libc10|libcublas|libcudnn|libmkl|libgomp|libiomp|libopenblas|libtriton|triton|__triton_launcher"
    r"|cuda_utils|libcuda|libcudart|\bfla|flash_attn|cutlass|libnccl",
    re.I,
)
_NATIVE_COMPILE = re.compile(r"libtriton|mlir::|triton::|ptxas|LLVM|llvm::", re.I)
_NATIVE_CHECKPOINT = re.compile(r"PySavedVariableHooks::call_(un)?pack_hook")
# Submitting work to the device: blocks when the launch queue is full (the device is behind).
_NATIVE_CUDA_SUBMIT = re.compile(
    r"cuLaunchKernel|cudaLaunchKernel|cuLaunchKernelEx|cudaLaunchKernelExC|cuGraphLaunch|cudaGraphLaunch"
    r"|cuMemcpyAsync|cudaMemcpyAsync|cuMemsetD|cudaMemsetAsync|cuEventRecord|cudaEventRecord|cuStreamWaitEvent"
)
# PyTorch's autograd worker threads (one per device) run backward for whichever thread called it.
_NATIVE_AUTOGRAD_ENGINE = re.compile(r"torch::autograd::Engine::thread_main|torch::autograd::Engine::thread_init")

# --- Python-frame evidence --------------------------------------------------------------------------------

_THREADING_WAITS = {
    "Condition.wait",
    "Condition.wait_for",
    "Event.wait",
    "Semaphore.acquire",
    "BoundedSemaphore.acquire",
    "Barrier.wait",
    "Barrier._wait",
    "Thread.join",
    "Thread._wait_for_tstate_lock",
    "_wait_for_tstate_lock",
}
_IDLE_FILES = ("selectors.py", "socket.py", "ssl.py", "subprocess.py", "asyncio/", "multiprocessing/connection.py")
_IDLE_NAMES = re.compile(
    # Blocking socket/pipe I/O: reads, and writes to a peer that does not drain (``SocketIO.readinto`` is what
    # ``sock.makefile("rb").read(n)`` parks in; ``sendall`` blocks on a full send buffer).
    r"(^|\.)(sleep|wait|wait_for|join|select|poll|epoll|recv|recv_into|recvfrom|recvfrom_into|recvmsg|readinto|"
    r"accept|read|readline|_recv|_recv_bytes|recv_bytes|send|sendall|_send|_send_bytes|write|serve_forever)$"
)

_GPU_SYNC_FRAMES = (
    ("torch/cuda/__init__.py", re.compile(r"^synchronize$")),
    ("torch/cuda/streams.py", re.compile(r"^(Stream|Event|ExternalStream)\.synchronize$")),
    ("torch/accelerator/__init__.py", re.compile(r"^synchronize$")),
    ("torch/xpu/__init__.py", re.compile(r"^synchronize$")),
)
# Line text that blocks the host on the device (C functions: no Python frame of their own): calls only a tensor
# (or a stream/event) has, and Python conversions of an expression that is visibly a tensor's.
_GPU_SYNC_LINE = re.compile(
    r"\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)|\bsynchronize\(|\.to\(\s*(device\s*=\s*)?['\"]cpu['\"]"
    r"|torch\.cuda\.current_stream\(\)\.synchronize"
    r"|\b(int|float|bool|complex)\(\s*torch\.|torch\.(equal|allclose|nonzero|unique|masked_select|bincount)\("
    r"|^\s*(if|elif|while|assert)\b.*\btorch\.(isfinite|isnan|isinf|any|all|equal|allclose)\("
)
# Python conversions that read a value on the host when the value is a CUDA tensor (`int(t)`, `float(loss)`,
# `bool(mask.any())`, `if done:`, `print(t)`, an f-string): the text alone cannot tell a tensor from a number. A
# thread found at such a line *without the GIL* is in C (converting a number never lets the GIL go): in a process
# with CUDA loaded, that is the tensor's read waiting on the GPU. CUDA's default sync spins, so the thread is on
# CPU (py-spy: active) while it waits.
_MAYBE_SYNC_LINE = re.compile(
    r"\b(int|float|bool|complex|round)\(|\bprint\(|^\s*(if|elif|while|assert)\b|\bmath\.(isfinite|isnan|isinf)\("
    r"|\bf['\"].*\{|\.format\(|\bstr\(|\brepr\(|\bnot\s+\w"
)
_IDLE_LINE = re.compile(
    r"\b(time\.)?sleep\(|\.wait\(|\.join\(|\bselect\(|\.recv\(|\.accept\(|\.acquire\(|input\(|\.poll\(|\.read\(|\.readline\("
)
_QUEUE_LINE = re.compile(r"(\b\w*q\w*|\w*queue\w*)\.(put|get)(_nowait)?\(", re.I)

# Frames that mean "compiling now". Not the runtime wrappers (eval_frame._fn, output_code, runtime_wrappers,
# _inductor/runtime/): compiled code runs under those too and must not look like compilation.
_COMPILE_FILES = (
    "torch/_dynamo/convert_frame.py",
    "torch/_dynamo/symbolic_convert.py",
    "torch/_dynamo/output_graph.py",
    "torch/_dynamo/variables/",
    "torch/_dynamo/guards.py",
    "torch/_dynamo/backends/",
    "torch/_inductor/compile_fx.py",
    "torch/_inductor/graph.py",
    "torch/_inductor/scheduler.py",
    "torch/_inductor/lowering.py",
    "torch/_inductor/codegen/",
    "torch/_inductor/codecache.py",
    "torch/_inductor/async_compile.py",
    "torch/_inductor/select_algorithm.py",
    "torch/_inductor/autotune_process.py",
    "torch/_functorch/aot_autograd.py",
    "torch/_functorch/_aot_autograd/jit_compile_runtime_wrappers.py",
    "torch/_functorch/_aot_autograd/graph_compile.py",
    "triton/compiler/",
)
_COMPILE_NAMES_IN_RUNTIME = re.compile(r"autotune|benchmark_all_configs|precompile|_precompile_config")

_CHECKPOINT_FILE = "torch/utils/checkpoint.py"
_CHECKPOINT_NAMES = re.compile(r"unpack_hook|pack_hook|recompute|CheckpointFunction\.backward|_recomputation_hook")

# Python entry points that block in C++ for the whole operation, off CPU and without the GIL.
_BLOCKING_NATIVE_ENTRY = {
    "_engine_run_backward": "torch/autograd/graph.py",
    "run_backward": "torch/autograd/graph.py",
}

_NATIVE_COMPUTE_PY_FILES = (
    "torch/nn/functional.py",
    "torch/nn/modules/",
    "torch/nn/utils/",
    "torch/optim/",
    "torch/functional.py",
    "torch/_tensor.py",
    "torch/autograd/",
    "torch/_ops.py",
    "torch/ops/",
    "triton/runtime/",
    "torch/_inductor/runtime/",
    "fla/",
    "flash_attn/",
)


# Bit flags of one native frame, computed once per distinct frame (C++ names are long; regexes over them are
# the classifier's main cost).
_N_GPU_SYNC = 1
_N_COMPILE = 2
_N_CHECKPOINT = 4
_N_GIL_TAKE = 8
_N_CONDWAIT = 16
_N_PYLOCK = 32
_N_BINDING = 64
_N_COMPUTE_LIB = 128
_N_UNNAMED = 256
_N_CUDA_SUBMIT = 512
_N_AUTOGRAD_ENGINE = 1024

# The symbol name tests (named frames only) and the library tests (any frame), as (pattern, flag) tables.
_NAME_FLAGS: tuple[tuple[re.Pattern[str], int], ...] = (
    (_NATIVE_GPU_SYNC, _N_GPU_SYNC),
    (_NATIVE_CHECKPOINT, _N_CHECKPOINT),
    (_NATIVE_GIL_TAKE, _N_GIL_TAKE),
    (_NATIVE_CONDWAIT, _N_CONDWAIT),
    (_NATIVE_PYLOCK, _N_PYLOCK),
    (_NATIVE_COMPILE, _N_COMPILE),
    (_NATIVE_CUDA_SUBMIT, _N_CUDA_SUBMIT),
    (_NATIVE_AUTOGRAD_ENGINE, _N_AUTOGRAD_ENGINE),
)
_LIB_FLAGS: tuple[tuple[re.Pattern[str], int], ...] = (
    (_NATIVE_COMPILE, _N_COMPILE),
    (_NATIVE_BINDING_LIB, _N_BINDING),
    (_NATIVE_COMPUTE_LIB, _N_COMPUTE_LIB),
)


@functools.lru_cache(maxsize=1 << 15)
def _native_flags(frame: Frame) -> int:
    name, lib = frame.name, frame.short_filename or ""
    flags = _N_UNNAMED if name.startswith("0x") else _flags(name, _NAME_FLAGS)
    return flags | _flags(lib, _LIB_FLAGS)


def _flags(text: str, table: tuple[tuple[re.Pattern[str], int], ...]) -> int:
    flags = 0
    for pattern, flag in table:
        if pattern.search(text):
            flags |= flag
    return flags


@functools.lru_cache(maxsize=1 << 14)
def _line_kind(text: str) -> ThreadState | None:
    if _GPU_SYNC_LINE.search(text):
        return ThreadState.GPU_WAIT
    if _IDLE_LINE.search(text):
        return ThreadState.IDLE
    return None


def _norm(filename: str) -> str:
    return filename.replace("\\", "/")


def _python_frames(thread: ThreadSample) -> list[Frame]:
    return [f for f in thread.frames if not f.native]


def _innermost_native(thread: ThreadSample) -> list[Frame]:
    """Native frames above (inner to) the innermost Python frame: what the thread is doing in C right now."""
    out: list[Frame] = []
    for frame in thread.frames:
        if not frame.native:
            break
        out.append(frame)
    return out


# Frames repeat across samples (the same stack, sampled again): the per-frame tests are memoised. Frame is a
# frozen, hashable value, so the cache is a pure speed-up (bounded).
_FRAME_CACHE = 1 << 15
_COMPILE_PATH = re.compile("|".join(re.escape(m) for m in _COMPILE_FILES))


@functools.lru_cache(maxsize=_FRAME_CACHE)
def _is_compile_frame(frame: Frame) -> bool:
    path = _norm(frame.filename)
    if _COMPILE_PATH.search(path):
        return True
    if "torch/_inductor/runtime/" in path and _COMPILE_NAMES_IN_RUNTIME.search(frame.name):
        return True
    return False


@functools.lru_cache(maxsize=_FRAME_CACHE)
def _is_checkpoint_frame(frame: Frame) -> bool:
    return _norm(frame.filename).endswith(_CHECKPOINT_FILE) and bool(_CHECKPOINT_NAMES.search(frame.name))


@functools.lru_cache(maxsize=_FRAME_CACHE)
def is_gpu_sync_line(text: str) -> bool:
    """A source line that blocks the host on the device (`.item()`, `.cpu()`, synchronize, `bool(torch.isfinite(t))`...)."""
    return _GPU_SYNC_LINE.search(text) is not None


@functools.lru_cache(maxsize=_FRAME_CACHE)
def may_sync_line(text: str) -> bool:
    """A conversion that reads a value on the host (`int(t)`, `float(x)`, `if flag:`, `print(t)`): a sync when the value
    is a CUDA tensor, which the text alone cannot tell."""
    return _MAYBE_SYNC_LINE.search(text) is not None


def host_sync_sample(thread: ThreadSample, text: str | None, *, cuda: bool | None,
                     gil_held_elsewhere: bool | None = None) -> bool:
    """The thread sits at a line that reads a tensor on the host, waiting on the GPU: a sync call in the text (CUDA not
    known absent), or a conversion it sits at in C, without the GIL, on CPU or with the GIL free (CUDA loaded)."""
    if text is None or cuda is False:
        return False
    if is_gpu_sync_line(text):
        return not thread.owns_gil
    if cuda is not True or thread.owns_gil or not may_sync_line(text):
        return False
    # Spinning (CUDA's default) the waiting thread is on CPU; with a blocking sync it sleeps, which a thread waiting
    # for the GIL does too: only when nobody holds the GIL is a sleeping thread at a conversion waiting on the GPU
    # (not at a print: a write to a full pipe sleeps there as well).
    return thread.active or (gil_held_elsewhere is False and "print(" not in text)


def is_gpu_sync_frame(frame: Frame) -> bool:
    """A Python frame that blocks the host on the device (torch.cuda.synchronize, Stream/Event.synchronize)."""
    path = _norm(frame.filename)
    return any(path.endswith(suffix) and pattern.search(frame.name) for suffix, pattern in _GPU_SYNC_FRAMES)


def _queue_state(py_frames: list[Frame], lines: LineLookup | None) -> tuple[ThreadState, str] | None:
    """QUEUE_PUT/GET when the thread is parked in a queue's put/get (the innermost non-threading frame)."""
    waited = False
    for frame in py_frames:
        short = frame.short_filename
        if short == "threading.py":
            waited = waited or frame.name in _THREADING_WAITS
            continue
        name = frame.name.rsplit(".", 1)[-1]
        if not waited:
            # In put/get but not parked in a Condition: taking the queue's mutex or doing bookkeeping, which
            # the GIL/CPU rules describe better than "starved".
            return None
        if short == "queue.py" and name in ("put", "get"):
            state = ThreadState.QUEUE_PUT if name == "put" else ThreadState.QUEUE_GET
            return state, f"{frame.name} parked in Condition.wait"
        if name in ("put", "get"):
            # A Queue-like class of the application (e.g. an instrumented queue) parked in a Condition.
            state = ThreadState.QUEUE_PUT if name == "put" else ThreadState.QUEUE_GET
            return state, f"{frame.name} waiting in threading"
        if lines is not None:
            text = lines(frame.filename, frame.line) or ""
            match = _QUEUE_LINE.search(text)
            if match:
                state = ThreadState.QUEUE_PUT if match.group(2) == "put" else ThreadState.QUEUE_GET
                return state, f"waiting in threading at `{text.strip()}`"
        return None
    return None


def _threading_idle(py_frames: list[Frame]) -> str | None:
    top = py_frames[0] if py_frames else None
    if top is None:
        return None
    if top.short_filename == "threading.py" and top.name in _THREADING_WAITS:
        return f"{top.name} in threading.py"
    path = _norm(top.filename)
    if any(marker in path for marker in _IDLE_FILES) and _IDLE_NAMES.search(top.name):
        return f"{top.name} in {top.short_filename}"
    # A multiprocessing queue's put parks on its bounded semaphore (SemLock's acquire, a C call under the line), its
    # get on the lock its readers share: waits on the processes at the other end, with the GIL released.
    if _MP_QUEUE_FILE in path and _MP_QUEUE_WAITS.search(top.name):
        return f"{top.name} in {top.short_filename}"
    # A ThreadPoolExecutor worker with nothing under its loop waits for its next job in the work queue's get (a C
    # SimpleQueue: no Python frame of its own), with the GIL released: idle, not native work nor a GIL wait.
    if path.endswith(_POOL_WORKER_FILE) and top.name == "_worker":
        return "waits for a job in concurrent/futures/thread.py"
    return None


_MP_QUEUE_FILE = "multiprocessing/queues.py"
_POOL_WORKER_FILE = "concurrent/futures/thread.py"
_MP_QUEUE_WAITS = re.compile(r"(^|\.)(put|get|join)$")


def explain(
    thread: ThreadSample,
    os_evidence: OsEvidence | None = None,
    *,
    lines: LineLookup | None = None,
    gil_held_elsewhere: bool | None = None,
    device: DeviceEvidence | None = None,
    cuda: bool | None = None,
) -> Classification:
    """The state of one thread in one sample, and the rule that decided it.

    ``os_evidence``: what /proc said about the thread around the sample (its CPU use, where the kernel has it
    blocked); ``gil_held_elsewhere``: whether another thread owned the GIL in the same dump (None: unknown);
    ``device``: how busy the GPU the thread works on was at the time (None: no GPU known); ``cuda``: whether the
    process has the CUDA driver loaded (False: a `.item()` or `.tolist()` line reads host memory, it cannot wait on
    a GPU; None: unknown). Without them the rules fall back to frames and flags alone (docs/states.md, "Known
    limits").
    """
    py_frames = _python_frames(thread)
    native_top = _innermost_native(thread)
    active = thread.active or (os_evidence is not None and os_evidence.state == "R")
    blocked = os_evidence is not None and os_evidence.blocked
    gpu_busy = device is not None and device.util_pct >= GPU_BUSY_PCT

    # 1. Blocked explicitly in a queue: the strongest statement about the pipeline.
    queue = _queue_state(py_frames, lines)
    if queue is not None and not thread.owns_gil:
        return Classification(*queue)

    flags = [_native_flags(f) for f in native_top]

    # 2. Native evidence of a device sync.
    for frame, fl in zip(native_top, flags, strict=True):
        if fl & _N_GPU_SYNC:
            return Classification(ThreadState.GPU_WAIT, f"native {frame.name}")

    # 3. Python-level device syncs.
    if not thread.owns_gil:
        for frame in py_frames[:3]:
            if is_gpu_sync_frame(frame):
                return Classification(ThreadState.GPU_WAIT, f"{frame.name} in {frame.short_filename}")

    # 4. Compilation and checkpoint recompute are contexts: whatever the thread does inside them is their cost.
    context = _context_state(py_frames, native_top, flags)
    if context is not None:
        return context

    if thread.owns_gil:
        return Classification(ThreadState.PYTHON, "owns the GIL")

    # 5. Native evidence of waiting for the GIL (take_gil is inlined: its callers or a bare condvar wait show).
    gil = _native_gil_wait(native_top, flags, has_python=bool(py_frames))
    if gil is not None:
        return gil

    # 6. In a torch.distributed collective: waiting for the peer ranks. gloo parks the caller on a condition while
    #    its own threads move and reduce the data, NCCL's host call only enqueues: the caller's own CPU time in it
    #    is bookkeeping (or a wake-up waiting for a core on a busy box), never the program's work.
    op = collective_op(thread, lines)
    if op is not None:
        return Classification(ThreadState.IDLE, f"in collective {op}: waits on the peer ranks")

    # 7. Idle: parked in threading/select/sockets.
    idle = _threading_idle(py_frames)
    if idle is not None:
        return Classification(ThreadState.IDLE, idle)
    lib = _native_lib_state(native_top, flags, blocked=blocked, os_evidence=os_evidence, device=device)
    if lib is not None:
        return lib

    top = py_frames[0] if py_frames else None
    if top is None:
        return Classification(ThreadState.IDLE, "no Python frames")

    # 8. The source line tells what a C call does: syncs and sleeps leave no Python frame.
    text = lines(top.filename, top.line) if lines is not None else None
    kind = _line_kind(text) if text else None
    if kind is ThreadState.GPU_WAIT and cuda is not False:
        return Classification(ThreadState.GPU_WAIT, f"host sync at `{text.strip()}`")  # type: ignore[union-attr]
    if kind is ThreadState.IDLE:
        return Classification(ThreadState.IDLE, f"blocking call at `{text.strip()}`")  # type: ignore[union-attr]
    if host_sync_sample(thread, text, cuda=cuda, gil_held_elsewhere=gil_held_elsewhere):
        return Classification(ThreadState.GPU_WAIT, f"host sync at `{text.strip()}`: a tensor read on the host, "  # type: ignore[union-attr]
                                                     "in C without the GIL with CUDA loaded")

    if waits_on_backward(thread):
        # The autograd engine runs backward in C++ (on a device thread for CUDA) while the caller sleeps without
        # the GIL: backward compute, not a GIL wait -- or the GPU's pace when the device is saturated.
        name = py_frames[0].name
        if gpu_busy and device is not None:
            return Classification(ThreadState.GPU_WAIT, f"{name}: backward while GPU{device.index} is "
                                                         f"{device.util_pct:.0f}% busy: the host waits on the device")
        return Classification(ThreadState.NATIVE, f"{name}: backward in the autograd engine")

    in_torch = _in_native_compute_py(py_frames)
    # 9. Submitting CUDA work while the device is saturated: the host waits on the GPU (a full launch queue,
    #    or a sync inside the op), whether it spins (on CPU) or sleeps.
    if in_torch and gpu_busy and device is not None:
        return Classification(ThreadState.GPU_WAIT, f"in torch/triton ops while GPU{device.index} is "
                                                     f"{device.util_pct:.0f}% busy: the host waits on the device")

    # 10. The kernel says the thread did not run around this sample: it waits (socket, lock, C-level queue...),
    #    it neither computes nor contends for the GIL (a GIL waiter gets the GIL every switch interval and runs).
    if blocked and os_evidence is not None:
        return Classification(ThreadState.IDLE, f"blocked in {os_evidence.blocked_in()}, "
                                                 f"{100 * (os_evidence.cpu_share or 0.0):.1f}% CPU")

    if active:
        where = "torch/triton/fla" if in_torch else top.short_filename
        return Classification(ThreadState.NATIVE, f"on CPU without the GIL in {where}")
    if gil_held_elsewhere is False:
        # Off-CPU in a C call while nobody holds the GIL: not waiting for it; blocked or descheduled native work.
        return Classification(ThreadState.NATIVE, "off CPU without the GIL while the GIL is free")
    return Classification(ThreadState.GIL_WAIT, "off CPU in Python code without the GIL")


def _context_state(py_frames: list[Frame], native_top: list[Frame], flags: list[int]) -> Classification | None:
    for frame in py_frames:
        if _is_compile_frame(frame):
            return Classification(ThreadState.COMPILE, f"{frame.name} in {_short_path(frame.filename)}")
    for frame, fl in zip(native_top, flags, strict=True):
        if fl & _N_COMPILE:
            return Classification(ThreadState.COMPILE, f"native {frame.name}")
    for frame in py_frames:
        if _is_checkpoint_frame(frame):
            return Classification(ThreadState.CHECKPOINT, f"{frame.name} in checkpoint.py")
    for frame, fl in zip(native_top, flags, strict=True):
        if fl & _N_CHECKPOINT:
            return Classification(ThreadState.CHECKPOINT, f"native {frame.name}")
    return None


def _native_gil_wait(native_top: list[Frame], flags: list[int], *, has_python: bool) -> Classification | None:
    named = [(f, fl) for f, fl in zip(native_top, flags, strict=True) if not fl & _N_UNNAMED]
    for frame, fl in named:
        if fl & _N_GIL_TAKE:
            return Classification(ThreadState.GIL_WAIT, f"native {frame.name}")
    if named and has_python and named[0][1] & _N_CONDWAIT:
        wait = named[0][0]
        if len(named) == 1:
            return Classification(ThreadState.GIL_WAIT, f"native {wait.name} directly under Python")
        caller, caller_fl = named[1]
        if not caller_fl & _N_PYLOCK and caller_fl & _N_BINDING:
            # The Python binding layer only blocks on a condvar to re-take the GIL (e.g. THPVariable_dealloc).
            return Classification(ThreadState.GIL_WAIT, f"native {wait.name} in {caller.name}: re-taking the GIL")
    return None


def _native_lib_state(
    native_top: list[Frame], flags: list[int], *, blocked: bool, os_evidence: OsEvidence | None,
    device: DeviceEvidence | None,
) -> Classification | None:
    """Native frames in ATen/BLAS/CUDA/triton code: computing, submitting to a busy GPU, or parked."""
    lib_frames = [(f, fl) for f, fl in zip(native_top, flags, strict=True) if fl & _N_COMPUTE_LIB]
    if not lib_frames:
        return None
    best = [f for f, fl in lib_frames if not fl & _N_UNNAMED] or [f for f, _ in lib_frames]
    submit = next((f for f, fl in zip(native_top, flags, strict=True) if fl & _N_CUDA_SUBMIT), None)
    if submit is not None and device is not None and device.util_pct >= GPU_BUSY_PCT:
        return Classification(ThreadState.GPU_WAIT, f"native {submit.name} while GPU{device.index} is "
                                                     f"{device.util_pct:.0f}% busy: the launch queue is full")
    innermost_wait = bool(flags) and bool(flags[0] & _N_CONDWAIT)
    if blocked and innermost_wait and os_evidence is not None:
        # A library thread parked on a condition variable (a worker pool, the autograd engine's ready queue).
        return Classification(ThreadState.IDLE, f"native {native_top[0].name} in {best[0].short_filename}, "
                                                 f"blocked in {os_evidence.blocked_in()}")
    # In ATen/BLAS/triton code: computing, or descheduled mid-computation (the CPU is shared).
    return Classification(ThreadState.NATIVE, f"native {best[0].name} in {best[0].short_filename}")


def _in_native_compute_py(py_frames: list[Frame]) -> bool:
    return any(marker in _norm(f.filename) for f in py_frames[:8] for marker in _NATIVE_COMPUTE_PY_FILES)


def _short_path(filename: str) -> str:
    path = _norm(filename)
    for anchor in ("torch/", "triton/", "fla/"):
        idx = path.find("/" + anchor)
        if idx >= 0:
            return path[idx + 1 :]
    return path.rsplit("/", 1)[-1]


def classify(
    thread: ThreadSample,
    os_evidence: OsEvidence | None = None,
    *,
    lines: LineLookup | None = None,
    gil_held_elsewhere: bool | None = None,
    device: DeviceEvidence | None = None,
    cuda: bool | None = None,
) -> ThreadState:
    """The state of one thread in one sample (see :func:`explain` for the rule that chose it)."""
    return explain(thread, os_evidence, lines=lines, gil_held_elsewhere=gil_held_elsewhere, device=device,
                   cuda=cuda).state


def gil_holder(sample: StackSample) -> int | None:
    """The thread_id owning the GIL in one dump, or None when no thread did."""
    for thread in sample.threads:
        if thread.owns_gil:
            return thread.thread_id
    return None


def is_autograd_worker_sample(thread: ThreadSample) -> bool:
    """Native frames of PyTorch's autograd engine thread (``Engine::thread_main``): an autograd worker."""
    return any(f.native and _native_flags(f) & _N_AUTOGRAD_ENGINE for f in thread.frames)


def runs_autograd_python(thread: ThreadSample) -> bool:
    """Python frames that only the autograd engine calls: checkpoint recompute/hooks, custom Function backward."""
    for frame in thread.frames:
        if frame.native:
            continue
        path = _norm(frame.filename)
        if _is_checkpoint_frame(frame) or ("torch/autograd/" in path and "backward" in frame.name.lower()):
            return True
    return False


def waits_on_backward(thread: ThreadSample) -> bool:
    """The thread called ``backward()`` and waits while the autograd engine runs it (on a device thread)."""
    for frame in _python_frames(thread)[:2]:
        if frame.name in _BLOCKING_NATIVE_ENTRY and _norm(frame.filename).endswith(_BLOCKING_NATIVE_ENTRY[frame.name]):
            return True
    return False


def started_by_threading(thread: ThreadSample) -> bool:
    """The outermost Python frame is threading's bootstrap: a thread Python started (not a C++ thread)."""
    py = _python_frames(thread)
    return bool(py) and py[-1].short_filename == "threading.py" and py[-1].name.rsplit(".", 1)[-1].startswith(
        "_bootstrap")


def classify_sample(
    sample: StackSample, *, lines: LineLookup | None = None
) -> tuple[tuple[ThreadSample, Classification], ...]:
    """Classify every thread of one dump, using who held the GIL in that dump as evidence."""
    holder = gil_holder(sample)
    out = []
    for thread in sample.threads:
        elsewhere = holder is not None and holder != thread.thread_id
        out.append((thread, explain(thread, lines=lines, gil_held_elsewhere=elsewhere)))
    return tuple(out)
