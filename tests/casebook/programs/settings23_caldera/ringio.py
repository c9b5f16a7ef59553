import ctypes
import mmap
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long

_NR_SETUP = 425
_NR_ENTER = 426

_SETUP_SQPOLL = 1 << 1
_ENTER_GETEVENTS = 1 << 0
_ENTER_SQ_WAKEUP = 1 << 1
_OP_READ = 22
_OFF_SQ_RING = 0
_OFF_CQ_RING = 0x8000000
_OFF_SQES = 0x10000000
_FEAT_SINGLE_MMAP = 1 << 0

_SQE = struct.Struct("<BBHiQQIIQHHiQQ")
_CQE = struct.Struct("<QiI")
_U32 = struct.Struct("<I")


class _SqOffsets(ctypes.Structure):
    _fields_ = [
        ("head", ctypes.c_uint32), ("tail", ctypes.c_uint32),
        ("ring_mask", ctypes.c_uint32), ("ring_entries", ctypes.c_uint32),
        ("flags", ctypes.c_uint32), ("dropped", ctypes.c_uint32),
        ("array", ctypes.c_uint32), ("resv1", ctypes.c_uint32),
        ("user_addr", ctypes.c_uint64),
    ]


class _CqOffsets(ctypes.Structure):
    _fields_ = [
        ("head", ctypes.c_uint32), ("tail", ctypes.c_uint32),
        ("ring_mask", ctypes.c_uint32), ("ring_entries", ctypes.c_uint32),
        ("overflow", ctypes.c_uint32), ("cqes", ctypes.c_uint32),
        ("flags", ctypes.c_uint32), ("resv1", ctypes.c_uint32),
        ("user_addr", ctypes.c_uint64),
    ]


class _Params(ctypes.Structure):
    _fields_ = [
        ("sq_entries", ctypes.c_uint32), ("cq_entries", ctypes.c_uint32),
        ("flags", ctypes.c_uint32), ("sq_thread_cpu", ctypes.c_uint32),
        ("sq_thread_idle", ctypes.c_uint32), ("features", ctypes.c_uint32),
        ("wq_fd", ctypes.c_uint32), ("resv", ctypes.c_uint32 * 3),
        ("sq_off", _SqOffsets), ("cq_off", _CqOffsets),
    ]


def _check(ret):
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


class Ring:
    """Submission/completion rings for positional reads."""

    def __init__(self, entries, sq_poll_idle_ms=0):
        params = _Params()
        self.kernel_submit = sq_poll_idle_ms > 0
        if self.kernel_submit:
            params.flags = _SETUP_SQPOLL
            params.sq_thread_idle = int(sq_poll_idle_ms)
        self.fd = _check(_syscall(_NR_SETUP, ctypes.c_uint(entries), ctypes.byref(params)))
        sq_off, cq_off = params.sq_off, params.cq_off
        sq_size = sq_off.array + params.sq_entries * 4
        cq_size = cq_off.cqes + params.cq_entries * _CQE.size
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        flags = mmap.MAP_SHARED | mmap.MAP_POPULATE
        if params.features & _FEAT_SINGLE_MMAP:
            size = max(sq_size, cq_size)
            self._sq = mmap.mmap(self.fd, size, flags, prot, offset=_OFF_SQ_RING)
            self._cq = self._sq
        else:
            self._sq = mmap.mmap(self.fd, sq_size, flags, prot, offset=_OFF_SQ_RING)
            self._cq = mmap.mmap(self.fd, cq_size, flags, prot, offset=_OFF_CQ_RING)
        self._sqes = mmap.mmap(self.fd, params.sq_entries * _SQE.size, flags, prot, offset=_OFF_SQES)
        self._sq_off, self._cq_off = sq_off, cq_off
        self._sq_mask = _U32.unpack_from(self._sq, sq_off.ring_mask)[0]
        self._cq_mask = _U32.unpack_from(self._cq, cq_off.ring_mask)[0]
        self.sq_entries = params.sq_entries
        self._tail = _U32.unpack_from(self._sq, sq_off.tail)[0]

    def _enter(self, to_submit, min_complete, flags):
        while True:
            ret = _syscall(_NR_ENTER, ctypes.c_int(self.fd), ctypes.c_uint(to_submit),
                           ctypes.c_uint(min_complete), ctypes.c_uint(flags),
                           ctypes.c_void_p(None), ctypes.c_size_t(0))
            if ret >= 0:
                return ret
            err = ctypes.get_errno()
            if err != 4:
                raise OSError(err, os.strerror(err))

    def read_many(self, requests):
        """requests: list of (fd, address, length, offset). Returns byte counts."""
        results = [0] * len(requests)
        pos = 0
        while pos < len(requests):
            chunk = requests[pos:pos + self.sq_entries]
            tail = self._tail
            for i, (fd, addr, length, offset) in enumerate(chunk):
                idx = tail & self._sq_mask
                _SQE.pack_into(self._sqes, idx * _SQE.size, _OP_READ, 0, 0, fd, offset,
                               addr, length, 0, pos + i, 0, 0, 0, 0, 0)
                _U32.pack_into(self._sq, self._sq_off.array + idx * 4, idx)
                tail = (tail + 1) & 0xFFFFFFFF
            self._tail = tail
            _U32.pack_into(self._sq, self._sq_off.tail, tail)
            n = len(chunk)
            if self.kernel_submit:
                enter_flags = _ENTER_GETEVENTS | _ENTER_SQ_WAKEUP
                done = self._reap(results)
                while done < n:
                    self._enter(0, n - done, enter_flags)
                    enter_flags &= ~_ENTER_SQ_WAKEUP
                    done += self._reap(results)
            else:
                self._enter(n, n, _ENTER_GETEVENTS)
                done = self._reap(results)
                while done < n:
                    self._enter(0, n - done, _ENTER_GETEVENTS)
                    done += self._reap(results)
            pos += n
        return results

    def _reap(self, results):
        head = _U32.unpack_from(self._cq, self._cq_off.head)[0]
        tail = _U32.unpack_from(self._cq, self._cq_off.tail)[0]
        count = 0
        while head != tail:
            off = self._cq_off.cqes + (head & self._cq_mask) * _CQE.size
            user_data, res, _flags = _CQE.unpack_from(self._cq, off)
            if res < 0:
                raise OSError(-res, os.strerror(-res))
            results[user_data] = res
            head = (head + 1) & 0xFFFFFFFF
            count += 1
        _U32.pack_into(self._cq, self._cq_off.head, head)
        return count

    def close(self):
        for m in {id(self._sq): self._sq, id(self._cq): self._cq, id(self._sqes): self._sqes}.values():
            m.close()
        os.close(self.fd)
