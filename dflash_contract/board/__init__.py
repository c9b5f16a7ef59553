"""The probe board contract (docs/board.md): the document, its names and keys, its validation, where it lives.

One home for everything the writer (``probes``, inside the user's program) and the readers (``dflash-diag``
board, top, doctor, snapshot) must agree on, a module per job:

- :mod:`~dflash_contract.board.keys`: the probe names and statuses, the ``--probes LIST`` grammar, and every
  payload key as a constant (a key is never spelled twice);
- :mod:`~dflash_contract.board.schema`: the schema tag, the size and nesting bounds, the document's TypedDicts;
- :mod:`~dflash_contract.board.validate`: strict JSON (no NaN/Infinity, no ``1e999`` overflowing to infinity,
  bounded nesting) and the validation of the whole document into plain, checked values;
- :mod:`~dflash_contract.board.staleness`: when a board is stale (one rule for ``board``, ``doctor`` and ``top``);
- :mod:`~dflash_contract.board.dirs`: where boards live for a user or for a given process, and what makes a
  directory safe (ours or the target's owner, 0700, not a symlink);
- :mod:`~dflash_contract.board.files`: board file names, and reading one file safely;
- :mod:`~dflash_contract.board.cleanup`: the clean-up of boards left by processes that died.

Every public name is importable from ``dflash_contract.board`` itself. Standard library only: the probes import
this inside the user's program.
"""

from __future__ import annotations

from dflash_contract.board.cleanup import remove_stale_boards
from dflash_contract.board.dirs import (
    BOARD_DIR_ENV,
    BoardDirError,
    candidate_dirs,
    choose_board_dir,
    default_board_dir,
    ensure_private_dir,
    tmp_board_dir,
    unsafe_dir_reason,
)
from dflash_contract.board.files import board_file_name, iter_board_names, pid_of_board_name, read_board_bytes
from dflash_contract.board.keys import (
    PROBE_NAMES,
    PROBE_STATUSES,
    STATUS_ERROR,
    STATUS_NA,
    STATUS_OK,
    AllocatorKeys,
    AppKeys,
    CheckpointKeys,
    CodedriftKeys,
    CollectivesKeys,
    CompileKeys,
    CudagraphsKeys,
    FastpathKeys,
    GilKeys,
    HealthKeys,
    MailboxKeys,
    PayloadKeys,
    ProbeName,
    QueueKeys,
    SessionKeys,
    SettingsKeys,
    SyncKeys,
    ThreadsKeys,
    parse_probe_list,
)
from dflash_contract.board.schema import (
    BOARD_SCHEMA,
    MAX_BOARD_BYTES,
    MAX_BOARD_DEPTH,
    MAX_STRING_CHARS,
    BoardDocument,
    ProbePayload,
    SessionInfo,
    WriterIdentity,
)
from dflash_contract.board.staleness import (
    NO_STEP_STALL_S,
    STALE_INTERVALS,
    STALE_MIN_S,
    is_stale,
    stale_after_s,
)
from dflash_contract.board.validate import (
    BoardFormatError,
    loads_strict,
    parse_document,
    strict_decoder,
    validate_document,
)

__all__ = [
    "BOARD_DIR_ENV", "BOARD_SCHEMA", "MAX_BOARD_BYTES", "MAX_BOARD_DEPTH", "MAX_STRING_CHARS", "NO_STEP_STALL_S",
    "PROBE_NAMES", "PROBE_STATUSES", "STALE_INTERVALS", "STALE_MIN_S", "STATUS_ERROR", "STATUS_NA", "STATUS_OK",
    "AllocatorKeys", "AppKeys", "BoardDirError", "BoardDocument", "BoardFormatError", "CheckpointKeys",
    "CodedriftKeys", "CollectivesKeys", "CompileKeys", "CudagraphsKeys", "FastpathKeys", "GilKeys", "HealthKeys", "MailboxKeys",
    "PayloadKeys", "ProbeName", "ProbePayload", "QueueKeys", "SessionInfo", "SessionKeys", "SettingsKeys", "SyncKeys",
    "ThreadsKeys", "WriterIdentity",
    "board_file_name", "candidate_dirs", "choose_board_dir", "default_board_dir", "ensure_private_dir", "is_stale",
    "iter_board_names", "loads_strict", "parse_document", "parse_probe_list", "pid_of_board_name", "read_board_bytes",
    "remove_stale_boards", "stale_after_s", "strict_decoder", "tmp_board_dir", "unsafe_dir_reason",
    "validate_document",
]
