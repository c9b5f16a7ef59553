"""The process-wide settings dflash-diag knows, with their defaults and what each changes: one catalogue for the
``settings`` probe (inside the program) and the tool (the environment read from ``/proc/PID/environ``, the
findings that weigh them). Standard library only: the probes import this inside the user's program.

Three kinds of setting, each compared with its default:

- **environment variables** read by CUDA, NCCL, the OpenMP/MKL/BLAS thread pools, torch and Python
  (:data:`ENV_VARS`). Only these names are ever kept with a value, and only a value of a safe shape
  (:func:`shown_env_value`): a number, a word, a short list; anything else reads ``<set>``. Every other variable
  of the process is ignored here (the bundle lists names under its own allow-list, ``redact.py``);
- **the interpreter's** switch interval, collector thresholds and state, recursion limit, allocator and ``-X``
  options (:data:`INTERPRETER_DEFAULTS`, :func:`gc_default_thresholds`);
- **torch's process-wide modes and flags** (:data:`TORCH_DEFAULTS`): thread pools, deterministic algorithms,
  anomaly detection, the profiler, matmul precision, TF32, cuDNN benchmark, CUDA sync debug mode.

Each setting names its *area* (what it can slow: ``threads``, ``launches``, ``autograd``, ``collector``,
``gil``, ``numerics``, ``memory``, ``debug``): the findings make a setting the cause of a slowdown only where the
measured cost lies in that area (docs/findings.md, "Settings and the scheduler").
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

# What a setting can slow (the findings look for a measured cost there).
AREA_THREADS = "threads"  # how many OS threads compete for the cores, how they wait (spin or sleep), where they run
AREA_LAUNCHES = "launches"  # CUDA kernel launches and host-device syncs
AREA_AUTOGRAD = "autograd"  # every autograd op (anomaly detection, the profiler's per-op records)
AREA_COLLECTOR = "collector"  # Python's cyclic garbage collector
AREA_GIL = "gil"  # how threads share the interpreter
AREA_NUMERICS = "numerics"  # results and kernel choice (precision, determinism)
AREA_MEMORY = "memory"  # allocators
AREA_COLLECTIVES = "collectives"  # NCCL and torch.distributed
AREA_DEBUG = "debug"  # diagnostics that cost time everywhere (logging, tracing)
AREA_LIBRARY = "library"  # a library's own code paths (its constants: load factors, versions, modes)
AREA_KERNEL = "kernel"  # what the kernel does on the process's behalf (every system call, its memory)
AREA_IO = "io"  # how its streams are buffered and its text compared (stdout's buffering, the C library's locale)
AREA_NETWORK = "network"  # where its connections go (a proxy between it and the service it calls)
AREA_STARTUP = "startup"  # what each start of a process pays (the bytecode cache)
AREAS = (AREA_THREADS, AREA_LAUNCHES, AREA_AUTOGRAD, AREA_COLLECTOR, AREA_GIL, AREA_NUMERICS, AREA_MEMORY, AREA_LIBRARY,
         AREA_COLLECTIVES, AREA_DEBUG, AREA_KERNEL, AREA_IO, AREA_NETWORK, AREA_STARTUP)


@dataclass(frozen=True, slots=True)
class EnvVar:
    """An environment variable that changes speed or numerics, unset by default."""

    name: str
    area: str
    effect: str  # what a value changes, in a clause: "OpenMP threads per parallel region"
    default: str = "unset"  # what happens when it is not set
    # Values that ask for what the default does (``MKL_VERBOSE=0``): set, but not away from the default. Only where
    # the library documents them so; elsewhere any value counts (``PYTHONDEVMODE=0`` turns the mode on).
    off_values: tuple[str, ...] = ()

    def is_default(self, value: str) -> bool:
        return value.strip().upper() in {v.upper() for v in self.off_values}


_V = EnvVar
# The variables that name an HTTP proxy (lower case first: urllib and curl prefer it).
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
# The variables that name the certificate authorities' bundle: OpenSSL's (Python's ssl), requests', curl's.
CA_BUNDLE_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")

ENV_VARS: tuple[EnvVar, ...] = (
    # --- thread pools (OpenMP, MKL, BLAS, tokenizers) ---
    _V("OMP_NUM_THREADS", AREA_THREADS, "threads of each OpenMP parallel region (torch's intra-op pool)",
       "one per core"),
    _V("MKL_NUM_THREADS", AREA_THREADS, "threads of MKL's own pool", "one per core"),
    _V("OPENBLAS_NUM_THREADS", AREA_THREADS, "threads of OpenBLAS's pool (numpy)", "one per core"),
    _V("VECLIB_MAXIMUM_THREADS", AREA_THREADS, "threads of Accelerate's BLAS", "one per core"),
    _V("NUMEXPR_NUM_THREADS", AREA_THREADS, "threads of numexpr", "one per core, up to 8"),
    _V("OMP_WAIT_POLICY", AREA_THREADS, "whether idle OpenMP threads spin (ACTIVE) or sleep (PASSIVE)",
       "spin a while, then sleep"),
    _V("OMP_PROC_BIND", AREA_THREADS, "pins OpenMP threads to places", "not bound"),
    _V("OMP_PLACES", AREA_THREADS, "the CPUs OpenMP threads are bound to", "not bound"),
    _V("OMP_DYNAMIC", AREA_THREADS, "lets OpenMP shrink its teams", "false"),
    _V("GOMP_CPU_AFFINITY", AREA_THREADS, "pins libgomp's threads to the listed CPUs", "not pinned"),
    _V("GOMP_SPINCOUNT", AREA_THREADS, "how long libgomp's idle threads spin before they sleep", "300,000 spins"),
    _V("KMP_AFFINITY", AREA_THREADS, "pins Intel OpenMP's threads (compact: all on the first cores)", "not pinned"),
    _V("KMP_BLOCKTIME", AREA_THREADS, "how long Intel OpenMP's idle threads spin (ms)", "200 ms"),
    _V("KMP_HW_SUBSET", AREA_THREADS, "the cores Intel OpenMP uses", "all"),
    _V("KMP_LIBRARY", AREA_THREADS, "Intel OpenMP's run mode (turnaround: idle threads never yield the CPU)",
       "throughput"),
    _V("MKL_DYNAMIC", AREA_THREADS, "lets MKL use fewer threads than asked", "true"),
    _V("TOKENIZERS_PARALLELISM", AREA_THREADS, "the HF tokenizers' Rust thread pool", "on, off after a fork"),
    _V("TORCHINDUCTOR_COMPILE_THREADS", AREA_THREADS, "inductor's compile worker processes", "one per core, up to 32"),
    # --- CPU math kernels: which code path the libraries take on this CPU ---
    _V("MKL_CBWR", AREA_NUMERICS, "MKL's conditional numerical reproducibility: one fixed code path (COMPATIBLE: "
       "generic SSE2 kernels) instead of the CPU's fastest", "AUTO: the CPU's own kernels"),
    _V("MKL_ENABLE_INSTRUCTIONS", AREA_NUMERICS, "caps the instruction set MKL's kernels may use", "all the CPU has"),
    _V("ONEDNN_MAX_CPU_ISA", AREA_NUMERICS, "caps the instruction set oneDNN's kernels may use", "all the CPU has"),
    _V("DNNL_MAX_CPU_ISA", AREA_NUMERICS, "caps the instruction set oneDNN's kernels may use (older name)",
       "all the CPU has"),
    _V("ATEN_CPU_CAPABILITY", AREA_NUMERICS, "the vectorised kernel set torch's CPU ops use (default: the scalar "
       "builds)", "the CPU's best"),
    _V("ONEDNN_PRIMITIVE_CACHE_CAPACITY", AREA_NUMERICS, "how many oneDNN primitives (a convolution's chosen and "
       "JIT-compiled kernel) are kept for reuse (0: each call builds its own)", "1024"),
    _V("DNNL_PRIMITIVE_CACHE_CAPACITY", AREA_NUMERICS, "how many oneDNN primitives are kept for reuse (older name; "
       "0: each call builds its own)", "1024"),
    _V("LRU_CACHE_CAPACITY", AREA_NUMERICS, "ideep's cache of oneDNN primitives (torch's oneDNN bridge)", "1024"),
    _V("MKL_DEBUG_CPU_TYPE", AREA_NUMERICS, "forces MKL's kernels for a named CPU type instead of detecting this "
       "one's", "detected"),
    _V("OPENBLAS_CORETYPE", AREA_NUMERICS, "forces OpenBLAS's kernels for a named core (numpy's BLAS, torch's on "
       "ARM) instead of detecting this one's", "detected"),
    _V("NPY_DISABLE_CPU_FEATURES", AREA_NUMERICS, "turns off numpy's SIMD kernels for the listed CPU features (its "
       "ufuncs, sorts and reductions fall back to slower paths)", "none"),
    _V("MKL_VERBOSE", AREA_DEBUG, "MKL logs every call", "off", ("0",)),
    # --- the dynamic linker (ld.so(8)): read by every process it starts, any non-empty value counts ---
    _V("LD_BIND_NOT", AREA_DEBUG, "the dynamic linker resolves a lazily bound function again on every call (it "
       "does not write the address it found back into the call's slot: a symbol lookup per call into another "
       "library)", "resolved once, on first call"),
    _V("LD_DEBUG", AREA_DEBUG, "the dynamic linker reports its work (bindings: every symbol it resolves) on stderr",
       "off"),
    _V("ONEDNN_JIT_DUMP", AREA_DEBUG, "oneDNN writes every JIT-compiled kernel to a file", "off", ("0",)),
    _V("DNNL_JIT_DUMP", AREA_DEBUG, "oneDNN writes every JIT-compiled kernel to a file (older name)", "off", ("0",)),
    _V("ONEDNN_VERBOSE", AREA_DEBUG, "oneDNN logs every primitive", "off", ("0", "none")),
    _V("DNNL_VERBOSE", AREA_DEBUG, "oneDNN logs every primitive (older name)", "off", ("0", "none")),
    # --- CUDA ---
    _V("CUDA_LAUNCH_BLOCKING", AREA_LAUNCHES, "makes every kernel launch wait for the kernel (a sync per launch)",
       "asynchronous launches"),
    _V("CUDA_DEVICE_MAX_CONNECTIONS", AREA_LAUNCHES, "hardware work queues per device", "8"),
    _V("CUDA_MODULE_LOADING", AREA_LAUNCHES, "when kernels are loaded (EAGER: all at start-up)", "LAZY"),
    _V("CUDA_VISIBLE_DEVICES", AREA_LAUNCHES, "which GPUs the process sees", "all"),
    _V("CUDA_CACHE_DISABLE", AREA_LAUNCHES, "turns off the PTX JIT cache (recompiles at every start)", "cached"),
    _V("CUBLAS_WORKSPACE_CONFIG", AREA_NUMERICS, "cuBLAS workspaces (:4096:8 for deterministic results)",
       "cuBLAS's own"),
    _V("NVIDIA_TF32_OVERRIDE", AREA_NUMERICS, "forces TF32 off (0) for every library", "libraries decide"),
    _V("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", AREA_NUMERICS, "forces TF32 matmuls on", "torch's flag decides"),
    _V("CUDNN_LOGINFO_DBG", AREA_DEBUG, "cuDNN's API log", "off", ("0",)),
    _V("CUBLAS_LOGINFO_DBG", AREA_DEBUG, "cuBLAS's API log", "off", ("0",)),
    _V("CUBLASLT_LOG_LEVEL", AREA_DEBUG, "cuBLASLt's API log", "off", ("0",)),
    # --- torch ---
    _V("PYTORCH_CUDA_ALLOC_CONF", AREA_MEMORY, "the CUDA caching allocator's options", "torch's defaults"),
    _V("PYTORCH_ALLOC_CONF", AREA_MEMORY, "the caching allocator's options", "torch's defaults"),
    _V("PYTORCH_NO_CUDA_MEMORY_CACHING", AREA_MEMORY, "turns the CUDA caching allocator off (a cudaMalloc per tensor)",
       "cached"),
    _V("TORCH_LOGS", AREA_DEBUG, "torch's log artifacts (recompiles, graph breaks, output code...)", "quiet"),
    _V("TORCH_COMPILE_DEBUG", AREA_DEBUG, "dumps every compiled graph and its code to disk", "off"),
    _V("TORCHDYNAMO_DISABLE", AREA_AUTOGRAD, "turns torch.compile into eager mode", "compiles"),
    _V("TORCH_COMPILE_DISABLE", AREA_AUTOGRAD, "turns torch.compile into eager mode", "compiles"),
    _V("TORCHINDUCTOR_MAX_AUTOTUNE", AREA_LAUNCHES, "benchmarks kernel choices while compiling", "off"),
    _V("TORCH_SHOW_CPP_STACKTRACES", AREA_DEBUG, "C++ stack traces in errors", "off", ("0",)),
    _V("TORCH_USE_CUDA_DSA", AREA_LAUNCHES, "device-side assertions in every kernel", "off"),
    _V("TORCH_DISTRIBUTED_DEBUG", AREA_COLLECTIVES, "checks every collective (DETAIL: a sync per call)", "OFF",
       ("OFF",)),
    _V("TORCH_CPP_LOG_LEVEL", AREA_DEBUG, "torch's C++ log level", "WARNING", ("WARNING", "1")),
    _V("PYTORCH_JIT", AREA_AUTOGRAD, "TorchScript (0: scripted code runs as Python)", "on", ("1",)),
    _V("TORCH_FORCE_WEIGHTS_ONLY_LOAD", AREA_LIBRARY, "torch.load unpickles with its restricted Python unpickler "
       "even where the caller passed weights_only=False", "the caller's weights_only", ("0",)),
    _V("NUMBA_DISABLE_JIT", AREA_LIBRARY, "numba's @jit and @njit functions run as plain Python", "compiles",
       ("0",)),
    _V("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", AREA_LIBRARY, "which protobuf runtime parses and builds messages "
       "(python: the pure-Python one)", "upb (C)", ("upb", "cpp")),
    _V("TORCH_NCCL_BLOCKING_WAIT", AREA_COLLECTIVES, "the host blocks in every collective's wait", "off"),
    _V("TORCH_NCCL_ASYNC_ERROR_HANDLING", AREA_COLLECTIVES, "how NCCL errors end the process", "3"),
    _V("TORCH_NCCL_ENABLE_MONITORING", AREA_COLLECTIVES, "the NCCL heartbeat monitor thread", "on"),
    _V("TORCH_NCCL_TRACE_BUFFER_SIZE", AREA_COLLECTIVES, "the flight recorder's entries", "2000"),
    # --- NCCL ---
    _V("NCCL_DEBUG", AREA_DEBUG, "NCCL's log (INFO/TRACE print per call)", "WARN", ("WARN",)),
    _V("NCCL_DEBUG_SUBSYS", AREA_DEBUG, "NCCL's logged subsystems", "INIT,BOOTSTRAP,ENV"),
    _V("NCCL_P2P_DISABLE", AREA_COLLECTIVES, "turns off GPU peer-to-peer (NVLink/PCIe) transfers", "on"),
    _V("NCCL_SHM_DISABLE", AREA_COLLECTIVES, "turns off shared-memory transfers", "on"),
    _V("NCCL_IB_DISABLE", AREA_COLLECTIVES, "turns off InfiniBand (falls back to sockets)", "on"),
    _V("NCCL_NET", AREA_COLLECTIVES, "the network NCCL uses", "auto"),
    _V("NCCL_ALGO", AREA_COLLECTIVES, "forces a collective algorithm", "auto"),
    _V("NCCL_PROTO", AREA_COLLECTIVES, "forces a protocol", "auto"),
    _V("NCCL_NTHREADS", AREA_COLLECTIVES, "CUDA threads per NCCL block", "auto"),
    _V("NCCL_MAX_NCHANNELS", AREA_COLLECTIVES, "channels (parallel rings) NCCL may use", "auto"),
    _V("NCCL_MIN_NCHANNELS", AREA_COLLECTIVES, "channels NCCL uses at least", "auto"),
    _V("NCCL_BUFFSIZE", AREA_COLLECTIVES, "NCCL's buffer per channel", "4 MiB"),
    _V("NCCL_SOCKET_NTHREADS", AREA_COLLECTIVES, "CPU threads per socket connection", "auto"),
    _V("NCCL_NSOCKS_PERTHREAD", AREA_COLLECTIVES, "sockets per thread", "auto"),
    _V("NCCL_LAUNCH_MODE", AREA_COLLECTIVES, "PARALLEL or GROUP kernel launches", "PARALLEL"),
    _V("NCCL_CUMEM_ENABLE", AREA_MEMORY, "cuMem-based NCCL buffers", "auto"),
    _V("NCCL_BLOCKING_WAIT", AREA_COLLECTIVES, "the host blocks in every collective's wait (older name)", "off"),
    _V("NCCL_ASYNC_ERROR_HANDLING", AREA_COLLECTIVES, "how NCCL errors end the process (older name)", "on"),
    # --- Python and the C allocator ---
    _V("PYTHONMALLOC", AREA_MEMORY, "the interpreter's allocator (malloc, debug hooks)", "pymalloc",
       off_values=("pymalloc", "default")),
    _V("PYTHONDEVMODE", AREA_DEBUG, "the development mode (debug allocator hooks, more checks)", "off"),
    _V("PYTHONTRACEMALLOC", AREA_MEMORY, "traces every allocation (tracemalloc)", "off"),
    _V("PYTHONPROFILEIMPORTTIME", AREA_DEBUG, "times every import", "off"),
    _V("PYTHONVERBOSE", AREA_DEBUG, "prints a line for every module imported and every file tried (a worker "
       "process started per task pays it again)", "off"),
    _V("PYTHONASYNCIODEBUG", AREA_DEBUG, "asyncio's debug mode", "off"),
    _V("PYTHONWARNINGS", AREA_DEBUG, "the warnings filters (always: every warning is formatted and printed, each "
       "call)", "Python's default filters"),
    _V("PYTHONOPTIMIZE", AREA_DEBUG, "drops asserts (-O)", "off"),
    _V("PYTHONUNBUFFERED", AREA_IO, "stdout and stderr written through, unbuffered: a write(2) for each "
       "argument, separator and newline a print makes on a pipe or file", "block-buffered (line-buffered on a "
       "terminal)"),
    _V("PYTHONPYCACHEPREFIX", AREA_STARTUP, "the .pyc cache read from and written to this directory instead of "
       "each package's __pycache__ (an empty one: every module compiled from source at each start)",
       "__pycache__ beside each source"),
    _V("PYTHONDONTWRITEBYTECODE", AREA_STARTUP, "no .pyc written: a module without one is compiled from source at "
       "each start", "writes .pyc"),
    # --- HTTP proxies: urllib, requests, httpx and curl send a request through the proxy these name ---
    *(_V(name, AREA_NETWORK, "the proxy every HTTP request goes through, unless no_proxy names its host",
         "direct connections") for name in PROXY_VARS),
    *(_V(name, AREA_NETWORK, "the hosts HTTP requests reach directly, past the proxy (empty or unset: every host, "
         "a local service's too, goes through it)", "none") for name in ("no_proxy", "NO_PROXY")),
    _V("RES_OPTIONS", AREA_NETWORK, "the resolver's options (timeout:, attempts:, rotate, single-request): how "
       "long a host name lookup may wait and retry", "timeout 5 s, 2 attempts"),
    _V("LOCALDOMAIN", AREA_NETWORK, "the resolver's search domains: a short name is tried in each first", "the "
       "search line of /etc/resolv.conf"),
    # --- the certificate authorities TLS clients trust: the bundle every new SSL context reads and parses ---
    *(_V(name, AREA_NETWORK, "the CA bundle (or directory) a TLS client reads to verify servers: every new SSL "
         "context parses all of it", "the system's bundle") for name in CA_BUNDLE_VARS),
    _V("TQDM_MININTERVAL", AREA_DEBUG, "the least time between a tqdm bar's redraws", "0.1 s"),
    _V("TQDM_MINITERS", AREA_DEBUG, "the least iterations between a tqdm bar's redraws", "adapts to the rate"),
    # --- the C library's locale: how programs compare, sort and case-fold text ---
    _V("LC_ALL", AREA_IO, "the C library's locale for everything (a language or UTF-8 locale sorts and compares "
       "text through its collation tables: strcoll, where C compares bytes)", "LC_* and LANG, else C", ("C", "POSIX")),
    _V("LC_COLLATE", AREA_IO, "the C library's collation (sort, strcoll) when LC_ALL is unset", "LANG, else C",
       ("C", "POSIX")),
    _V("PYTHON_GIL", AREA_GIL, "the GIL on a free-threaded build", "the build's"),
    _V("PYTHONGIL", AREA_GIL, "the GIL on a free-threaded build (older name)", "the build's"),
    _V("MALLOC_ARENA_MAX", AREA_MEMORY, "glibc malloc's arenas (threads share fewer)", "8 per core"),
    _V("MALLOC_TRIM_THRESHOLD_", AREA_MEMORY, "when glibc returns memory to the OS", "128 KiB, dynamic"),
    _V("MALLOC_MMAP_THRESHOLD_", AREA_MEMORY, "allocations glibc serves with mmap", "128 KiB, dynamic"),
    _V("MALLOC_TOP_PAD_", AREA_MEMORY, "extra memory glibc asks the OS for at each heap growth", "128 KiB"),
    _V("MALLOC_MMAP_MAX_", AREA_MEMORY, "how many allocations glibc may serve with mmap at once", "65,536"),
    _V("MALLOC_PERTURB_", AREA_MEMORY, "glibc fills every allocated and freed block with a byte (a debugging aid: a "
       "memset per malloc and free)", "off", ("0",)),
    _V("MALLOC_CHECK_", AREA_MEMORY, "glibc's heap consistency checks on every call", "off"),
    _V("GLIBC_TUNABLES", AREA_MEMORY, "glibc's tunables (malloc's thresholds, arenas, caches; elision)", "none"),
    _V("LD_PRELOAD", AREA_MEMORY, "libraries loaded before all others (an allocator, a profiler, a sanitizer)",
       "none"),
    _V("MALLOC_CONF", AREA_MEMORY, "jemalloc's options (profiling, decay, arenas)", "jemalloc's defaults"),
)
ENV_BY_NAME: dict[str, EnvVar] = {v.name: v for v in ENV_VARS}
# PYTHONMALLOC's values that put the debug hooks on every allocation.
DEBUG_ALLOCATORS = frozenset({"debug", "malloc_debug", "pymalloc_debug"})

# A value shown as it is: a number, a word, a short list (``8``, ``PASSIVE``, ``expandable_segments:True``,
# ``0,1``). Anything longer or odder (a path, a URL, free text) reads ``<set>``: the name is the fact that matters.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:=+\-]{0,64}$")
SET_VALUE = "<set>"


def shown_env_value(name: str, value: str) -> str | None:
    """The value of a known variable as it may be shown, or None for a name outside the catalogue. A proxy's URL
    is shown only where it is on this machine (``http://127.0.0.1:3128``: scheme, loopback host and port, no
    credentials or path), so the connections to it can be told apart; any other reads ``<set>``."""
    if name not in ENV_BY_NAME:
        return None
    if name in PROXY_VARS:
        return loopback_proxy(value) or (SET_VALUE if value else "")
    return value if _SAFE_VALUE.match(value) else SET_VALUE


_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_PROXY_URL = re.compile(r"^(?:(?P<scheme>[a-z][a-z0-9+.-]{0,15})://)?(?:[^@/]*@)?(?P<host>\[[0-9a-f:]+\]|[^:/@\[\]]+)"
                        r"(?::(?P<port>\d{1,5}))?(?:/.*)?$", re.IGNORECASE)


def loopback_proxy(value: str) -> str | None:
    """``http://user:pw@127.0.0.1:3128/`` -> ``http://127.0.0.1:3128``; None for a proxy elsewhere or no URL."""
    m = _PROXY_URL.match(value.strip()[:512])
    if m is None:
        return None
    host = m.group("host").lower()
    if host not in _LOOPBACK_HOSTS and not re.fullmatch(r"127(\.\d{1,3}){3}", host):
        return None
    scheme = (m.group("scheme") or "http").lower()
    port = m.group("port") or {"https": "443"}.get(scheme, "80" if scheme == "http" else "1080")
    return f"{scheme}://{host}:{port}"


