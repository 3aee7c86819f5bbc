"""The command line's exit codes and its argument parser, apart from the flags (app/cliargs.py) so that
`gemm-gen --help` and the dispatcher (app/cli.py) load nothing else of the package."""

from __future__ import annotations

import argparse
from typing import NoReturn

EXIT_FAIL, EXIT_USAGE = 1, 2


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + message
        if message.endswith("expected one argument"):  # argparse takes "-1,1" or "-5x4x4" for a flag
            message += " (a value that starts with '-' is written --flag=VALUE)"
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
