"""The board's names: the probes, their statuses, and every payload key, as constants (docs/board.md).

A key is spelled once, here: the probes write ``QueueKeys.DEPTH`` and every reader (analysis, the screens, the
bundle, the trace, the Prometheus and wandb series) reads ``QueueKeys.DEPTH``. tests/contract/test_board_contract.py
scans every module for a key spelled as a literal, so a renamed key cannot silently empty a reader.
"""

from __future__ import annotations

from typing import Final

# The probes, in the order docs and help list them (the package, `run --probes` and the readers use this).
PROBE_NAMES: Final[tuple[str, ...]] = (
    "gil", "allocator", "compile", "cudagraphs", "queues", "checkpoint", "fastpath", "codedrift", "threads", "health",
    "collectives", "syncs", "mailbox", "settings",
)  # == the ProbeName constants below (checked by tests/contract/test_board_contract.py)
STATUS_OK: Final = "ok"
STATUS_NA: Final = "na"
STATUS_ERROR: Final = "error"
PROBE_STATUSES: Final = frozenset({STATUS_OK, STATUS_NA, STATUS_ERROR})


def parse_probe_list(text: str) -> frozenset[str]:
    """The probes a ``--probes LIST`` selects: ``all``, ``none`` (or nothing), or a comma list read left to right
    (``gil,queues``; ``all,-gil`` drops one). One grammar for ``dflash-diag run --probes``, ``attach --probes``,
    ``$DFLASH_DIAG_PROBES`` and the reference trainer; ValueError naming the unknown probe and the known ones."""
    names: set[str] = set()
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item or item == "none":
            continue
        if item == "all":
            names.update(PROBE_NAMES)
            continue
        drop = item.startswith("-")
        name = item[1:] if drop else item
        if name not in PROBE_NAMES:
            raise ValueError(f"unknown probe {name!r} (known: all, none, {', '.join(PROBE_NAMES)})")
        if drop:
            names.discard(name)
        else:
            names.add(name)
    return frozenset(names)


# --- payload keys: the names the probes write and analysis, the screens and the bundle read -------------------
# (docs/board.md describes each). Constants, so a key is spelled once: a reader that names a key the writer
# does not write fails the contract test instead of reading None forever.


class ProbeName:
    """The probes' names (the keys of the board's ``probes`` section)."""

    GIL: Final = "gil"
    ALLOCATOR: Final = "allocator"
    QUEUES: Final = "queues"
    CHECKPOINT: Final = "checkpoint"
    COMPILE: Final = "compile"
    CUDAGRAPHS: Final = "cudagraphs"
    FASTPATH: Final = "fastpath"
    CODEDRIFT: Final = "codedrift"
    THREADS: Final = "threads"
    HEALTH: Final = "health"
    COLLECTIVES: Final = "collectives"
    SYNCS: Final = "syncs"
    MAILBOX: Final = "mailbox"
    SETTINGS: Final = "settings"


class PayloadKeys:
    """Keys every probe payload may carry."""

    STATUS: Final = "status"  # ok | na | error
    REASON: Final = "reason"  # with na and error
    ERRORS: Final = "errors"  # with error: how many snapshots failed
    HOOK_ERRORS: Final = "hook_errors"  # failures caught inside the program's calls
    LAST_HOOK_ERROR: Final = "last_hook_error"