def known_env(environ: dict[str, str] | object) -> tuple[tuple[str, str], ...]:
    """(name, shown value) of every known variable set in ``environ``, in the catalogue's order."""
    if not isinstance(environ, dict):
        return ()
    out = []
    for var in ENV_VARS:
        value = environ.get(var.name)
        if isinstance(value, str):
            shown = shown_env_value(var.name, value)
            if shown is not None:
                out.append((var.name, shown))
    return tuple(out)


# The interpreter's command-line options that set what an environment variable of the catalogue sets: the variable,
# and its value (None: the option takes one, ``-X tracemalloc=25``; "1" where it has none).
_X_OPTIONS: dict[str, tuple[str, str | None]] = {
    "dev": ("PYTHONDEVMODE", "1"), "tracemalloc": ("PYTHONTRACEMALLOC", None),
    "importtime": ("PYTHONPROFILEIMPORTTIME", "1"), "pycache_prefix": ("PYTHONPYCACHEPREFIX", None),
    "gil": ("PYTHON_GIL", None),
}
_FLAG_OPTIONS = {"u": "PYTHONUNBUFFERED", "B": "PYTHONDONTWRITEBYTECODE", "O": "PYTHONOPTIMIZE",
                 "v": "PYTHONVERBOSE"}
MAX_INTERPRETER_ARGS = 32  # options looked at before the script


