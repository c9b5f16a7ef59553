# platform_compat.py -- process-level knobs for the runners we deploy on.
#
# Our CI and some customer boxes run jobs under a user-mode sandbox (gVisor /
# qemu-user) where vfork() in a threaded parent has bitten us: children
# occasionally came up with a corrupted stack.  CPython >= 3.11 lets a program
# opt out of vfork for subprocess; we do that by default and let the bare-metal
# training boxes opt back in.
import os
import subprocess

DEFAULT_CHILD_SPAWN = os.environ.get("RETAIL_CHILD_SPAWN", "fork")


def apply(child_spawn=None):
    mode = child_spawn or DEFAULT_CHILD_SPAWN
    subprocess._USE_VFORK = (mode == "vfork")
    return mode
