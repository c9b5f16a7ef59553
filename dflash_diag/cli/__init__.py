"""The ``dflash-diag`` command: one module per subcommand, each a class with a docstring and two methods.

The subcommand's name comes from its class name (``TopCommand`` -> ``top``), its help from the docstring.
A :class:`~dflash_diag.errors.DflashDiagError` becomes one line on stderr and its exit code; so does a bad
argument (exit 2). Output cut short by a closed pipe (``| head``) ends quietly with exit code 141 (128+SIGPIPE).
Ctrl-C at any moment, the first fraction of a second included (while the commands' modules load), ends the
command with exit code 130 and no traceback: this module imports almost nothing before :func:`main` runs (it is
what the ``dflash-diag`` script imports first), and :func:`main` catches the interrupt around everything else.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING, Protocol

from dflash_diag.errors import DflashDiagError, ExitCode, Terminated

if TYPE_CHECKING:
    import argparse

EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE: the reader of our output went away, as `| head` does
EXIT_INTERRUPTED = 128 + 2  # SIGINT: Ctrl-C


class Command(Protocol):
    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int: ...


# (module, class) pairs, in the order `--help` lists them. Modules are imported lazily so that
# `dflash-diag --help` works without textual/torch importable.
_COMMANDS: tuple[tuple[str, str], ...] = (
    ("dflash_diag.cli.top", "TopCommand"),
    ("dflash_diag.cli.doctor", "DoctorCommand"),
    ("dflash_diag.cli.snapshot", "SnapshotCommand"),
    ("dflash_diag.cli.record", "RecordCommand"),
    ("dflash_diag.cli.export", "ExportCommand"),
    ("dflash_diag.cli.diff", "DiffCommand"),
    ("dflash_diag.cli.run", "RunCommand"),
    ("dflash_diag.cli.attach", "AttachCommand"),
    ("dflash_diag.cli.attach", "DetachCommand"),
    ("dflash_diag.cli.board", "BoardCommand"),
)


def _command_name(class_name: str) -> str:
    return class_name[: -len("Command")].lower()


def build_parser() -> argparse.ArgumentParser:
    import argparse
    import importlib
    import inspect

    from dflash_diag import __version__
    from dflash_diag.cli._output import OneLineParser

    parser = OneLineParser(
        prog="dflash-diag",
        description="See where the threads of a PyTorch training process spend their time, and why it is slow.",
        epilog="Run 'dflash-diag COMMAND --help' for the options of one command. Docs: README.md and docs/.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name, class_name in _COMMANDS:
        command: Command = getattr(importlib.import_module(module_name), class_name)()
        doc = inspect.cleandoc(type(command).__doc__ or "")
        summary = doc.splitlines()[0] if doc else ""
        p = sub.add_parser(
            _command_name(class_name),
            help=summary,
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.prepare_parser(p)
        p.set_defaults(entrypoint=command.run, subparser=p, command_name=_command_name(class_name))
    return parser


# The packages dflash-diag itself depends on (pyproject's dependencies and the nvml extra), by import name:
# installed with `pip install --no-deps .` into an environment that lacks one, a command says which, in one line.
DEPENDENCIES = {"rich": "rich", "textual": "textual", "prometheus_client": "prometheus-client", "pynvml": "nvidia-ml-py"}


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # anywhere: loading the commands, parsing, or a command without its own handling
        return EXIT_INTERRUPTED
    except ModuleNotFoundError as exc:
        package = DEPENDENCIES.get((exc.name or "").split(".", 1)[0])
        if package is None:
            raise
        print(f"dflash-diag: error: the Python package {package} is missing from this environment: "
              f"`pip install {package}` (or install dflash-diag without --no-deps)", file=sys.stderr)
        return ExitCode.MISSING_TOOL
    except BrokenPipeError:
        return _quiet_after_broken_pipe()
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            return _quiet_after_broken_pipe()
        raise


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, a usage error (already printed in one line)
        return exc.code if isinstance(exc.code, int) else ExitCode.USAGE
    if getattr(args, "command_name", None) is None:
        parser.print_help()
        return ExitCode.USAGE
    try:
        return int(args.entrypoint(args, args.subparser) or 0)
    except DflashDiagError as exc:
        from dflash_diag.cli._output import shown

        print(f"dflash-diag {args.command_name}: error: {shown(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Terminated as exc:  # SIGTERM/SIGHUP, handled like Ctrl-C by the commands that install probes
        return 128 + exc.signum


def _quiet_after_broken_pipe() -> int:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again, and exit 141."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE
