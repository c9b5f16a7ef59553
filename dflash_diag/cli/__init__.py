"""The ``dflash-diag`` command: one module per subcommand, each a class with a docstring and two methods.

The subcommand's name comes from its class name (``TopCommand`` -> ``top``), its help from the docstring.
A :class:`~dflash_diag.errors.DflashDiagError` becomes one line on stderr and its exit code.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from typing import Protocol

from dflash_diag import __version__
from dflash_diag.errors import DflashDiagError, ExitCode


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
    parser = argparse.ArgumentParser(
        prog="dflash-diag",
        description="See where the threads of a PyTorch training process spend their time, and why it is slow.",
        epilog="Run 'dflash-diag COMMAND --help' for the options of one command. Docs: docs/cli.md",
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
        p.set_defaults(entrypoint=command.run, subparser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return ExitCode.USAGE
    try:
        return int(args.entrypoint(args, args.subparser) or 0)
    except DflashDiagError as exc:
        print(f"dflash-diag {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