def interpreter_options(argv: tuple[str, ...] | list[str]) -> tuple[tuple[str, str, str], ...]:
    """The catalogue's variables a Python command line sets through the interpreter's own options, before the
    script, ``-m`` or ``-c``: (variable, value, the option as written): ``python -X dev -u train.py`` gives
    ("PYTHONDEVMODE", "1", "-X dev"), ("PYTHONUNBUFFERED", "1", "-u"). Repeated ``-O``/``-v`` count up; ``-W``
    gives PYTHONWARNINGS. Empty for a command that is not a Python interpreter's. Pure."""
    if not argv or not argv[0].rsplit("/", 1)[-1].startswith("python"):
        return ()
    out: dict[str, tuple[str, str]] = {}
    args = list(argv[1:MAX_INTERPRETER_ARGS])
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg in ("-", "--") or arg.startswith("--"):
            break  # the script (or stdin): what follows is the program's
        letters = arg[1:]
        if letters[:1] in ("c", "m"):
            break
        if letters[:1] in ("X", "W"):
            value = letters[1:] or (args[i + 1] if i + 1 < len(args) else "")
            i += 1 if letters[1:] else 2
            if letters[0] == "W":
                out["PYTHONWARNINGS"] = (value, f"-W {value}")
                continue
            name, _, given = value.partition("=")
            if name in _X_OPTIONS:
                var, fixed = _X_OPTIONS[name]
                out[var] = (fixed if fixed is not None else (given or "1"), f"-X {value}")
            continue
        for letter in letters:
            var = _FLAG_OPTIONS.get(letter)
            if var is None:
                continue
            if letter in ("O", "v") and var in out:  # -OO, -vv: each one more
                count = int(out[var][0]) + 1
                out[var] = (str(count), f"-{letter * count}")
            else:
                out[var] = ("1", f"-{letter}")
        i += 1
    return tuple((var, value, written) for var, (value, written) in out.items())


