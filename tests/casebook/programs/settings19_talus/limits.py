"""Puts the waveform decoder worker in a cgroup of its own with a CPU bandwidth limit
(the CFS quota a container runtime sets for --cpus): cgroup v1 cpu controller
(cpu.cfs_quota_us / cpu.cfs_period_us) or cgroup v2 (cpu.max)."""
import os
import sys

V1_ROOT = "/sys/fs/cgroup/cpu"
V2_ROOT = "/sys/fs/cgroup"
PREFIX = "rockfall-decoder-"


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def _root():
    if os.path.exists(os.path.join(V1_ROOT, "cpu.cfs_quota_us")):
        return V1_ROOT, 1
    if os.path.exists(os.path.join(V2_ROOT, "cgroup.controllers")):
        return V2_ROOT, 2
    return None, 0


def sweep_stale():
    """Removes the (empty) cgroups that earlier runs left behind."""
    root, _ = _root()
    if root is None:
        return
    for name in os.listdir(root):
        if not name.startswith(PREFIX):
            continue
        try:
            owner = int(name[len(PREFIX):])
        except ValueError:
            continue
        if owner != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(root, name))
            except OSError:
                pass


def confine(pid, limits):
    """Moves pid into <root>/rockfall-decoder-<our pid> with a quota of
    limits['decoder_cpus'] CPUs per limits['period_ms'] period. Returns the cgroup path
    (or None where cgroups cannot be written)."""
    root, version = _root()
    if root is None:
        print("limits: no cgroup cpu controller; decoder not confined", file=sys.stderr)
        return None
    path = os.path.join(root, f"{PREFIX}{os.getpid()}")
    period = int(limits.get("period_ms", 100) * 1000)
    quota = int(float(limits["decoder_cpus"]) * period)
    try:
        os.makedirs(path, exist_ok=True)
        if version == 1:
            _write(os.path.join(path, "cpu.cfs_period_us"), period)
            _write(os.path.join(path, "cpu.cfs_quota_us"), quota)
        else:
            _write(os.path.join(path, "cpu.max"), f"{quota} {period}")
        _write(os.path.join(path, "cgroup.procs"), pid)
    except OSError as e:
        print(f"limits: cannot confine the decoder ({e})", file=sys.stderr)
        return None
    return path


def release(path):
    if path:
        try:
            os.rmdir(path)
        except OSError:
            pass
