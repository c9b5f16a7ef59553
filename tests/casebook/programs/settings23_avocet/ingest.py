import asyncio
import struct
import threading
import queue
import zlib

import numpy as np
import torch

import tuning
from telemetry import FIX

_CRC = struct.Struct("<I")


class Lane:
    def __init__(self, records, labels, seed, check):
        self.records = records
        self.labels = labels
        self.rng = np.random.default_rng(seed)
        self.check = check

    async def next_record(self):
        i = int(self.rng.integers(0, len(self.records)))
        return i, self.records[i]

    async def verify(self, raw):
        if self.check:
            (crc,) = _CRC.unpack_from(raw, FIX.size)
            if zlib.crc32(raw[:FIX.size]) != crc:
                raise ValueError("corrupt uplink record")
        return raw

    async def unframe(self, raw):
        raw = await self.verify(raw)
        return FIX.unpack_from(raw)

    async def decode(self, raw):
        f = await self.unframe(raw)
        motion = await self.motion(f)
        return await self.position(f, motion)

    async def motion(self, f):
        return (f[10] / 1000.0, f[11] / 1000.0, f[12] / 1000.0)

    async def position(self, f, motion):
        return (f[4] / 100.0, f[5] / 100.0, f[6] / 3600.0, (f[7] - 3400) / 800.0, f[8] / 14.0,
                f[9] / 40.0) + motion + ((f[2] / 1e7 - 52.5) * 5.0,)

    async def fix(self):
        i, raw = await self.next_record()
        return await self.decode(raw), self.labels[i]

    async def window(self, length):
        rows = []
        votes = []
        for _ in range(length):
            row, label = await self.fix()
            rows.append(row)
            votes.append(label)
        return rows, max(set(votes), key=votes.count)


class TelemetryIngest(threading.Thread):
    def __init__(self, records, labels, settings):
        super().__init__(name="telemetry-ingest", daemon=True)
        self.s = settings
        self.out = queue.Queue(maxsize=settings.ingest.queue_depth)
        self.lanes = [Lane(records, labels, settings.tags.seed + 100 + k, settings.ingest.checksum)
                      for k in range(settings.ingest.lanes)]
        self.count_lock = threading.Lock()
        self.windows = 0

    async def lane_batch(self, lane, n):
        return [await lane.window(self.s.tags.fixes_per_window) for _ in range(n)]

    async def pump(self):
        per_lane = self.s.tags.windows_per_batch // len(self.lanes)
        while True:
            parts = await asyncio.gather(*(self.lane_batch(l, per_lane) for l in self.lanes))
            rows = [w for part in parts for w in part]
            x = torch.tensor([r for r, _ in rows], dtype=torch.float32)
            y = torch.tensor([lab for _, lab in rows], dtype=torch.long)
            with self.count_lock:
                self.windows += len(rows)
            await asyncio.to_thread(self.out.put, (x, y))

    def run(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        tuning.prepare_event_thread(self.s.diagnostics, loop, self.s.ingest)
        loop.run_until_complete(self.pump())
