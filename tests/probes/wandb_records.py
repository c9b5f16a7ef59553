"""Reads back what a wandb run wrote: the records of its ``run-<id>.wandb`` transaction log.

wandb >= 0.2x no longer ships a Python reader (its service writes the file). The format is LevelDB's log
format under a 7-byte header (``:W&B``, magic 0xBEE1, version 0): 32 KiB blocks of chunks, each a 7-byte
header (CRC-32 of the type byte and data, little-endian length, type FULL/FIRST/MIDDLE/LAST) and data;
a record is the concatenation of its chunks, one ``wandb_internal_pb2.Record`` protobuf. Checksums are
verified, so a misread fails loudly instead of returning junk.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BLOCK_BYTES = 32 * 1024
CHUNK_HEADER_BYTES = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass(frozen=True)
class RunRecords:
    history: list[dict[str, Any]]  # one dict per committed row, values decoded from JSON
    alerts: list[dict[str, str]]
    kinds: dict[str, int]  # record type -> count


def _chunks(raw: bytes) -> list[bytes]:
    if raw[:4] != b":W&B" or struct.unpack("<HB", raw[4:7]) != (0xBEE1, 0):
        raise ValueError("not a wandb transaction log (bad header)")
    records: list[bytes] = []
    pending = b""
    pos = 7
    while pos + CHUNK_HEADER_BYTES <= len(raw):
        left = BLOCK_BYTES - pos % BLOCK_BYTES
        if left < CHUNK_HEADER_BYTES:
            pos += left  # block trailer: zero padding
            continue
        crc, length, kind = struct.unpack("<IHB", raw[pos:pos + CHUNK_HEADER_BYTES])
        if kind == 0 and length == 0:
            break  # zero-filled tail of a file still being written
        data = raw[pos + CHUNK_HEADER_BYTES:pos + CHUNK_HEADER_BYTES + length]
        if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise ValueError(f"checksum mismatch at byte {pos}")
        pos += CHUNK_HEADER_BYTES + length
        pending += data
        if kind in (FULL, LAST):
            records.append(pending)
            pending = b""
    return records


def read_run(path: Path) -> RunRecords:
    from wandb.proto import wandb_internal_pb2 as pb

    history: list[dict[str, Any]] = []
    alerts: list[dict[str, str]] = []
    kinds: dict[str, int] = {}
    for data in _chunks(path.read_bytes()):
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type") or "?"
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "history":
            history.append({(item.key or "/".join(item.nested_key)): json.loads(item.value_json)
                            for item in record.history.item})
        elif kind == "alert":
            alerts.append({"title": record.alert.title, "text": record.alert.text, "level": record.alert.level})
    return RunRecords(history=history, alerts=alerts, kinds=kinds)


def find_run_file(wandb_dir: Path) -> Path:
    files = sorted(wandb_dir.rglob("run-*.wandb"))
    if len(files) != 1:
        raise AssertionError(f"expected one .wandb file under {wandb_dir}, found {files}")
    return files[0]