# --- the interpreter --------------------------------------------------------------------------------------------

DEFAULT_SWITCH_INTERVAL_S = 0.005  # sys.getswitchinterval() of every CPython since 3.2
DEFAULT_RECURSION_LIMIT = 1000
DEFAULT_DECIMAL_PREC = 28  # decimal.DefaultContext.prec of a fresh interpreter
# gc.get_threshold() of a fresh interpreter, by version (read off 3.11.7, 3.12.1, 3.13.0); other versions: unknown.
GC_THRESHOLDS: dict[tuple[int, int], tuple[int, int, int]] = {
    (3, 10): (700, 10, 10), (3, 11): (700, 10, 10), (3, 12): (700, 10, 10), (3, 13): (2000, 10, 10),
}


def gc_default_thresholds(version: tuple[int, int] | None = None) -> tuple[int, int, int] | None:
    """The collector's default thresholds for a Python version (this one when None); None when not known."""
    key = version if version is not None else (sys.version_info[0], sys.version_info[1])
    return GC_THRESHOLDS.get(key)


@dataclass(frozen=True, slots=True)
class Setting:
    """A process-wide setting the probe reads, with its default and what it can slow."""

    name: str  # the call that reads it, as a user would write it
    area: str
    effect: str
    default: str  # the default's text, compared with the reading's text