class GilKeys:
    """Keys of the ``gil`` payload (and of its nested rows)."""

    CONTENTION_SHARE: Final = "contention_share"
    CPU_SHARE: Final = "cpu_share"
    # Running totals since the probe started, so a reader can judge the interval between two boards (its own window):
    # the probe's clock, the knocks made, their summed lateness; a thread's on-CPU and run-queue ns (schedstat).
    CLOCK_S: Final = "clock_s"
    KNOCKS_TOTAL: Final = "knocks_total"
    LATE_TOTAL_S: Final = "late_total_s"
    RUN_NS: Final = "run_ns"
    RUNQ_NS: Final = "runq_ns"
    FREE_THREADED: Final = "free_threaded"
    KNOCK_INTERVAL_S: Final = "knock_interval_s"
    KNOCKER_RUNQ_SHARE: Final = "knocker_runq_share"
    RUNQ_SHARE: Final = "runq_share"
    SAMPLES: Final = "samples"
    SWITCH_INTERVAL_S: Final = "switch_interval_s"
    THREADS: Final = "threads"
    TID: Final = "tid"
    TIMER_SLACK_MS: Final = "timer_slack_ms"
    WAIT_MAX_MS: Final = "wait_max_ms"
    WAIT_MEAN_MS: Final = "wait_mean_ms"
    WAIT_P99_MS: Final = "wait_p99_ms"
    WINDOW_S: Final = "window_s"


class AllocatorKeys:
    """Keys of the ``allocator`` payload (and of its nested rows)."""

    ALLOC_RETRIES: Final = "alloc_retries"
    ALLOC_RETRIES_PER_S: Final = "alloc_retries_per_s"
    ALLOCATED_BYTES: Final = "allocated_bytes"
    ALLOCATED_BYTES_PER_S: Final = "allocated_bytes_per_s"  # bytes handed out per second (cumulative allocated)
    # vocabulary projections seen in the last discovery window (probes/_vocab.py), and their rows' keys
    VOCAB_PROJECTIONS: Final = "vocab_projections"
    SITE: Final = "site"  # "dir/file.py:line" of the program's call
    THREAD: Final = "thread"
    CALLS: Final = "calls"  # in the discovery window
    SHAPE: Final = "shape"  # the output's
    OUTPUT_BYTES: Final = "output_bytes"  # one call's output
    GRAD: Final = "grad"  # autograd recorded it (grad mode on)
    ALLOCATED_PEAK_BYTES: Final = "allocated_peak_bytes"
    ALLOCATED_SWING_BYTES: Final = "allocated_swing_bytes"
    ALLOCATIONS_PER_S: Final = "allocations_per_s"
    DEVICE_ALLOC_PER_S: Final = "device_alloc_per_s"
    DEVICE_FREE_PER_S: Final = "device_free_per_s"
    DEVICES: Final = "devices"
    EMPTY_CACHE_CALLS: Final = "empty_cache_calls"
    FRAGMENTATION_SHARE: Final = "fragmentation_share"
    INACTIVE_SPLIT_BYTES: Final = "inactive_split_bytes"
    INACTIVE_SPLITS: Final = "inactive_splits"  # blocks split and left inactive (fragments)
    NUM_DEVICE_ALLOC: Final = "num_device_alloc"
    NUM_DEVICE_FREE: Final = "num_device_free"
    NUM_SYNC_ALL_STREAMS: Final = "num_sync_all_streams"
    OOM_REJECTIONS: Final = "oom_rejections"
    OOMS: Final = "ooms"
    REQUESTED_BYTES: Final = "requested_bytes"  # what the program asked for, before the allocator's rounding
    RESERVED_BYTES: Final = "reserved_bytes"
    RESERVED_PEAK_BYTES: Final = "reserved_peak_bytes"
    RESERVED_SWING_BYTES: Final = "reserved_swing_bytes"
    SYNC_ALL_STREAMS_PER_S: Final = "sync_all_streams_per_s"
    WINDOW_S: Final = "window_s"
    TOTAL_BYTES: Final = "total_bytes"  # the device's memory (None: not read)
    # what this process may use of it: the device's memory times torch.cuda.set_per_process_memory_fraction's
    # fraction (the total when the program set none; None: not read)
    LIMIT_BYTES: Final = "limit_bytes"


