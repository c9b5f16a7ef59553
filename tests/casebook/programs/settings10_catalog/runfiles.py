"""Launcher for the job's Python dependencies, laid out the way the monorepo's build tool stages them.

Every first-party library target is staged in its own directory of a runfiles tree:

    per-target  each target's directory goes on sys.path (the build tool's default 'imports' layout: one sys.path
                entry per target, several hundred for this binary)
    merged      the targets' packages are linked into one site directory, one sys.path entry
"""
import atexit
import os
import shutil
import sys
import tempfile

N_TARGETS = 160
LAYOUTS = ("per-target", "merged")


def _stage(root):
    """The staged targets: a package per target (lib_<i>), plus the catalog schema this job uses."""
    for i in range(N_TARGETS):
        pkg = os.path.join(root, "targets", f"t{i:03d}", f"lib_{i:03d}")
        os.makedirs(pkg, exist_ok=True)
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write(f"TARGET = {i}\n")
    schema = os.path.join(root, "targets", "t_schema", "catalog_schema")
    os.makedirs(schema, exist_ok=True)
    with open(os.path.join(schema, "__init__.py"), "w") as f:
        f.write("FIELDS = ('sku', 'title', 'brand', 'category', 'price', 'attrs', 'views', 'buys')\n"
                "CATEGORIES = tuple(f'cat{i:02d}' for i in range(40))\n")


def setup(layout):
    if layout not in LAYOUTS:
        raise ValueError(layout)
    root = tempfile.mkdtemp(prefix="runfiles-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    _stage(root)
    targets = sorted(os.listdir(os.path.join(root, "targets")))
    if layout == "per-target":
        entries = [os.path.join(root, "targets", t) for t in targets]
    else:
        site = os.path.join(root, "site")
        os.makedirs(site)
        for t in targets:
            for name in os.listdir(os.path.join(root, "targets", t)):
                os.symlink(os.path.join(root, "targets", t, name), os.path.join(site, name))
        entries = [site]
    sys.path[1:1] = entries       # after the script's own directory, before the interpreter's site-packages
    return root, len(entries)
