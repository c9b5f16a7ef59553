"""The probe board contract (docs/board.md): the document, its names and keys, its validation, where it lives.

One home for everything the writer (``probes``, inside the user's program) and the readers (``dflash-diag``
board, top, doctor, snapshot) must agree on:

- the schema tag, size and nesting bounds, the probe names and statuses, the payload keys (constants and
  TypedDicts, so a key is never spelled twice);
- strict JSON (no NaN/Infinity, no ``1e999`` overflowing to infinity, bounded nesting) and the validation
  of the whole document into plain, checked values;
- when a board is stale (one rule for ``board``, ``doctor`` and ``top``);
- the directory rules: where boards live for a user or for a given process, what makes a directory safe
  (ours or the target's owner, 0700, not a symlink), and the clean-up of boards left by processes that died.

Standard library only: the probes import this inside the user's program.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, TypedDict

from dflash_contract import proc

BOARD_SCHEMA: Final = "dflash-diag.board/1"
BOARD_DIR_ENV: Final = "DFLASH_DIAG_BOARD_DIR"
MAX_BOARD_BYTES: Final = 4 * 1024 * 1024
MAX_BOARD_DEPTH: Final = 32  # nesting of objects/arrays; the writer's documents are about 6 deep
MAX_STRING_CHARS: Final = 64 * 1024

# The probes, in the order docs and help list them (the package, `run --probes` and the readers use this).
PROBE_NAMES: Final[tuple[str, ...]] = (
    "gil", "allocator", "compile", "cudagraphs", "queues", "checkpoint", "fastpath", "codedrift", "threads", "health",
)  # == the ProbeName constants below (checked by tests/test_board_contract.py)
STATUS_OK: Final = "ok"
STATUS_NA: Final = "na"
STATUS_ERROR: Final = "error"
PROBE_STATUSES: Final = frozenset({STATUS_OK, STATUS_NA, STATUS_ERROR})


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
    ALLOCATED_PEAK_BYTES: Final = "allocated_peak_bytes"
    ALLOCATED_SWING_BYTES: Final = "allocated_swing_bytes"
    ALLOCATIONS_PER_S: Final = "allocations_per_s"
    DEVICE_ALLOC_PER_S: Final = "device_alloc_per_s"
    DEVICE_FREE_PER_S: Final = "device_free_per_s"
    DEVICES: Final = "devices"
    EMPTY_CACHE_CALLS: Final = "empty_cache_calls"
    FRAGMENTATION_SHARE: Final = "fragmentation_share"
    INACTIVE_SPLIT_BYTES: Final = "inactive_split_bytes"
    NUM_DEVICE_ALLOC: Final = "num_device_alloc"
    NUM_DEVICE_FREE: Final = "num_device_free"
    NUM_SYNC_ALL_STREAMS: Final = "num_sync_all_streams"
    OOM_REJECTIONS: Final = "oom_rejections"
    OOMS: Final = "ooms"
    RESERVED_BYTES: Final = "reserved_bytes"
    RESERVED_PEAK_BYTES: Final = "reserved_peak_bytes"
    RESERVED_SWING_BYTES: Final = "reserved_swing_bytes"
    SYNC_ALL_STREAMS_PER_S: Final = "sync_all_streams_per_s"
    WINDOW_S: Final = "window_s"


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
    SAMPLED_STEP: Final = "sampled_step"  # the optimizer step this group's reading was taken at
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
    CONFIG: Final = "config"
    THREADS: Final = "threads"
    SCENARIO: Final = "scenario"


class WriterIdentity(TypedDict):
    pid: int
    start_time_ticks: int  # /proc/<pid>/stat field 22: with the PID, identifies the process
    argv: list[str]  # redacted by the writer (dflash_contract.redact)
    python: str
    torch: str | None
    hostname: str


class ProbePayload(TypedDict, total=False):
    status: str  # ok | na | error
    reason: str  # with na and error
    errors: int
    hook_errors: int


class SessionInfo(TypedDict, total=False):
    enabled: list[str]
    steps: int
    step: int | None
    last_step_wall_s: float | None
    publishes: int
    publish_errors: int
    publish_cost_ms_mean: float | None
    board_error: str | None


class BoardDocument(TypedDict):
    schema: str
    writer: WriterIdentity
    seq: int
    wall_time_s: float
    interval_s: float  # the slowest the writer publishes (its timer)
    publish_interval_s: float | None  # the fastest (step-driven)
    final: bool
    threads: dict[int, str]  # native TID -> Python thread name (string keys in the JSON)
    probes: dict[str, dict[str, Any]]
    app: dict[str, Any]
    session: dict[str, Any]


# --- strict JSON and validation ----------------------------------------------------------------------------


class BoardFormatError(ValueError):
    """The bytes are not a valid board document; the message says what is wrong (one line)."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as inf: a number no writer of ours can produce
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def loads_strict(data: bytes | str, *, max_depth: int | None = MAX_BOARD_DEPTH) -> Any:
    """JSON without NaN/Infinity, numbers that overflow to infinity, or nesting deeper than ``max_depth``.

    ValueError (UnicodeDecodeError included) on anything else; never RecursionError. ``max_depth=None``
    skips the linear pre-pass (a pure-Python loop, seconds on tens of MiB): nesting is then bounded only by
    the interpreter's recursion limit, and the caller checks the depth of what it gets."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if max_depth is not None and _nesting_exceeds(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth or 'the recursion limit allows'} levels") from None


def _nesting_exceeds(text: str, max_depth: int) -> bool:
    """Whether brackets outside strings nest deeper than ``max_depth`` (one linear pass, before parsing)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _get(doc: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str = "") -> Any:
    if key not in doc:
        raise BoardFormatError(f"missing {where}{key}")
    value = doc[key]
    if isinstance(value, bool) and bool not in kinds:
        raise BoardFormatError(f"{where}{key} has the wrong type (bool)")
    if not isinstance(value, kinds):
        raise BoardFormatError(f"{where}{key} has the wrong type ({type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):
        raise BoardFormatError(f"{where}{key} is not a finite number")
    return value


def _short(value: object, n: int = 40) -> str:
    return repr(str(value)[:n])


def validate_document(doc: Any) -> BoardDocument:
    """Check every field's type and range; BoardFormatError names the first problem."""
    if not isinstance(doc, dict):
        raise BoardFormatError("the document is not a JSON object")
    schema = _get(doc, "schema", (str,))
    if schema != BOARD_SCHEMA:
        raise BoardFormatError(f"schema {_short(schema, 60)} is not {BOARD_SCHEMA!r} (written by another dflash-diag version?)")
    w = _get(doc, "writer", (dict,))
    pid = _get(w, "pid", (int,), "writer.")
    ticks = _get(w, "start_time_ticks", (int,), "writer.")
    argv = _get(w, "argv", (list,), "writer.")
    if not proc.is_valid_pid(pid) or not 0 <= ticks < 2**63 or not all(isinstance(a, str) for a in argv):
        raise BoardFormatError("writer has an invalid pid, start_time_ticks or argv")
    torch_version = w.get("torch")
    if torch_version is not None and not isinstance(torch_version, str):
        raise BoardFormatError("writer.torch has the wrong type")
    writer: WriterIdentity = {
        "pid": pid, "start_time_ticks": ticks, "argv": list(argv)[:4096],
        "python": _get(w, "python", (str,), "writer."), "torch": torch_version,
        "hostname": _get(w, "hostname", (str,), "writer."),
    }
    seq = _get(doc, "seq", (int,))
    wall = float(_get(doc, "wall_time_s", (int, float)))
    interval = float(_get(doc, "interval_s", (int, float)))
    if not (0 <= seq < 2**63) or not (0 <= wall < 1e11) or not (0 < interval <= 86400):
        raise BoardFormatError("seq, wall_time_s or interval_s out of range")
    threads: dict[int, str] = {}
    for tid, name in _get(doc, "threads", (dict,)).items():
        if not (tid.isascii() and tid.isdigit() and len(tid) < 12 and isinstance(name, str)):
            raise BoardFormatError(f"threads entry {_short(tid, 20)} is not TID -> name")
        threads[int(tid)] = name
    probes = _get(doc, "probes", (dict,))
    for name, payload in probes.items():
        if not isinstance(payload, dict):
            raise BoardFormatError(f"probe {_short(name)} payload is not an object")
        status = payload.get("status")
        if status not in PROBE_STATUSES:
            raise BoardFormatError(f"probe {_short(name)} has status {_short(status, 20)}, not ok/na/error")
        if status != STATUS_OK and not isinstance(payload.get("reason"), str):
            raise BoardFormatError(f"probe {_short(name)} is {status} without a reason")
    app = _get(doc, "app", (dict,))
    session = doc.get("session", {})
    if not isinstance(session, dict):
        raise BoardFormatError("session has the wrong type")
    publish_interval = doc.get("publish_interval_s")
    if publish_interval is not None and (isinstance(publish_interval, bool) or not isinstance(publish_interval, (int, float))
                                         or not 0 < publish_interval <= 86400):
        raise BoardFormatError("publish_interval_s has the wrong type or is out of range")
    return {
        "schema": schema, "writer": writer, "seq": seq, "wall_time_s": wall, "interval_s": interval,
        "publish_interval_s": float(publish_interval) if publish_interval is not None else None,
        "final": doc.get("final") is True, "threads": threads, "probes": probes, "app": app, "session": session,
    }


def parse_document(data: bytes) -> BoardDocument:
    """Bytes of a board file to a validated document; BoardFormatError (one line) otherwise."""
    if len(data) > MAX_BOARD_BYTES:
        raise BoardFormatError(f"{len(data)} bytes, over the {MAX_BOARD_BYTES}-byte limit")
    if not data.strip():
        raise BoardFormatError("empty (truncated?)")
    try:
        doc = loads_strict(data)
    except UnicodeDecodeError:
        raise BoardFormatError("not UTF-8 text: corrupt") from None
    except ValueError as exc:
        raise BoardFormatError(f"not valid JSON (corrupt or truncated): {str(exc).splitlines()[0][:120]}") from None
    return validate_document(doc)


# --- staleness: one rule for every reader ------------------------------------------------------------------

# The writer's timer publishes every interval_s (1 s) whether or not the program steps; ten missed publishes
# (and at least 10 s) means its threads no longer run: stopped, hung with the GIL held, or swapped out.
STALE_INTERVALS: Final = 10
STALE_MIN_S: Final = 10.0
# A board that is fresh while steps stopped this long: the program is alive but its loop is stuck.
NO_STEP_STALL_S: Final = 60.0


def stale_after_s(interval_s: float) -> float:
    """Age (s) past which a board no longer describes the process."""
    return max(STALE_MIN_S, STALE_INTERVALS * interval_s)


def is_stale(age_s: float, interval_s: float) -> bool:
    return age_s > stale_after_s(interval_s)


# --- where boards live ---------------------------------------------------------------------------------------


class BoardDirError(OSError):
    """The board directory is unsafe (symlink, foreign owner, group/world access) or cannot be made."""


def unsafe_dir_reason(st: os.stat_result, owner_uid: int | None = None) -> tuple[str, str] | None:
    """Why a board directory must not be used, as (what is wrong, what to do), or None when it is safe.

    ``owner_uid`` (default: ours) is who must own it: root reading another user's board passes that user's uid.
    """
    expected = os.getuid() if owner_uid is None else owner_uid
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink: refusing it", "remove it; the probes recreate it"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory", "remove it or pick another --board-dir"
    if st.st_uid != expected:
        who = "you" if owner_uid is None or expected == os.getuid() else f"uid {expected}"
        return (f"belongs to uid {st.st_uid}, not to {who} (another user may have created it to hide or switch "
                "off the probes): refusing it", "remove it, or use a directory of your own with --board-dir")
    if st.st_mode & 0o077:
        return f"is open to other users (mode {st.st_mode & 0o777:o})", "chmod 700 it"
    return None


def _runtime_dir(uid: int, environ: Mapping[str, str]) -> Path | None:
    """The user's runtime directory ($XDG_RUNTIME_DIR, else /run/user/UID) when it is really theirs."""
    for candidate in (environ.get("XDG_RUNTIME_DIR"), f"/run/user/{uid}"):
        if not candidate:
            continue
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o022:
            return Path(candidate)
    return None


def tmp_board_dir(uid: int) -> Path:
    return Path("/tmp") / f"dflash-diag-{uid}"  # literal /tmp: writer and reader must agree whatever TMPDIR says


def default_board_dir(environ: Mapping[str, str] | None = None, uid: int | None = None) -> Path:
    """``$DFLASH_DIAG_BOARD_DIR``, else ``<runtime dir>/dflash-diag`` (XDG_RUNTIME_DIR or /run/user/UID,
    when it is the user's), else ``/tmp/dflash-diag-UID``. ``environ``/``uid`` default to ours."""
    env = os.environ if environ is None else environ
    user = os.getuid() if uid is None else uid
    override = env.get(BOARD_DIR_ENV)
    if override:
        return Path(override)
    runtime = _runtime_dir(user, env)
    return runtime / "dflash-diag" if runtime is not None else tmp_board_dir(user)


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` 0700 if missing; BoardDirError for a symlink, a foreign owner or group/world access."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise BoardDirError(f"cannot create board directory {path}: {exc.strerror}") from exc
    problem = unsafe_dir_reason(os.lstat(path))
    if problem is not None:
        raise BoardDirError(f"board directory {path} {problem[0]}; {problem[1]}")
    return path


def choose_board_dir(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, str | None]:
    """The directory to publish into, created and checked, and a warning when the default was unusable.

    An explicit directory (``--board-dir``, ``$DFLASH_DIAG_BOARD_DIR``) must be safe: BoardDirError otherwise.
    The default one, when someone else owns or opened it (another local user can pre-create
    ``/tmp/dflash-diag-UID``), is replaced by a fresh private ``dflash-diag-UID-XXXXXX`` beside it, which
    readers find too (:func:`candidate_dirs`); the warning says so, to be printed loudly.
    """
    if explicit is not None and str(explicit):
        return ensure_private_dir(Path(explicit)), None
    env_dir = os.environ.get(BOARD_DIR_ENV)
    if env_dir:
        return ensure_private_dir(Path(env_dir)), None
    preferred = default_board_dir()
    try:
        return ensure_private_dir(preferred), None
    except BoardDirError as exc:
        try:  # mkdtemp: 0700, ours, a name nobody could predict and pre-create
            fallback = Path(tempfile.mkdtemp(prefix=f"dflash-diag-{os.getuid()}-", dir=tmp_board_dir(os.getuid()).parent))
        except OSError as mk:
            raise BoardDirError(f"{exc}; and no private fallback could be made: {mk.strerror}") from mk
        return fallback, f"{exc}; publishing to {fallback} instead (readers find it)"


def _environ_of(pid: int) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq:
            out[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return out


def candidate_dirs(pid: int | None = None) -> list[tuple[Path, int]]:
    """Where the board of ``pid`` (or, without one, our boards) may be, most likely first, each with the
    uid that must own it: the directory the process's own environment names, our own
    ``$DFLASH_DIAG_BOARD_DIR``, the owner's runtime directory, ``/tmp/dflash-diag-UID`` and the private
    fallbacks ``/tmp/dflash-diag-UID-*`` (:func:`choose_board_dir`).
    """
    uid = os.getuid() if pid is None else proc.owner_uid(pid)
    if uid is None:
        uid = os.getuid()
    out: list[tuple[Path, int]] = []
    env = _environ_of(pid) if pid is not None else dict(os.environ)
    if env is not None:
        out.append((default_board_dir(env, uid), uid))
    ours = os.environ.get(BOARD_DIR_ENV)
    if ours:  # where we were told boards are (`attach` publishes there, into a process that never knew)
        out.append((Path(ours), uid))
    runtime = _runtime_dir(uid, {})
    if runtime is not None:
        out.append((runtime / "dflash-diag", uid))
    tmp = tmp_board_dir(uid)
    out.append((tmp, uid))
    try:
        fallbacks = sorted(p for p in tmp.parent.iterdir() if re.fullmatch(rf"dflash-diag-{uid}-\w+", p.name))
    except OSError:
        fallbacks = []
    out.extend((p, uid) for p in fallbacks)
    seen: set[Path] = set()
    unique = []
    for path, owner in out:
        if path not in seen:
            seen.add(path)
            unique.append((path, owner))
    return unique


# --- reading one file safely -------------------------------------------------------------------------------


def board_file_name(pid: int) -> str:
    return f"{pid}.json"


def pid_of_board_name(name: str) -> int | None:
    """The PID a board file is named after (``1234.json``), or None for any other name."""
    stem = name[: -len(".json")] if name.endswith(".json") else None
    if stem is None or not (stem.isascii() and stem.isdigit() and len(stem) < 12):
        return None
    pid = int(stem)
    return pid if proc.is_valid_pid(pid) else None


def read_board_bytes(directory: Path, name: str, owner_uid: int | None = None) -> bytes:
    """The bytes of ``directory/name``, opened without following symlinks at either level (directory fd +
    O_NOFOLLOW), checked to be a regular file of ``owner_uid`` (default: ours) and at most 4 MiB.

    BoardDirError for the directory, FileNotFoundError when there is no such file, BoardFormatError for a
    file that must not be read."""
    expected = os.getuid() if owner_uid is None else owner_uid
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise BoardDirError(f"board directory {directory} is a symlink or not a directory: refusing it") from None
        raise BoardDirError(f"cannot read board directory {directory}: {exc.strerror}") from None
    try:
        problem = unsafe_dir_reason(os.fstat(dir_fd), expected)
        if problem is not None:
            raise BoardDirError(f"board directory {directory} {problem[0]} ({problem[1]})")
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BoardFormatError("is a symlink: refusing it") from None
            if exc.errno == errno.ENOENT:
                raise
            raise BoardFormatError(f"cannot be opened: {exc.strerror}") from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BoardFormatError("is not a regular file: refusing it")
        if st.st_uid != expected:
            raise BoardFormatError(f"belongs to uid {st.st_uid}, not to uid {expected}: refusing it")
        if st.st_size > MAX_BOARD_BYTES:
            raise BoardFormatError(f"is {st.st_size} bytes, over the {MAX_BOARD_BYTES}-byte limit: refusing it")
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 16):
            total += len(chunk)
            if total > MAX_BOARD_BYTES:
                raise BoardFormatError(f"grew over the {MAX_BOARD_BYTES}-byte limit: refusing it")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# --- boards left behind by processes that died -------------------------------------------------------------

_TMP_NAME = re.compile(r"^(\d{1,11})\.json\.tmp\.[0-9a-f]+$")


def _writer_of(data: bytes) -> tuple[int, int] | None:
    try:
        doc = validate_document(loads_strict(data))
    except (ValueError, BoardFormatError):
        return None
    return doc["writer"]["pid"], doc["writer"]["start_time_ticks"]


def remove_stale_boards(directory: Path) -> list[str]:
    """Remove boards (and half-written temporaries) whose writer is gone; return the names removed.

    Only in a safe directory of ours; only regular files of ours named ``PID.json`` / ``PID.json.tmp.HEX``;
    a board only when it is a valid board whose writer is that PID and that process is no longer running
    with the board's start time (it died, or the PID now belongs to another process); a temporary only when
    it holds what the probes write for that PID, whole or cut (empty included), and that writer no longer
    runs (with the start time the temporary records, when the write got that far). Anything else is left
    alone."""
    removed: list[str] = []
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return removed
    try:
        if unsafe_dir_reason(os.fstat(dir_fd)) is not None:
            return removed
        for name in os.listdir(dir_fd):
            if _stale_entry(dir_fd, name):
                try:
                    os.unlink(name, dir_fd=dir_fd)
                    removed.append(name)
                except OSError:
                    pass
    finally:
        os.close(dir_fd)
    return removed


def _stale_entry(dir_fd: int, name: str) -> bool:
    pid = pid_of_board_name(name)
    tmp = _TMP_NAME.match(name)
    if pid is None and tmp is None:
        return False
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        return False
    if tmp is not None:
        tmp_pid = int(tmp.group(1))
        head = _read_head(dir_fd, name, _TMP_HEAD_BYTES)
        return proc.is_valid_pid(tmp_pid) and head is not None and _tmp_writer_gone(head, tmp_pid)
    data = _read_head(dir_fd, name, MAX_BOARD_BYTES + 1)
    writer = _writer_of(data) if data is not None and len(data) <= MAX_BOARD_BYTES else None
    if writer is None or writer[0] != pid:
        return False  # not a board of ours as we write them: not ours to delete
    return not proc.process_alive(pid, writer[1])


def _read_head(dir_fd: int, name: str, limit: int) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


# What the probes' publisher writes (compact JSON, keys in this order): a temporary is theirs when it holds
# this header, or any cut of it (killed before or while writing, an empty file included).
_TMP_HEAD_BYTES = 256
_TICKS = re.compile(rb'"start_time_ticks":(\d{1,20})[,}]')
_TICKS_CUT = re.compile(rb'"start_time_ticks":\d{0,20}')


def _tmp_header(pid: int) -> bytes:
    return b'{"schema":"%s","writer":{"pid":%d,' % (BOARD_SCHEMA.encode(), pid)


def _tmp_writer_gone(head: bytes, pid: int) -> bool:
    """Whether ``head`` (the first bytes of ``PID.json.tmp.HEX``) is the probes' own (partial) write for
    ``pid`` and its writer no longer runs: the start time when the write got that far, else the PID alone."""
    header = _tmp_header(pid)
    if len(head) <= len(header):
        return header.startswith(head) and not proc.process_alive(pid)
    if not head.startswith(header):
        return False  # something else under one of our names: not ours to delete
    rest = head[len(header):]
    ticks = _TICKS.match(rest)
    if ticks is not None:  # ticks 0: the writer could not read its own start time; the PID alone tells
        return not proc.process_alive(pid, int(ticks[1]) or None)
    cut = _TICKS_CUT.fullmatch(rest) is not None or b'"start_time_ticks":'.startswith(rest)
    return cut and not proc.process_alive(pid)


def iter_board_names(directory: Path) -> Iterator[tuple[str, int]]:
    """(file name, PID) of every board file in ``directory`` (names only; nothing is opened)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        pid = pid_of_board_name(name)
        if pid is not None:
            yield name, pid