class SyncKeys:
    """Keys of the ``syncs`` payload (host<->device syncs counted per line) and of its line rows."""

    TOTAL: Final = "total"  # syncs counted since the probe armed
    PER_S: Final = "per_s"  # since the previous snapshot (None at the first)
    TOP_LINES: Final = "top_lines"  # the lines with the most syncs, most first
    SITE: Final = "site"  # "dir/file.py:line"
    THREAD: Final = "thread"
    COUNT: Final = "count"


class QueueKeys:
    """Keys of the ``queues`` payload (and of its nested rows)."""

    CONSUMERS: Final = "consumers"
    DEPTH: Final = "depth"
    DEPTH_HISTORY: Final = "depth_history"
    DEPTH_MEAN: Final = "depth_mean"
    GET_BLOCKED_S: Final = "get_blocked_s"
    GET_BLOCKED_SHARE: Final = "get_blocked_share"
    GET_WAITING: Final = "get_waiting"
    GETS_PER_S: Final = "gets_per_s"
    INSTRUMENTED: Final = "instrumented"
    MAXSIZE: Final = "maxsize"
    PRODUCERS: Final = "producers"
    PUT_BLOCKED_S: Final = "put_blocked_s"
    PUT_BLOCKED_SHARE: Final = "put_blocked_share"
    PUT_WAITING: Final = "put_waiting"
    PUTS_PER_S: Final = "puts_per_s"
    WINDOW_S: Final = "window_s"


class CheckpointKeys:
    """Keys of the ``checkpoint`` payload (and of its nested rows)."""

    ARMED: Final = "armed"
    CALLS: Final = "calls"
    CHECKED_BACKWARD_STEPS: Final = "checked_backward_steps"
    GRAD_NONE_COUNT: Final = "grad_none_count"
    GRAD_NONE_PARAMS: Final = "grad_none_params"
    MIXED_MODES: Final = "mixed_modes"
    NON_REENTRANT: Final = "non_reentrant"
    OPTIMIZER_HOOK: Final = "optimizer_hook"
    REENTRANT: Final = "reentrant"
    SITE: Final = "site"
    SITES: Final = "sites"
    TRAINABLE_PARAMS: Final = "trainable_params"
    USE_REENTRANT: Final = "use_reentrant"
    WATCHED_MODELS: Final = "watched_models"


