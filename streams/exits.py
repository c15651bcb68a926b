"""The exit statuses of the `streams` command, one meaning each, and the wrapper that keeps them.

Why one table: scripts branch on these numbers, so a number must mean one thing across verbs.
Before it, argparse's usage errors exited 2, the status the replay verbs document for a corrupt
record, an unreachable cluster exited 3 like an unresolvable position, and a closed stdout
(`streams log ... | head -1`) printed a traceback or "[Errno 32] Broken pipe" and exited 3.

- A closed stdout ends the command quietly with 141, what a shell reports for a process killed
  by SIGPIPE (`seq 1000000 | head -1` under `set -o pipefail`): the reader went away, which is
  no error of ours, but the output is incomplete, so it is not 0 either. The exit is a normal
  one (the `finally` blocks run: consumers are closed, temporary files removed).
- Ctrl-C (SIGINT, KeyboardInterrupt) exits 130 (128 + SIGINT) without a traceback.
- Usage errors exit 64 (EX_USAGE of sysexits.h), not argparse's 2.

`epilog(...)` writes the list a verb's `--help` ends with; `ArgumentParser` is argparse's with
usage errors exiting `USAGE`; `guarded(main)` maps a closed stdout and Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn

OK = 0
DIFFERS = 1
CORRUPT = 2
UNRESOLVED = 3
UNREACHABLE = 4
FAILED = 5
USAGE = 64
INTERRUPTED = 130
PIPE_CLOSED = 141

MEANING: dict[int, str] = {
    OK: "done (equal)",
    DIFFERS: "differs (diff, spark audit), a seed table failed (demo), a node reports a fault "
    "(status), a target key holds other data than the source's stream (import)",
    CORRUPT: "a corrupt record or a state built over skipped records (tainted)",
    UNRESOLVED: "a position, region, topic, shard, key, group, snapshot or topology file that "
    "cannot be resolved",
    UNREACHABLE: "no Kafka broker (or node) answered, or the cluster stopped answering",
    FAILED: "the job failed (Spark, the data source, or a topology that did not start; import: "
    "the target refused the writes)",
    USAGE: "usage error (unknown option, missing or conflicting arguments)",
    INTERRUPTED: "interrupted (Ctrl-C)",
    PIPE_CLOSED: "stdout was closed before the output ended (e.g. `| head -1`)",
}
ALWAYS = (USAGE, INTERRUPTED, PIPE_CLOSED)
"""Every verb can exit with these."""


EPILOG_HEAD = "exit status:"


def epilog(*codes: int) -> str:
    """The `exit status:` table a verb's `--help` ends with: 0, `codes`, and `ALWAYS`."""
    listed = sorted({OK, *codes, *ALWAYS})
    return "\n".join([EPILOG_HEAD, *(f"{code:>5}  {MEANING[code]}" for code in listed)])


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that the exit-status table keeps one line per status."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if not text.startswith(EPILOG_HEAD):
            return super()._fill_text(text, width, indent)
        head, *rows = text.splitlines()
        lines = [indent + head]
        for row in rows:
            lines += textwrap.wrap(
                row, width, initial_indent=indent, subsequent_indent=indent + " " * 7
            )
        return "\n".join(lines)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors exit `USAGE` (64) instead of 2 and whose help
    shows the exit-status table as a table. Subparsers made with `add_subparsers().add_parser`
    are of the same class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def guarded(main: Callable[[], int]) -> int:
    """Run `main`; a closed stdout gives `PIPE_CLOSED` and Ctrl-C `INTERRUPTED`, quietly."""
    try:
        code = main()
        sys.stdout.flush()  # here, not at interpreter exit, where EPIPE would print a warning
        return code
    except BrokenPipeError:
        _drop_stdout()
        return PIPE_CLOSED
    except KeyboardInterrupt:
        return INTERRUPTED


def _drop_stdout() -> None:
    """Point stdout at /dev/null: Python flushes it again at exit, and the pipe is gone (the
    way the `signal` module's documentation handles SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass
