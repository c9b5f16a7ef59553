"""`dflash-diag board` (being built: see the issue that owns it)."""

from __future__ import annotations

import argparse

from dflash_diag.errors import CommandError


class BoardCommand:
    """Not available yet in this build."""

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        raise CommandError("'board' is not available in this build yet")