class HealthKeys:
    """Keys of the ``health`` payload (training health, read at optimizer steps) and of its group rows."""

    ARMED: Final = "armed"
    STEPS: Final = "steps"  # optimizer steps seen (every one counts; a few are sampled)
    SAMPLES: Final = "samples"  # steps that were sampled
    AMP_SKIPPED: Final = "amp_skipped"  # sampled steps a GradScaler skipped inside a fused optimizer
    LAST_SAMPLE_STEP: Final = "last_sample_step"
    GROUPS: Final = "groups"
    GROUP: Final = "group"  # "<optimizer>#<index>"
    # The step this group's reading was taken at, and every other *_STEP of a group row: counted in the steps of the
    # group's own optimizer (STEPS counts every optimizer's)
    SAMPLED_STEP: Final = "sampled_step"
    TENSORS: Final = "tensors"  # trainable tensors (requires_grad) the group holds
    FROZEN: Final = "frozen"  # tensors the group holds that do not require grad
    FROZEN_SINCE_STEP: Final = "frozen_since_step"  # the group holds only frozen tensors since this step
    LR: Final = "lr"
    GRAD_NONE: Final = "grad_none"  # tensors whose .grad is None at the step
    GRAD_ZERO: Final = "grad_zero"  # tensors whose gradient is all zero
    GRAD_NONFINITE: Final = "grad_nonfinite"
    UPDATE_RATIO: Final = "update_ratio"  # |dw| / |w| of watched slices since the previous sample; None: first
    UNCHANGED_SINCE_STEP: Final = "unchanged_since_step"  # every watched tensor identical since this step
    WATCHED_TENSORS: Final = "watched_tensors"  # tensors whose weights are compared between samples
    WATCHED_NUMEL: Final = "watched_numel"
    STUCK_TENSORS: Final = "stuck_tensors"  # watched tensors that do not train (for MIN_STEPS steps or more)
    STUCK_NUMEL: Final = "stuck_numel"
    STUCK_SINCE_STEP: Final = "stuck_since_step"
    STUCK_GRAD_NONE: Final = "stuck_grad_none"  # of the stuck: .grad None at the sample
    STUCK_GRAD_ZERO: Final = "stuck_grad_zero"  # of the stuck: an all-zero gradient at the sample
    # of the stuck without a gradient: how many the last loss's autograd graph reaches (None: not known)
    STUCK_NONE_IN_GRAPH: Final = "stuck_none_in_graph"
    STUCK_EXAMPLES: Final = "stuck_examples"  # a few of their names (or index and shape)
    LR_ZERO_SINCE_STEP: Final = "lr_zero_since_step"
    LOSS: Final = "loss"  # the value handed to backward() at the last sample (None: none seen)
    LOSS_NONFINITE_SINCE_STEP: Final = "loss_nonfinite_since_step"
    LOSS_NONFINITE_SINCE_WALL_S: Final = "loss_nonfinite_since_wall_s"
    GRAD_NONFINITE_SINCE_STEP: Final = "grad_nonfinite_since_step"
    SAMPLE_MS_MEAN: Final = "sample_ms_mean"  # what one sample costs the step it runs in (one device sync)
    BACKWARDS: Final = "backwards"  # backward() calls seen
    # backward() runs and no optimizer has stepped for 1 s or more, three times its longest gap between steps (None
    # otherwise): what the looks at the tensors the loss depends on found
    NO_STEP: Final = "no_step"
    NO_STEP_SINCE_WALL_S: Final = "since_wall_s"
    NO_STEP_SECONDS: Final = "seconds"
    NO_STEP_BACKWARDS: Final = "backwards"
    NO_STEP_TENSORS: Final = "tensors"  # the tensors the loss accumulates gradients into (watched)
    NO_STEP_UNCHANGED: Final = "unchanged"  # of them, unchanged since the previous look
    NO_STEP_CLEARED: Final = "cleared"  # their gradients were None or zero at every look (cleared each iteration)
    NO_STEP_LOSS: Final = "loss"  # the loss at the last look (a non-finite one by its name)
    NO_STEP_LONGEST_GAP_S: Final = "longest_gap_s"  # the longest gap between two optimizer steps before (0: none)
    INTERVAL_S: Final = "interval_s"


# The compile payload's ``by_thread`` entry for compiles from before the probe could tell their thread (a value,
# not a key: the thread names are the program's).
UNKNOWN_COMPILE_THREAD: Final = "?"


class CompileKeys:
    """Keys of the ``compile`` payload (and of its nested rows)."""

    BY_FUNCTION: Final = "by_function"
    BY_THREAD: Final = "by_thread"
    COMPILE_TIME_S: Final = "compile_time_s"
    COMPILES: Final = "compiles"
    COMPILING_NOW: Final = "compiling_now"
    DYNAMO_LOADED: Final = "dynamo_loaded"
    FAILED_COMPILES: Final = "failed_compiles"
    FALLBACK: Final = "fallback"
    FILE: Final = "file"
    FUNCTION: Final = "function"
    GRAPH_BREAK_REASONS: Final = "graph_break_reasons"
    GRAPH_BREAKS: Final = "graph_breaks"
    LAST_REASON: Final = "last_reason"
    LIMIT: Final = "limit"
    LIMIT_HITS: Final = "limit_hits"
    LIMIT_TYPE: Final = "limit_type"
    POLLED_AT_S: Final = "polled_at_s"
    RECENT_GRAPH_BREAKS: Final = "recent_graph_breaks"
    RECENT_RECOMPILES: Final = "recent_recompiles"
    RECOMPILE_LIMIT: Final = "recompile_limit"
    RECOMPILE_LIMIT_HITS: Final = "recompile_limit_hits"
    RECOMPILES: Final = "recompiles"
    SITE: Final = "site"
    THREAD: Final = "thread"
    WALL_TIME_S: Final = "wall_time_s"


