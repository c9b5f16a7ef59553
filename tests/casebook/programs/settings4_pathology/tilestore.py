"""Fixed-record tile shards (one 4 KiB record per tile) and their reader.

Record: 32x32x3 uint8 tile, then slide id (u32) and label (u8), zero padded
to RECORD bytes, so a tile is one page and can be read with a single pread.

At open, both policies advise random access and release the pages a
previous job (or the shard writer) left in the page cache.  Then:
  "stream" -- every record read is released from the page cache right after
              it is consumed (POSIX_FADV_DONTNEED on its range), the way
              backup and scanning tools read large collections without
              evicting the node's hot data.
  "cached" -- the shard is read through the page cache normally.
"""
import hashlib
import os
import struct

import numpy as np

TILE = (32, 32, 3)
TILE_BYTES = int(np.prod(TILE))
RECORD = 4096
META = struct.Struct("<IB")


def write_shard(path, tiles, slide_ids, labels):
    buf = np.zeros((len(tiles), RECORD), np.uint8)
    buf[:, :TILE_BYTES] = tiles.reshape(len(tiles), -1)
    meta = np.zeros((len(tiles), META.size), np.uint8)
    meta[:, :4] = slide_ids.astype("<u4").view(np.uint8).reshape(-1, 4)
    meta[:, 4] = labels
    buf[:, TILE_BYTES:TILE_BYTES + META.size] = meta
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return hashlib.sha1(buf.tobytes()).hexdigest()


class TileShard:
    def __init__(self, path, policy="stream"):
        if policy not in ("stream", "cached"):
            raise ValueError(policy)
        self.path, self.policy = path, policy
        self.fd = os.open(path, os.O_RDONLY)
        self.n = os.fstat(self.fd).st_size // RECORD
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def _release(self, off, length):
        if self.policy == "stream":
            os.posix_fadvise(self.fd, off, length, os.POSIX_FADV_DONTNEED)

    def checksum(self, chunk=1 << 20):
        h = hashlib.sha1()
        off = 0
        while True:
            b = os.pread(self.fd, chunk, off)
            if not b:
                break
            h.update(b)
            self._release(off, len(b))
            off += len(b)
        return h.hexdigest()

    def read(self, idx, out_tiles, out_slide, out_label):
        fd = self.fd
        for j, i in enumerate(idx):
            off = int(i) * RECORD
            rec = os.pread(fd, RECORD, off)
            self._release(off, RECORD)
            out_tiles[j] = np.frombuffer(rec, np.uint8, TILE_BYTES).reshape(TILE)
            out_slide[j], out_label[j] = META.unpack_from(rec, TILE_BYTES)

    def close(self):
        os.close(self.fd)
