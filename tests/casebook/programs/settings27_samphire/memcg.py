"""Memory cgroup for the tile reader (cgroup v1 memory controller, or v2 memory.max): the site's
batch system runs every I/O helper under a memory limit of its own."""
import os

V1 = "/sys/fs/cgroup/memory"
V2 = "/sys/fs/cgroup"
PREFIX = "samphire-reader-"


def _root():
    if os.path.exists(os.path.join(V1, "memory.limit_in_bytes")):
        return V1, 1
    if os.path.exists(os.path.join(V2, "cgroup.controllers")):
        return V2, 2
    return None, 0


def sweep_stale():
    root, _ = _root()
    if root is None:
        return
    for name in os.listdir(root):
        if name.startswith(PREFIX):
            owner = name[len(PREFIX):]
            if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                try:
                    os.rmdir(os.path.join(root, name))
                except OSError:
                    pass


def create(limit_mb, swappiness):
    """Makes <root>/samphire-reader-<pid> with the given limit; returns its path or None."""
    root, version = _root()
    if root is None:
        return None
    path = os.path.join(root, f"{PREFIX}{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    limit = int(limit_mb) << 20
    if version == 1:
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        try:
            with open(os.path.join(path, "memory.swappiness"), "w") as f:
                f.write(str(swappiness))
        except OSError:
            pass
    else:
        with open(os.path.join(path, "memory.max"), "w") as f:
            f.write(str(limit))
    return path


def joiner(path):
    """preexec_fn for the child: moves itself into the cgroup before it execs."""
    def _join():
        if path:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    return _join


def usage_mb(path):
    for name in ("memory.usage_in_bytes", "memory.current"):
        try:
            with open(os.path.join(path, name)) as f:
                return int(f.read()) / 2**20
        except OSError:
            continue
    return float("nan")


def remove(path):
    if path:
        try:
            os.rmdir(path)
        except OSError:
            pass