class CudagraphsKeys:
    """Keys of the ``cudagraphs`` payload (and of its nested rows)."""

    CAPTURE_THREADS: Final = "capture_threads"
    CAPTURES: Final = "captures"
    CAPTURES_BY_THREAD: Final = "captures_by_thread"
    CUDA_AVAILABLE: Final = "cuda_available"
    MULTI_THREAD_HAZARD: Final = "multi_thread_hazard"
    PARTITION_MESSAGES: Final = "partition_messages"
    PARTITIONS: Final = "partitions"
    RECORDED_NON_STATIC_INPUTS: Final = "recorded_non_static_inputs"
    REPLAYS: Final = "replays"
    REPLAYS_BY_THREAD: Final = "replays_by_thread"
    RERECORDS: Final = "rerecords"
    SKIP_REASONS: Final = "skip_reasons"
    SKIPS: Final = "skips"
    TORCH: Final = "torch"


class FastpathKeys:
    """Keys of the ``fastpath`` payload (and of its nested rows)."""

    CAUSAL_CONV1D_IMPORTABLE: Final = "causal_conv1d_importable"
    CAUSAL_CONV1D_IMPORTED: Final = "causal_conv1d_imported"
    CAUSAL_CONV1D_VERSION: Final = "causal_conv1d_version"
    CUDA_AVAILABLE: Final = "cuda_available"
    FALLBACK: Final = "fallback"
    FALLBACK_WARNINGS: Final = "fallback_warnings"
    FAST_PATH_AVAILABLE: Final = "fast_path_available"
    FLA_IMPORTABLE: Final = "fla_importable"
    FLA_IMPORTED: Final = "fla_imported"
    FLA_VERSION: Final = "fla_version"
    FLEX_ATTENTION: Final = "flex_attention"
    GDN_FAST_PATH: Final = "gdn_fast_path"
    GDN_KERNELS: Final = "gdn_kernels"
    GDN_REASON: Final = "gdn_reason"
    TRITON_VERSION: Final = "triton_version"


class ThreadsKeys:
    """Keys of the ``threads`` payload (and of its nested rows)."""

    ALIVE: Final = "alive"
    DEATHS: Final = "deaths"
    DEATHS_TOTAL: Final = "deaths_total"
    EXCEPTION: Final = "exception"
    GONE: Final = "gone"
    LAST_SEEN_WALL_S: Final = "last_seen_wall_s"
    NATIVE_ID: Final = "native_id"
    THREAD: Final = "thread"
    WALL_TIME_S: Final = "wall_time_s"
    WHERE: Final = "where"


class CollectivesKeys:
    """Keys of the ``collectives`` payload: this rank's torch.distributed collective calls, in sequence."""

    ARMED: Final = "armed"
    BACKEND: Final = "backend"
    RANK: Final = "rank"
    WORLD_SIZE: Final = "world_size"
    ENTERED: Final = "entered"  # collective calls entered (the sequence number of the newest)
    COMPLETED: Final = "completed"  # ... returned from (an async call returns when issued)
    ASYNC_ISSUED: Final = "async_issued"  # calls made with async_op=True (they complete in a work handle)
    CURRENT: Final = "current"  # the calls threads are in now: rows of SEQ, OP, THREAD, SINCE_WALL_S
    LAST: Final = "last"  # the newest call returned from: SEQ, OP, DURATION_MS, ENDED_WALL_S
    SEQ: Final = "seq"
    OP: Final = "op"
    THREAD: Final = "thread"
    SINCE_WALL_S: Final = "since_wall_s"
    DURATION_MS: Final = "duration_ms"
    ENDED_WALL_S: Final = "ended_wall_s"
    BY_OP: Final = "by_op"  # op -> {COUNT, TOTAL_MS}
    COUNT: Final = "count"
    TOTAL_MS: Final = "total_ms"
    IN_COLLECTIVES_S: Final = "in_collectives_s"  # wall time inside (synchronous) collective calls since armed
    RECENT: Final = "recent"  # the newest calls, oldest first: SEQ, OP, DURATION_MS
    FROM_START: Final = "from_start"  # armed before the process group existed: SEQ numbers every call of the rank


