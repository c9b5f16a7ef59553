"""Block-I/O limits for the scan reader (cgroup v1 blkio controller).

The shared core-lab node caps what each job's reader may pull from the local disk; the limits come from the
profile's [io] table and are applied to a blkio cgroup of the reader's own."""
import os

BLKIO_ROOT = "/sys/fs/cgroup/blkio"
PREFIX = "kame-reader-"


def disk_of(path):
    """major:minor of the whole disk that holds `path` (throttle rules are per disk, not per partition)."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    sysdir = os.path.realpath(f"/sys/dev/block/{major}:{minor}")
    if os.path.exists(os.path.join(sysdir, "partition")):
        with open(os.path.join(os.path.dirname(sysdir), "dev")) as f:
            return f.read().strip()
    return f"{major}:{minor}"


def sweep_stale():
    if not os.path.isdir(BLKIO_ROOT):
        return
    for name in os.listdir(BLKIO_ROOT):
        if name.startswith(PREFIX):
            owner = name[len(PREFIX):]
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                try:
                    os.rmdir(os.path.join(BLKIO_ROOT, name))
                except OSError:
                    pass


class ReaderGroup:
    def __init__(self, data_dir, read_mbps, write_mbps):
        self.path = os.path.join(BLKIO_ROOT, f"{PREFIX}{os.getpid()}")
        self.dev = disk_of(data_dir)
        self.read_bps = int(read_mbps * 1024 * 1024)
        self.write_bps = int(write_mbps * 1024 * 1024)
        self.ok = False

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def create(self):
        try:
            os.makedirs(self.path, exist_ok=True)
            if self.read_bps > 0:
                self._write("blkio.throttle.read_bps_device", f"{self.dev} {self.read_bps}")
            if self.write_bps > 0:
                self._write("blkio.throttle.write_bps_device", f"{self.dev} {self.write_bps}")
            self.ok = True
        except OSError as e:
            print(f"[iolimits] blkio limits not applied: {e}", flush=True)
        return self

    def attach(self, pid):
        if self.ok:
            self._write("cgroup.procs", str(pid))

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass
