"""`dflash-diag attach` / `detach`: starting (or stopping) the probes inside a running CPython process.

The one part of dflash-diag that writes into another process (``sources/`` only reads), so it is a package of
its own, a module per job, imported by the commands only (docs/architecture.md):

- ``preflight``: everything /proc tells before anything touches the process (refusals with their fix);
- ``method``: ``--method`` and what is installed (``auto``: the first that works here);
- ``request``: the control and result files of a request, the lease, the note of the page in the process;
- ``program``: the fixed program the process runs, and its page;
- ``nudge``: when a main thread parked in a Python lock wait is woken with EINTR;
- ``lifetime``: the helper processes die with the command; a process left stopped is resumed;
- the methods: ``gdb`` (gdb and cuda-gdb), ``lldb``, ``remote_exec`` (Python 3.14);
- ``injection``: one injection in flight and its outcome; ``orchestrate``: ``inject()``, the whole of it.

The protocol both sides of the attach speak (schema, actions, file names) is ``dflash_contract.attach``.
docs/attach.md tells how it works and what can go wrong.
"""