class MailboxKeys:
    """Keys of the ``mailbox`` payload: this rank's posts to the job's c10d store (docs/mailbox.md)."""

    CONNECTION: Final = "connection"  # waiting | connected | backoff | closed
    WAITING_REASON: Final = "waiting_reason"  # with connection "waiting": why it has not joined a store
    STORE: Final = "store"  # "host:port" of the job's store
    RANK: Final = "rank"
    POSTS: Final = "posts"  # summaries posted
    CONNECTS: Final = "connects"  # connections opened (more than one: the store dropped us, we joined again)
    STORE_ERRORS: Final = "store_errors"  # store calls that failed (each drops the connection, then a backoff)
    LAST_STORE_ERROR: Final = "last_store_error"
    LAST_POST_MS: Final = "last_post_ms"  # building and sending the last summary
    SUMMARY_BYTES: Final = "summary_bytes"
    REQUESTS_ANSWERED: Final = "requests_answered"
    LAST_ANSWER_MS: Final = "last_answer_ms"
    CALL_BLOCKED_S: Final = "call_blocked_s"  # a store call unanswered this long (the server stopped); None: none


class SettingsKeys:
    """Keys of the ``settings`` payload: the interpreter's settings and its collector's pauses, torch's process-wide
    modes and flags, the known environment variables, and the calls that changed them (``dflash_contract.settings``
    has every setting's default)."""

    INTERPRETER: Final = "interpreter"  # the interpreter's settings
    PYTHON_VERSION: Final = "python_version"  # "3.11"
    SWITCH_INTERVAL_S: Final = "switch_interval_s"
    GC_ENABLED: Final = "gc_enabled"
    GC_THRESHOLD: Final = "gc_threshold"  # [g0, g1, g2]
    GC_DEFAULT_THRESHOLD: Final = "gc_default_threshold"  # this version's default (None: not known)
    GC_FROZEN: Final = "gc_frozen"  # objects gc.freeze() moved out of the collector's reach
    GC_CALLBACKS: Final = "gc_callbacks"  # the program's gc.callbacks (module.qualname): they run inside every pause
    GC_DEBUG: Final = "gc_debug"  # gc.get_debug(): DEBUG_STATS prints in every pause, DEBUG_SAVEALL keeps all garbage
    GC_GARBAGE: Final = "gc_garbage"  # len(gc.garbage): what DEBUG_SAVEALL (or an uncollectable cycle) kept
    RECURSION_LIMIT: Final = "recursion_limit"
    TRACER: Final = "tracer"  # a trace function set for new threads (threading.settrace) or in the board thread
    PROFILE_HOOK: Final = "profile_hook"  # the same for profile functions
    MONITORING_TOOLS: Final = "monitoring_tools"  # sys.monitoring tools registered (3.12+): coverage, debuggers
    DEV_MODE: Final = "dev_mode"
    # tracemalloc's traceback depth while it traces every allocation (0: not tracing): each allocation of every thread
    # records that many frames.
    TRACEMALLOC_FRAMES: Final = "tracemalloc_frames"
    DECIMAL_PREC: Final = "decimal_prec"  # decimal.DefaultContext.prec where the program imported decimal (28)
    # Threads with a trace function on one of their frames (sys.settrace in that thread, a debugger, coverage):
    # [[thread name, hook name], ...]; threading's hook for new threads is TRACER.
    THREAD_TRACERS: Final = "thread_tracers"
    # Where a trace function runs: how many times slower a Python line runs under an empty one than under none,
    # measured once in the board thread (its own trace function set and restored): the least a traced line costs.
    TRACE_LINE_SLOWDOWN: Final = "trace_line_slowdown"
    XOPTIONS: Final = "xoptions"  # the -X options, as "name" or "name=value"
    # Python's logging, when the program imported it: the root logger's level (10 DEBUG, 30 WARNING by default) and
    # the loggers (by name, at most 4) set to DEBUG or below; Python's warnings: the actions of its filters that
    # show a warning every time ("always") or stop the program ("error"), at most 4.
    LOGGING_ROOT_LEVEL: Final = "logging_root_level"
    LOGGERS_AT_DEBUG: Final = "loggers_at_debug"
    WARNINGS_ACTIONS: Final = "warnings_actions"
    # Interval timers armed to repeat (signal.setitimer: a sampling profiler, a watchdog), each with the handler the
    # signal runs in the main thread: [[timer, interval_s, handler], ...]; handler "module.qualname", or "default",
    # "ignored", "native" (a C handler).
    INTERVAL_TIMERS: Final = "interval_timers"
    COLLECTOR: Final = "collector"  # the cyclic collector's pauses, timed by gc.callbacks
    COLLECTIONS: Final = "collections"  # since timing started
    COLLECTIONS_BY_GENERATION: Final = "collections_by_generation"
    PAUSE_S_TOTAL: Final = "pause_s_total"  # wall time every thread was stopped by collections
    PAUSE_MAX_MS: Final = "pause_max_ms"
    RECENT_PAUSE_SHARE: Final = "recent_pause_share"  # over the last RECENT_WINDOW_S
    RECENT_WINDOW_S: Final = "recent_window_s"
    RECENT_COLLECTIONS: Final = "recent_collections"
    EXPLICIT_COLLECTS: Final = "explicit_collects"  # gc.collect() calls the program made
    TIMED_SINCE_WALL_S: Final = "timed_since_wall_s"
    TORCH_FLAGS: Final = "torch_flags"  # torch's process-wide modes and flags (absent until the program imports torch)
    NUM_THREADS: Final = "num_threads"  # as the board thread sees it (the setting is per thread: calls say more)
    NUM_INTEROP_THREADS: Final = "num_interop_threads"
    DETERMINISTIC_ALGORITHMS: Final = "deterministic_algorithms"
    ANOMALY_DETECTION: Final = "anomaly_detection"
    AUTOGRAD_PROFILER: Final = "autograd_profiler"
    FLOAT32_MATMUL_PRECISION: Final = "float32_matmul_precision"
    CUDA_MATMUL_ALLOW_TF32: Final = "cuda_matmul_allow_tf32"
    CUDNN_ALLOW_TF32: Final = "cudnn_allow_tf32"
    CUDNN_BENCHMARK: Final = "cudnn_benchmark"
    CUDNN_DETERMINISTIC: Final = "cudnn_deterministic"
    CUDNN_ENABLED: Final = "cudnn_enabled"
    MKLDNN_ENABLED: Final = "mkldnn_enabled"
    OPT_EINSUM_ENABLED: Final = "opt_einsum_enabled"  # torch.backends.opt_einsum: einsum's contraction order
    QUANTIZED_ENGINE: Final = "quantized_engine"  # torch.backends.quantized.engine: the int8 kernels' library
    QUANTIZED_ENGINE_DEFAULT: Final = "quantized_engine_default"  # this machine's own choice (x86 or fbgemm; qnnpack)
    # scaled_dot_product_attention's fused backends (torch.backends.cuda.*_sdp_enabled(): the CPU honours flash too)
    FLASH_SDP_ENABLED: Final = "flash_sdp_enabled"
    MEM_EFFICIENT_SDP_ENABLED: Final = "mem_efficient_sdp_enabled"
    CUDA_SYNC_DEBUG_MODE: Final = "cuda_sync_debug_mode"  # None until the program initialised CUDA
    DEFAULT_DTYPE: Final = "default_dtype"
    CPU_CORES: Final = "cpu_cores"  # CPUs the process may run on (its affinity)
    ENVIRONMENT: Final = "known_environment"  # [[name, value]] of the known variables in os.environ now
    SETTING_CALLS: Final = "setting_calls"  # the calls that changed a setting: rows below, newest last
    # library constants whose live value differs from their source's: [[file, "Owner.NAME", now, in the source]]
    LIBRARY_CHANGES: Final = "library_changes"
    LIBRARY_MODULES_READ: Final = "library_modules_read"  # library modules parsed so far
    LIBRARY_PARSE_MS: Final = "library_parse_ms"  # the reading's time so far (the board thread's, GIL held)
    CALL: Final = "call_name"  # "torch.set_num_threads"
    ARG: Final = "arg"  # its argument, as text
    CALLERS: Final = "callers"  # the threads that made it
    SITE: Final = "site"  # "train.py:12 (worker)"
    COUNT: Final = "count"
    LAST_WALL_S: Final = "last_wall_s"


