"""Native runtime setup. Must run before `import torch`.

Native libraries (MKL, oneDNN, OpenMP) print to the C-level stdout.  We route
fd 1 through a pipe into the `native` logger (file handler in the run dir), so
stdout stays clean for progress lines and native messages get timestamps.
"""
import logging
import logging.handlers
import os
import sys
import threading

NATIVE_ENV = {
    # MKL call tracing; our cluster template has it on so the perf team can
    # check which GEMM shapes the sonar net actually produces.
    "trace": {"MKL_VERBOSE": "1"},
    "quiet": {"MKL_VERBOSE": "0"},
}


def _pump(fd, log):
    pending = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line:
                log.info("%s", line.decode("utf-8", "replace"))


def prepare(run_dir, native_trace="trace"):
    for k, v in NATIVE_ENV[native_trace].items():
        os.environ[k] = v
    log = logging.getLogger("native")
    log.setLevel(logging.INFO)
    log.propagate = False
    h = logging.handlers.RotatingFileHandler(os.path.join(run_dir, "native.log"), maxBytes=32 << 20, backupCount=1)
    h.setFormatter(logging.Formatter("%(asctime)s [%(name)s] %(message)s"))
    log.addHandler(h)

    keep = os.dup(1)
    r, w = os.pipe()
    os.dup2(w, 1)
    os.close(w)
    sys.stdout = os.fdopen(keep, "w", buffering=1)
    threading.Thread(target=_pump, args=(r, log), name="native-log", daemon=True).start()
