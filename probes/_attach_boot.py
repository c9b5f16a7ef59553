"""The fixed bootstrap `dflash-diag attach` / `detach` run inside a live Python process (docs/attach.md).

It is executed, never imported: a pending call of ``PyRun_SimpleString`` (queued by the ptrace driver or a
debugger) or Python 3.14's ``sys.remote_exec`` runs a fixed one-statement program that execs this file with
one global, ``CONTROL``: the path of a private (0600) control file the ``dflash-diag`` command wrote. Nothing the user typed is
ever part of the code that runs; the control file's values are validated here again (an enum of actions,
the known probe names, absolute paths, this very PID, a deadline).

Steps: claim the control file (rename: a command that timed out cancels by deleting it first, so a late
run does nothing), load the ``probes`` package this file belongs to (or the copy the process already
imported, when its version is the same: refused otherwise), run ``probes.attach.run`` and write the result
file (0600, atomic). The protocol (schema, actions, file names, the checks) is ``dflash_contract/attach.py``,
loaded by its path from this installation. Standard library only; no exception leaves this file (the pending
call must return 0, and an exception there would surface in the program); a KeyboardInterrupt that arrives
meanwhile is re-delivered to the main thread.
"""


def _dflash_diag_attach_main(control_path: str) -> None:
    import importlib.util
    import json
    import os
    import re
    import stat
    import sys

    here = os.path.dirname(os.path.abspath(__file__))  # .../probes
    # The protocol (dflash_contract/attach.py) of this very installation, loaded by its path: nothing of the
    # program's own import path decides what this file checks.
    spec = importlib.util.spec_from_file_location(
        "_dflash_diag_attach_contract", os.path.join(os.path.dirname(here), "dflash_contract", "attach.py"))
    if spec is None or spec.loader is None:
        return
    contract = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(contract)
    result: dict = {"schema": contract.SCHEMA, "ok": False, "error": None}
    claimed = control_path + contract.CLAIMED_SUFFIX
    try:
        os.rename(control_path, claimed)
    except OSError:
        return  # cancelled by the command (timed out), or already run: nothing to do, nothing to say

    def read_control() -> dict:
        fd = os.open(claimed, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise ValueError("control file is not a private regular file of this user")
            if st.st_size > contract.MAX_CONTROL_BYTES:
                raise ValueError("control file too large")
            data = os.read(fd, contract.MAX_CONTROL_BYTES + 1)
        finally:
            os.close(fd)
            try:
                os.unlink(claimed)
            except OSError:
                pass
        value = json.loads(data)
        if not isinstance(value, dict):
            raise ValueError("control file is not a JSON object")
        return value

    def declared_version(init_file: str) -> str | None:
        try:
            with open(init_file, encoding="utf-8") as fh:
                text = fh.read(65536)
        except OSError:
            return None
        m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
        return m.group(1) if m else None

    def load_probes(version: str) -> tuple[object, str]:
        import importlib.machinery
        import importlib.util

        mod = sys.modules.get("probes")
        if mod is not None:
            theirs = getattr(mod, "__version__", None)
            if theirs != version or not hasattr(mod, "start"):
                where = getattr(mod, "__file__", "?")
                raise ImportError(f"this process already imported a 'probes' module ({where}, version {theirs}); "
                                  f"this dflash-diag is {version}: attach with the dflash-diag installed with that copy")
            return mod, f"already imported ({getattr(mod, '__file__', '?')})"
        spec = importlib.machinery.PathFinder.find_spec("probes", sys.path)
        if spec is not None and spec.origin and os.path.realpath(os.path.dirname(spec.origin)) != os.path.realpath(here):
            theirs = declared_version(spec.origin)
            if theirs != version:
                raise ImportError(f"a different 'probes' package is importable in this process ({spec.origin}, "
                                  f"version {theirs}); loading ours ({version}) would shadow it")
            import importlib

            return importlib.import_module("probes"), f"the process's own copy ({spec.origin})"
        init = os.path.join(here, "__init__.py")
        if declared_version(init) != version:
            raise ImportError(f"{init} is not version {version}: reinstall dflash-diag")
        spec = importlib.util.spec_from_file_location("probes", init, submodule_search_locations=[here])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {init}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["probes"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop("probes", None)
            raise
        return module, f"loaded from {here}"

    def write_result(path: str) -> None:
        data = json.dumps(result, default=str, allow_nan=False).encode()
        tmp = path + contract.TMP_SUFFIX
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)

    interrupted = False
    result_path = None
    try:
        control = read_control()
        if contract.is_result_path(control.get("result_path"), control_path):
            result_path = control["result_path"]
        result["nonce"] = control.get("nonce")
        contract.check_control(control, os.getpid())
        module, how = load_probes(control["version"])
        import importlib

        attach = importlib.import_module("probes.attach")
        result["loaded"] = how
        result["python"] = sys.version.split()[0]
        result.update(attach.run(
            control["action"], names=frozenset(control["probes"]), board_dir=control.get("board_dir"),
            discover=bool(control.get("discover", True)),
            attacher={"method": str(control.get("method", ""))[:32], "by_pid": control.get("attacher_pid")},
            lease=control.get("lease"), kernels=control.get("kernels"),
            files_prefix=contract.kernels_prefix(control_path) if control["action"] == "kernels" else None,
        ))
    except KeyboardInterrupt:
        interrupted = True
        result["error"] = "interrupted by KeyboardInterrupt (passed on to the program)"
    except BaseException as exc:  # nothing may escape into the program
        result["error"] = f"{type(exc).__name__}: {exc}"[:500]
    if result_path is not None:
        try:
            write_result(result_path)
        except BaseException:
            pass
    if interrupted:
        import _thread

        _thread.interrupt_main()  # the program's Ctrl-C arrived while we ran: it gets it, a moment later


try:
    _dflash_diag_attach_main(CONTROL)  # type: ignore[name-defined]  # noqa: F821 - set by the program that execs this file
except BaseException:
    pass