class CodedriftKeys:
    """Keys of the ``codedrift`` payload (and of its nested rows)."""

    ACTIVE: Final = "active"
    CHECK_COST_MS: Final = "check_cost_ms"
    CHECKED_MODULES: Final = "checked_modules"
    CHECKED_WALL_S: Final = "checked_wall_s"
    FILE: Final = "file"
    HASHED_FILES: Final = "hashed_files"
    HOW: Final = "how"
    IMPORT_HOOK: Final = "import_hook"
    IMPORT_WALL_S: Final = "import_wall_s"
    INSTALLED: Final = "installed"
    MODULE: Final = "module"
    MTIME_WALL_S: Final = "mtime_wall_s"
    STALE: Final = "stale"
    STALE_COUNT: Final = "stale_count"
    TRACKED_FILES: Final = "tracked_files"


class AppKeys:
    """The ``app`` section a training program publishes (all optional; readers show what is there)."""

    NAME: Final = "name"
    STEP: Final = "step"
    TOKENS_PER_S: Final = "tokens_per_s"
    TARGET_BATCHES_PER_S: Final = "target_batches_per_s"
    DRAFTER_BATCHES_PER_S: Final = "drafter_batches_per_s"
    STEP_MS: Final = "step_ms"
    CONFIG: Final = "config"  # the program's own settings, flat (readers look for a few common names in it)
    THREADS: Final = "threads"  # thread name -> {ROLE, DEVICE}
    ROLE: Final = "role"  # a thread's pipeline stage ("target", "drafter")
    DEVICE: Final = "device"  # the device a thread (or the config) runs on ("cuda:1", "cpu")
    SCENARIO: Final = "scenario"
    VERSIONS: Final = "versions"  # package -> version, when the program reports its own (a bug report prefers them)


class SessionKeys:
    """The ``session`` section: the writer's own bookkeeping (probes/session.py writes it; docs/board.md)."""

    ENABLED: Final = "enabled"  # the probes running
    STEPS: Final = "steps"  # session.step() calls
    STEP: Final = "step"  # the step the program last passed
    LAST_STEP_WALL_S: Final = "last_step_wall_s"
    PUBLISHES: Final = "publishes"
    PUBLISH_ERRORS: Final = "publish_errors"
    PUBLISH_COST_MS_MEAN: Final = "publish_cost_ms_mean"
    BOARD_ERROR: Final = "board_error"
    WANDB: Final = "wandb"
    ATTACHED: Final = "attached"  # what `dflash-diag attach` started (docs/attach.md)