INTERPRETER_SETTINGS: tuple[Setting, ...] = (
    Setting("sys.getswitchinterval()", AREA_GIL,
            "how long a thread may hold the GIL before another that wants it gets it", f"{DEFAULT_SWITCH_INTERVAL_S}"),
    Setting("gc.isenabled()", AREA_COLLECTOR, "whether the cyclic collector runs on its own", "True"),
    Setting("gc.get_threshold()", AREA_COLLECTOR, "how many allocations start a collection, per generation",
            "(700, 10, 10)"),  # the probe compares with gc_default_thresholds() of the running version
    Setting("sys.getrecursionlimit()", AREA_DEBUG, "the deepest Python stack", f"{DEFAULT_RECURSION_LIMIT}"),
    Setting("sys.gettrace()/getprofile()", AREA_DEBUG, "a tracer or profiler called on every line or call "
            "(debuggers, coverage)", "None"),
    Setting("sys.flags.dev_mode", AREA_DEBUG, "the development mode (-X dev)", "False"),
    Setting("sys._xoptions", AREA_DEBUG, "-X options", "{}"),
)

# --- torch ------------------------------------------------------------------------------------------------------

TORCH_SETTINGS: tuple[Setting, ...] = (
    Setting("torch.get_num_threads()", AREA_THREADS, "threads of each intra-op parallel region", "one per core"),
    Setting("torch.get_num_interop_threads()", AREA_THREADS, "threads of the inter-op pool", "one per core"),
    Setting("torch.are_deterministic_algorithms_enabled()", AREA_NUMERICS,
            "deterministic kernels only (slower ones, errors on the rest)", "False"),
    Setting("torch.is_anomaly_enabled()", AREA_AUTOGRAD,
            "every autograd op records a stack trace and backward checks every output for NaN", "False"),
    Setting("torch.autograd.profiler enabled", AREA_AUTOGRAD, "every op is recorded by the profiler", "False"),
    Setting("torch.get_float32_matmul_precision()", AREA_NUMERICS, "TF32/bf16 in float32 matmuls", "highest"),
    Setting("torch.backends.cuda.matmul.allow_tf32", AREA_NUMERICS, "TF32 in float32 CUDA matmuls", "False"),
    Setting("torch.backends.cudnn.allow_tf32", AREA_NUMERICS, "TF32 in cuDNN convolutions", "True"),
    Setting("torch.backends.cudnn.benchmark", AREA_LAUNCHES, "benchmarks convolution algorithms per new shape",
            "False"),
    Setting("torch.backends.cudnn.deterministic", AREA_NUMERICS, "deterministic convolutions only", "False"),
    Setting("torch.backends.cudnn.enabled", AREA_LAUNCHES, "cuDNN kernels (off: torch's own, slower)", "True"),
    Setting("torch.backends.mkldnn.enabled", AREA_THREADS, "oneDNN CPU kernels (off: slower)", "True"),
    Setting("torch.backends.cuda.flash_sdp_enabled()", AREA_NUMERICS,
            "scaled_dot_product_attention's flash kernel (off: an unfused path, on the CPU too)", "True"),
    Setting("torch.backends.cuda.mem_efficient_sdp_enabled()", AREA_NUMERICS,
            "scaled_dot_product_attention's memory-efficient kernel", "True"),
    Setting("torch.cuda.get_sync_debug_mode()", AREA_LAUNCHES,
            "warns (1) or raises (2) at every synchronizing CUDA call", "0"),
    Setting("torch.get_default_dtype()", AREA_NUMERICS, "the dtype of new floating tensors", "torch.float32"),
)
SETTING_BY_NAME: dict[str, Setting] = {s.name: s for s in INTERPRETER_SETTINGS + TORCH_SETTINGS}
