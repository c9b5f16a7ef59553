"""What the code a thread's time goes to is known to do, and what decides it. Pure.

A stage verdict without a cause says where its threads' time goes: the program's own lines, and below them the C
functions doctor's native look saw. Some of that code only runs, or only costs, because of a setting the program or
its launcher chose: a tracemalloc traceback recorded per allocation, a trace function called per line, a warning
issued per call, a ufunc casting through 16-element buffers, a zlib stream at level 9, a TLS layer on a loopback
socket. The frames name the mechanism; this module says it, with the share of the thread's working samples that ran
there (the time the setting costs at most) and what decides it. Knowledge of the interpreter and of common
libraries, keyed on their own functions, never on a program's: a mechanism is said only where its code runs in at
least ``MIN_SHARE`` of the samples, so a look-alike (the same setting at a harmless value, a one-off at start-up)
stays unsaid.

Two catalogues: ``NATIVE`` (matched on a native frame's name, and where given its library) and ``PYTHON`` (matched
on a library Python frame's import path and function, ``json/encoder.py:_iterencode_dict``, from the ordinary
samples: no native look needed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dflash_contract.settings import CA_BUNDLE_VARS
from dflash_diag.analysis.native import is_waiting, library_name
from dflash_diag.model import NativeStack, ThreadSample, ThreadState
from dflash_diag.model.evidence import library_relative

MIN_SHARE = 0.10  # of the working samples: a mechanism's code said where it runs this much or more
SHOWN = 2
NOT_WORK = frozenset({ThreadState.QUEUE_PUT, ThreadState.QUEUE_GET, ThreadState.IDLE})


@dataclass(frozen=True, slots=True)
class Mechanism:
    """Code with a known cost: ``frames`` matches its functions (a native frame's name; a Python frame's
    ``path:function``), ``library`` the native frame's library or file where the name alone is too common. ``text``
    says what runs there and what decides it."""

    frames: re.Pattern[str]
    text: str
    library: re.Pattern[str] | None = None
    # The process-wide settings (the catalogue's names: environment variables, torch's flags) that put a program's
    # time into this code: set away from their defaults, the time there is theirs to answer for.
    settings: tuple[str, ...] = ()
    # The settings a program passes in its own code that decide it (``dflash_contract.code_knobs``: a keyword
    # argument such as sqlite3.connect's ``cached_statements``).
    arguments: tuple[str, ...] = ()
    # What to do where a setting puts the time here, when setting it back to its default is not the answer (the
    # default costs the same); "" for the usual advice.
    remedy: str = ""


def _m(frames: str, text: str, library: str = "", settings: tuple[str, ...] = (),
       arguments: tuple[str, ...] = (), remedy: str = "") -> Mechanism:
    """A catalogue entry: ``frames`` and ``library`` as patterns (``library`` only for native frames)."""
    return Mechanism(re.compile(frames), text, re.compile(library) if library else None, settings, arguments, remedy)


NATIVE: tuple[Mechanism, ...] = (
    _m(r"^(tracemalloc_\w+|traceback_new|traceback_get_frames)$",
       "tracemalloc records a traceback for every allocation (tracemalloc.start(), PYTHONTRACEMALLOC, -X tracemalloc)"),
    _m(r"^_PyMem_Debug\w+$",
       "Python's debug memory allocators fill and check every block (PYTHONMALLOC=debug, -X dev)"),
    _m(r"^(call_trace|call_trace_protected|maybe_call_line_trace|trace_trampoline|profile_trampoline|"
       r"call_trampoline|CTracer_\w+)$",
       "a trace or profile function runs on every call or line (sys.settrace, sys.setprofile, threading.settrace, "
       "a debugger, coverage)"),
    _m(r"^(ptrace_enter_call|ptrace_leave_call|profiler_callback|call_timer)$",
       "cProfile times every call (a profiler left enabled)", library=r"_lsprof|libpython"),
    _m(r"^(sys_audit_tstate|_PySys_Audit)$",
       "audit hooks run on every audited event: open, import, exec, socket calls (sys.addaudithook)"),
    _m(r"^(warn_explicit|do_warn|warn_unicode|get_filter|update_registry|call_show_warning|already_warned|"
       r"PyErr_WarnEx|PyErr_WarnFormat|PyErr_WarnExplicit\w*)$",
       "a warning is issued on every call: the warnings machinery runs its filters and registry each time (the "
       "'always' filter, or a message that differs each time, prints every one: warnings.simplefilter, -W, "
       "PYTHONWARNINGS)", settings=("PYTHONWARNINGS",)),
    _m(r"^(gc_collect_main|gc_collect_with_callback|gc_collect_generations|deduce_unreachable|subtract_refs|"
       r"move_unreachable|visit_reachable|visit_decref)$",
       "the cyclic garbage collector traverses the tracked objects (its thresholds decide how often: "
       "gc.set_threshold, gc.freeze)"),
    _m(r"^(signal_handler|trip_signal|_PyErr_CheckSignalsTstate|_PyEval_SignalReceived)$",
       "signals arrive and their Python handlers run (an interval timer such as setitimer, a sampling profiler's "
       "signal, a child's SIGCHLD)"),
    _m(r"^(npyiter_copy_to_buffers|npyiter_copy_from_buffers|npyiter_buffered_iternext|"
       r"npyiter_buffered_reduce_iternext\w*|npyiter_allocate_buffers)$",
       "NumPy runs ufuncs through its iterator's buffers, copying and casting the operands chunk by chunk (inputs "
       "of another dtype, unaligned or strided data; the chunk is the buffer size: np.setbufsize, 8192 elements by "
       "default)"),
    _m(r"^(PyUFunc_handlefperr|_error_handler|PyUFunc_GiveFloatingpointErrors)$",
       "NumPy handles a floating-point error on every ufunc call (np.seterr or np.errstate with 'warn', 'call', "
       "'log' or 'raise' while the data overflows, divides by zero or makes NaNs)"),
    _m(r"^(PyArray_EinsteinSum|\w+_sum_of_products_\w+)$",
       "NumPy's own einsum loops (c_einsum: each contraction evaluated as nested sums of products, not through BLAS; "
       "np.einsum runs them unless its optimize argument is on, and optimize=False is its default)",
       library=r"multiarray", arguments=("optimize",)),
    _m(r"^(mpd_q\w+|_mpd_\w+|fnt_\w+|std_fnt|six_step_fnt|four_step_fnt)$",
       "decimal arithmetic, whose cost grows with the context's precision (decimal.getcontext().prec, "
       "decimal.DefaultContext)"),
    _m(r"^(deflate_slow|longest_match)$",
       "zlib compresses at a slow level (deflate_slow: levels 4 to 9; gzip and GzipFile default to 9, zlib to 6)",
       arguments=("compresslevel",)),
    _m(r"^c10d::(ProcessGroupWrapper::runCollectiveChecks|\(anonymous namespace\)::CollectiveFingerPrint::\w+)$",
       "torch.distributed checks every collective against the other ranks with collectives of its own first (its "
       "process group wrapped for debugging)", settings=("TORCH_DISTRIBUTED_DEBUG",)),
    _m(r"^(sqlite3_prepare\w*|sqlite3Prepare\w*|sqlite3LockAndPrepare|sqlite3RunParser|sqlite3Parser|"
       r"pysqlite_statement_create)$",
       "SQLite compiles SQL statements (sqlite3_prepare): an execute whose statement is not in the connection's "
       "cache compiles it again (sqlite3.connect's cached_statements, 128 by default; SQL text that differs from "
       "call to call)", arguments=("cached_statements",)),
    _m(r"tokenizers6models3bpe\w*(10merge_word|9merge_all)",
       "tokenizers' BPE model merges a word's characters pair by pair (a word not in the model's cache: "
       "cache_capacity, 10,000 words by default)", library=r"tokenizers",
       arguments=("cache_capacity",)),
    _m(r"^(sqlite3BtreePayloadSize|sqlite3VdbeSerialGet|sqlite3BtreeNext|sqlite3VdbeRecordUnpack\w*|"
       r"sqlite3VdbeRecordCompare\w*|sqlite3BtreeMovetoUnpacked|sqlite3BtreeIndexMoveto|sqlite3BtreeTableMoveto)$",
       "SQLite reads rows one by one (a scan of a table or an index: a query or join on a column without an index, "
       "which SQLite indexes for the query itself unless PRAGMA automatic_index = OFF; or, with PRAGMA foreign_keys "
       "= ON, each change of a parent row looking up its children in a child table whose key column has no index)",
       library=r"sqlite", arguments=("PRAGMA foreign_keys", "PRAGMA automatic_index")),
    _m(r"^sqlite3VdbeExec$",
       "SQLite runs its statements' opcodes (sqlite3VdbeExec: every row a query or a foreign-key check visits, read "
       "and compared; more where the plan scans, as on a column without an index or with PRAGMA automatic_index = "
       "OFF)", library=r"sqlite", arguments=("PRAGMA foreign_keys", "PRAGMA automatic_index")),
    _m(r"^(_sre_SRE_Pattern_\w+|sre_ucs[124]_\w+|sre_search|sre_match|pattern_subx|pattern_new_match)$",
       "regular expressions matched by Python's re engine, with the GIL held (pydantic's regex_engine='python-re', "
       "or re called per value)", library=r"libpython|_sre",
       arguments=("regex_engine",)),
    _m(r"^ZSTD_compressBlock_(btultra2?|btopt|btlazy2)\w*$",
       "zstd compresses at a high level (its optimal parsers: levels 13 and up)"),
    _m(r"^(lzma_mf_bt\w+|lzma_lzma_optimum_\w+)$",
       "LZMA/xz compression (its match finder; preset 6 by default, 9 or extreme costs more)"),
    _m(r"^(BZ2_compressBlock|mainSort|fallbackSort|mainGtU)$", "bzip2 compression (level 9 by default)",
       arguments=("compresslevel",)),
    _m(r"^(gomp_barrier_wait_end|gomp_team_barrier_wait_end|gomp_barrier_wait|do_spin|__kmp_wait_\w+|"
       r"__kmp_hyper_barrier_\w+|__kmp_fork_barrier|__kmp_join_barrier|__kmp_yield)$",
       "OpenMP threads spin at barriers waiting for work (OMP_WAIT_POLICY, KMP_BLOCKTIME, GOMP_SPINCOUNT decide "
       "how long they spin before they sleep)", library=r"gomp|iomp|libomp|libtorch"),
    _m(r"(AnomalyMetadata|AnomalyMode)",
       "autograd's anomaly detection stores a Python stack for every op and checks every gradient "
       "(torch.autograd.set_detect_anomaly(True), torch.autograd.detect_anomaly)"),
    _m(r"(RecordFunction::(before|end)|profiler::impl::|KinetoThreadLocalState|ThreadLocalSubqueue|"
       r"pushProfilingCallbacks)",
       "torch's profiler records every op (torch.profiler.profile or record_function left on)"),
    _m(r"^(c10::Warning::warn|c10::warn|c10::WarningHandler::process|torch::PyWarningHandler\w*)$",
       "torch issues a warning inside an op on every call (TORCH_WARN; Python's warnings filters decide what "
       "prints)"),
    _m(r"(dgemm|dgemv|dsyrk|dtrsm|dgemm_kernel)",
       "double-precision (float64) matrix products: float64 tensors or arrays (torch.set_default_dtype("
       "torch.float64), float64 data from NumPy) run at half the float32 speed or less"),
    _m(r"^(mkl_serv_print_verbose\w*|mkl_serv_verbose\w*|mkl_verbose\w*)$",
       "MKL times and prints every call (MKL_VERBOSE)"),
    _m(r"(dnnl::impl::verbose\w*|verbose_printf|get_verbose)", "oneDNN prints every primitive it runs "
       "(ONEDNN_VERBOSE, DNNL_VERBOSE)", library=r"dnnl|libtorch_cpu"),
    _m(r"^(__strcoll_l|strcoll|__strxfrm_l|strxfrm|wcscoll|__wcscoll_l|wcsxfrm|__wcsxfrm_l)$",
       "locale-aware string comparison (strcoll, strxfrm: the LC_COLLATE locale's rules; the C locale compares "
       "bytes)", settings=("LC_ALL", "LC_COLLATE")),
    _m(r"^(SSL_read|SSL_write|SSL_read_ex|SSL_write_ex|ssl3_\w+|tls1_\w+|aesni_\w+|aes_gcm_\w+|"
       r"ChaCha20_\w+|Poly1305_\w+|EVP_(En|De)cryptUpdate)$",
       "TLS encrypts and authenticates every byte (an ssl-wrapped socket)"),
    _m(r"^(load_float|load_int|load_long|load_string|load_unicode|load_put|load_get|load_dict|load_list)$",
       "pickle's text opcodes (protocol 0: numbers as decimal text, strings escaped, memo keys as text)",
       library=r"_pickle"),
    _m(r".", "glibc's malloc debugging library checks every allocation (libc_malloc_debug.so preloaded for "
       "MALLOC_CHECK_ or mtrace)", library=r"^libc_malloc_debug"),
    _m(r"^(SSL_do_handshake|ossl_statem_connect|ossl_statem_accept|tls_construct_client_hello|"
       r"tls_process_server_certificate|tls_process_server_hello|ssl3_connect|ssl3_accept)$",
       "a TLS handshake per connection (a new connection per request: no keep-alive, no session reuse)"),
    _m(r"^(X509_STORE_load_\w+|X509_load_cert_crl_file\w*|X509_load_cert_file\w*|PEM_X509_INFO_read_bio\w*|"
       r"X509_STORE_add_cert|by_file_ctrl\w*|SSL_CTX_load_verify_\w+)$",
       "a CA bundle read and parsed for every new SSL context (a context made per request: ssl.create_default_context, "
       "requests or urllib without a shared session; SSL_CERT_FILE, REQUESTS_CA_BUNDLE name the bundle)",
       settings=CA_BUNDLE_VARS,
       remedy="Make one SSL context (one requests or httpx session) and reuse it for every request: the bundle is "
              "then parsed once; or name a bundle that holds only the authorities the program needs"),
    _m(r"^(getaddrinfo|gaih_inet\w*|__res_context_\w+|__libc_res_n\w+|send_dg|_nss_files_gethostbyname\w*|"
       r"_nss_dns_gethostbyname\w*|__nss_lookup\w*)$",
       "host names resolved for every connection (getaddrinfo: /etc/hosts, nsswitch.conf, DNS; RES_OPTIONS and "
       "/etc/gai.conf decide the order, timeouts and retries)", settings=("RES_OPTIONS", "LOCALDOMAIN")),
    _m(r"^(compute_cr_origin|_PyCoro_ComputeOrigin)$",
       "each coroutine created records the stack it was created from (coroutine origin tracking: "
       "sys.set_coroutine_origin_tracking_depth, asyncio's debug mode)",
       arguments=("set_coroutine_origin_tracking_depth",), settings=("PYTHONASYNCIODEBUG",)),
    _m(r"(c10::get_backtrace|c10::get_lazy_backtrace|c10::SymbolizedTracebacks|_Unwind_Backtrace|"
       r"backtrace_symbols\w*|^__GI___backtrace$|^backtrace$)",
       "C++ stack traces captured as torch errors and warnings are raised (TORCH_SHOW_CPP_STACKTRACES=1: each "
       "exception unwinds and symbolizes the stack; an error raised and caught per call makes it a cost)",
       settings=("TORCH_SHOW_CPP_STACKTRACES",)),
)


PYTHON: tuple[Mechanism, ...] = (
    _m(r"^torch/_tensor_str\.py:", "tensors formatted as text (printing or str() of a tensor; "
       "torch.set_printoptions decides how much is formatted)"),
    _m(r"^numpy/(_?core)/arrayprint\.py:", "NumPy arrays formatted as text (np.set_printoptions decides how much: "
       "threshold, precision)"),
    _m(r"^(inspect\.py:(stack|getframeinfo|getouterframes|findsource|getsourcefile|getmodule|getfile)|linecache\.py:)",
       "Python stacks collected with their source lines per call (inspect.stack, inspect.getframeinfo: source "
       "files searched)"),
    _m(r"^traceback\.py:(extract_stack|format_stack|walk_stack|StackSummary\.\w+|format_list|FrameSummary\.\w+)",
       "Python stacks formatted per call (traceback.extract_stack, format_stack; logging's stack_info=True)"),
    _m(r"^warnings\.py:(_showwarnmsg\w*|_formatwarnmsg\w*|formatwarning|WarningMessage\.\w+|_showwarning)",
       "warnings printed (the 'always' filter, or a message that differs each time, shows every one: "
       "warnings.simplefilter, -W, PYTHONWARNINGS)", settings=("PYTHONWARNINGS",)),
    _m(r"^logging/__init__\.py:(Handler\.handle|StreamHandler\.(emit|flush)|FileHandler\.emit|Formatter\.format\w*|"
       r"LogRecord\.__init__|Logger\.findCaller|Logger\.callHandlers)",
       "log records formatted and written (the logger's level lets them through: logging.basicConfig(level=...), "
       "setLevel; a handler that flushes every record)"),
    _m(r"^(tracemalloc\.py:)", "tracemalloc snapshots and statistics (tracemalloc.take_snapshot)"),
    _m(r"^(bdb\.py:|pdb\.py:|_pydevd_bundle/|pydevd\.py:|_pydevd_|debugpy/)",
       "a debugger's trace function checks breakpoints on every line (pdb, pydevd: an IDE's debugger)"),
    _m(r"^coverage/", "coverage measurement traces every line (coverage run, pytest-cov)"),
    _m(r"^profile\.py:", "the pure-Python profiler (the profile module) runs on every call"),
    _m(r"^(re/_compiler\.py:|re/_parser\.py:|sre_compile\.py:|sre_parse\.py:)",
       "regular expressions compiled again and again (re's cache keeps 512 patterns: patterns built per call, or "
       "more of them in rotation, or re.purge)"),
    _m(r"^json/encoder\.py:_(make_)?iterencode",
       "JSON encoded by the pure-Python encoder, not the C one (an indent, or json.dump to a file: only json.dumps "
       "without indent runs the C encoder)", arguments=("indent",)),
    _m(r"^pickle\.py:(_Pickler|_Unpickler|_dump|_load|_loads|_dumps)",
       "pickle's pure-Python implementation, not the C _pickle (pickle._Pickler/_Unpickler or a subclass of them)"),
    _m(r"^google/protobuf/internal/(python_message|decoder|encoder|containers|type_checkers|well_known_types)\.py:",
       "protobuf's pure-Python runtime, not its C one (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python, or the "
       "upb/cpp extension missing)", settings=("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION",)),
    _m(r"^torch/_weights_only_unpickler\.py:",
       "torch.load's restricted unpickler, written in Python (weights_only=True, the default since torch 2.6; "
       "TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 forces it even where a caller passed weights_only=False)",
       settings=("TORCH_FORCE_WEIGHTS_ONLY_LOAD",)),
    _m(r"^_pydecimal\.py:", "the pure-Python decimal module (_pydecimal), not the C _decimal"),
    _m(r"^_strptime\.py:", "time parsed by the pure-Python _strptime (datetime.strptime, time.strptime: a regular "
       "expression and a locale check per call)"),
    _m(r"^(importlib/_bootstrap\w*\.py:|<frozen importlib\._bootstrap\w*>:)",
       "imports run on the hot path (a module searched for again: removed from sys.modules, importlib.reload, "
       "invalidate_caches, or a path search per call)"),
    _m(r"^random\.py:SystemRandom\.", "random numbers from the kernel (random.SystemRandom or the secrets module: "
       "a getrandom system call per draw)"),
    _m(r"^tqdm/", "a tqdm progress bar updating (mininterval and miniters decide how often it redraws: "
       "TQDM_MININTERVAL, TQDM_MINITERS)", settings=("TQDM_MININTERVAL", "TQDM_MINITERS")),
    _m(r"^copy\.py:(deepcopy|_deepcopy_\w+|_reconstruct)",
       "objects deep-copied per call (copy.deepcopy of a batch, a config or a model each step)"),
    _m(r"^dataclasses\.py:(asdict|_asdict_inner|astuple|_astuple_inner)",
       "dataclasses converted with asdict/astuple, which deep-copy every field recursively"),
    _m(r"^ssl\.py:(create_default_context|SSLContext\.load_verify_locations|SSLContext\.load_default_certs|"
       r"_create_unverified_context|SSLSocket\.do_handshake|SSLObject\.do_handshake)",
       "an SSL context or handshake per request (ssl.create_default_context reads the CA bundle each time: a "
       "client or session made per call, no keep-alive)"),
    _m(r"^socket\.py:(getaddrinfo|create_connection)",
       "a connection opened, its host resolved, per request (socket.create_connection, getaddrinfo: no "
       "keep-alive or pooled session)"),
    _m(r"^yaml/(scanner|parser|reader|composer|constructor|resolver|emitter|serializer|representer)\.py:",
       "YAML handled by PyYAML's pure-Python code (yaml.load or safe_load with the Python Loader, not the C "
       "LibYAML one: yaml.CSafeLoader, CLoader)"),
    _m(r"^(torch/overrides\.py:(handle_torch_function|_get_overloaded_args)|torch/_tensor\.py:Tensor\.__torch_function__)",
       "a __torch_function__ override runs in Python on every op (a Tensor subclass, a TorchFunctionMode)"),
    _m(r"^torch/utils/_python_dispatch\.py:",
       "a TorchDispatchMode intercepts every op in Python (a FlopCounterMode, a debug or logging mode left on)"),
    _m(r"^torch/nn/utils/parametrize\.py:",
       "a parametrization recomputes the weight at every access (weight_norm, orthogonal, a custom one through "
       "torch.nn.utils.parametrize; parametrize.cached() computes it once per forward)"),
    _m(r"^torch/nn/utils/spectral_norm\.py:",
       "spectral_norm's power iteration runs at every forward (its n_power_iterations)"),
    _m(r"^pandas/io/parsers/python_parser\.py:",
       "pandas parses CSV with its Python engine (engine='python', or an option only it supports: a regular "
       "expression or multi-character sep, skipfooter)", arguments=("engine",)),
    _m(r"^pydantic/(main\.py:BaseModel\.(__init__|model_validate\w*|model_construct)|_internal/_model_construction\.py:)",
       "pydantic validates models as they are built (each field, and with revalidate_instances='always' every model "
       "instance passed in again, copied)", arguments=("revalidate_instances",)),
    _m(r"^transformers/tokenization_utils\.py:",
       "text tokenized by a Python ('slow') tokenizer of transformers, not the Rust tokenizers library "
       "(use_fast=False, or a model without a fast tokenizer)", arguments=("use_fast",)),
    _m(r"^numpy/lib/(_npyio_impl|npyio)\.py:genfromtxt",
       "text parsed line by line in Python by numpy.genfromtxt (numpy.loadtxt parses in C)"),
    _m(r"^asyncio/(format_helpers\.py:|coroutines\.py:|base_events\.py:BaseEventLoop\._check_\w+)",
       "asyncio's debug mode records a stack for every callback and task and checks each call's thread "
       "(PYTHONASYNCIODEBUG, loop.set_debug(True), -X dev)", settings=("PYTHONASYNCIODEBUG",)),
)


# Matched on the text of the line a sample's innermost Python frame is on (as the file on disk has it): work the
# interpreter does on the line itself, before any frame of a callee exists. Said only for a setting that decides it
# (``setting-slows-code``): the same lines cost something at any setting.
LINES: tuple[Mechanism, ...] = (
    _m(r"\bawait\s+[\w.]+(\[[^\]]*\])?\(",
       "coroutines created and awaited on the program's lines (the time on an `await f(...)` line itself: creating "
       "the coroutine, which with origin tracking on walks and records the creating stack, then sending into it)",
       arguments=("set_coroutine_origin_tracking_depth",)),
)


@dataclass(frozen=True, slots=True)
class Seen:
    mechanism: Mechanism
    share: float  # of the working samples
    where: str  # the commonest matching frame ("warn_explicit", "json/encoder.py:_iterencode_dict")

    def __str__(self) -> str:
        return f"{self.mechanism.text}: {100.0 * self.share:.0f}% of its working samples in `{self.where}`"


def native_mechanisms(stacks: Iterable[NativeStack], shown: int | None = SHOWN) -> tuple[Seen, ...]:
    """The catalogued mechanisms the stacks' working samples run in (``MIN_SHARE`` or more), largest first: the
    first ``shown`` (None: all)."""
    working = [s for s in stacks if not is_waiting(s.frames)]  # a barrier's spin works; its futex sleep waits
    total = sum(s.count for s in working)
    if not total:
        return ()
    found: list[Seen] = []
    for mechanism in NATIVE:
        hits: dict[str, int] = {}
        for stack in working:
            # the outermost matching frame: the entry into the mechanism's code (tracemalloc_alloc, not the helper
            # it calls)
            name = next((f.name for f in reversed(stack.frames)
                         if f.native and _native_match(mechanism, f.name, f.filename)), None)
            if name is not None:
                hits[name] = hits.get(name, 0) + stack.count
        _collect(found, mechanism, hits, total)
    return _largest(found, shown)


def _native_match(mechanism: Mechanism, name: str, filename: str) -> bool:
    if mechanism.library is not None and not mechanism.library.search(library_name(filename)):
        return False
    return bool(mechanism.frames.search(name))


def python_mechanisms(rows: Sequence[tuple[ThreadSample, ThreadState]], shown: int | None = SHOWN
                      ) -> tuple[Seen, ...]:
    """The catalogued mechanisms the rows' working samples run in, by their library Python frames (the first
    ``shown``; None: all)."""
    working = [t for t, state in rows if state not in NOT_WORK]
    if not working:
        return ()
    keyed = [[k for f in t.frames if not f.native and (k := _python_key(f.filename, f.name))] for t in working]
    found: list[Seen] = []
    for mechanism in PYTHON:
        hits: dict[str, int] = {}
        for keys in keyed:
            key = next((k for k in reversed(keys) if mechanism.frames.search(k)), None)  # the entry, outermost
            if key is not None:
                hits[key] = hits.get(key, 0) + 1
        _collect(found, mechanism, hits, len(working))
    return _largest(found, shown)


def line_mechanisms(rows: Sequence[tuple[ThreadSample, ThreadState]],
                    line_text: Callable[[str, int], str | None]) -> tuple[Seen, ...]:
    """The ``LINES`` mechanisms the rows' working samples run in, by the text of their innermost Python frame's
    line (``line_text``: the line as the file on disk has it; None where unknown)."""
    working = [t for t, state in rows if state not in NOT_WORK]
    if not working:
        return ()
    found: list[Seen] = []
    for mechanism in LINES:
        hits: dict[str, int] = {}
        for sample in working:
            leaf = next((f for f in sample.frames if not f.native), None)
            text = line_text(leaf.filename, leaf.line) if leaf is not None else None
            if leaf is not None and text and mechanism.frames.search(text):
                where = f"{leaf.name} ({leaf.filename.rsplit('/', 1)[-1]}:{leaf.line})"
                hits[where] = hits.get(where, 0) + 1
        _collect(found, mechanism, hits, len(working))
    return _largest(found, None)


def _python_key(filename: str, function: str) -> str:
    """``json/encoder.py:_iterencode_dict`` for a library frame; "" for the program's own code."""
    if filename.startswith("<frozen "):
        return f"{filename}:{function}"
    rel = library_relative(filename)
    return f"{rel}:{function}" if rel is not None else ""


def _collect(found: list[Seen], mechanism: Mechanism, hits: dict[str, int], total: int) -> None:
    share = sum(hits.values()) / total
    if share >= MIN_SHARE:
        found.append(Seen(mechanism, share, max(hits, key=lambda k: hits[k])))


def _largest(found: list[Seen], shown: int | None) -> tuple[Seen, ...]:
    return tuple(sorted(found, key=lambda s: -s.share)[:shown])


def mechanisms_text(seen: Sequence[Seen]) -> str:
    """"; known there: <mechanism>: 23% of its working samples in `warn_explicit`" or ""."""
    return "".join(f"; known there: {s}" for s in seen)
