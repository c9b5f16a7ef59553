import sys
import tomllib
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass
class TagSettings:
    birds: int = 48
    fixes_per_window: int = 16
    windows_per_batch: int = 96
    pool_records: int = 20000
    seed: int = 2


@dataclass
class IngestSettings:
    lanes: int = 8
    queue_depth: int = 4
    handoff_workers: int = 1
    checksum: bool = True


@dataclass
class DiagnosticSettings:
    coroutine_origin_depth: int = 0
    never_awaited: str = "default"


@dataclass
class ModelSettings:
    hidden: int = 1024
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class Settings:
    name: str = "default"
    tags: TagSettings = field(default_factory=TagSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    diagnostics: DiagnosticSettings = field(default_factory=DiagnosticSettings)
    model: ModelSettings = field(default_factory=ModelSettings)


def load(path):
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    s = Settings(name=raw.get("name", path))
    for section in ("tags", "ingest", "diagnostics", "model"):
        target = getattr(s, section)
        for key, value in raw.get(section, {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return s


def prepare_event_thread(diag, loop, ingest):
    """Per-thread runtime options for the thread that owns the event loop."""
    sys.set_coroutine_origin_tracking_depth(int(diag.coroutine_origin_depth))
    warnings.filterwarnings(diag.never_awaited, message="coroutine .* was never awaited",
                            category=RuntimeWarning)
    loop.set_default_executor(ThreadPoolExecutor(max_workers=ingest.handoff_workers,
                                                 thread_name_prefix="handoff"))
