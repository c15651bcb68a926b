"""The `streams` command run as a user runs it: a subprocess, its stdout a pipe or a pipe closed
early (what `| head -1` does), its stderr read whole, and how long it took."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Ran:
    argv: list[str]
    code: int
    out: str
    err: str
    seconds: float

    def __str__(self) -> str:
        return (
            f"streams {' '.join(self.argv)}: exit {self.code} in {self.seconds:.1f}s\n"
            f"stdout: {self.out[:2000]!r}\nstderr: {self.err[-3000:]!r}"
        )

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def env() -> dict[str, str]:
    """The checkout on the path, whatever the working directory."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def command(argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "streams.cli", *argv]


def run(argv: Sequence[str], cwd: Path, *, closed_stdout: bool = False, timeout: float = 60) -> Ran:
    """`streams <argv>` in `cwd`. With `closed_stdout` its stdout is a pipe whose reader has
    gone before it writes: the first write fails as it does under `| head -1`."""
    started = time.monotonic()
    if closed_stdout:
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = subprocess.run(
                command(argv),
                cwd=cwd,
                env=env(),
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                timeout=timeout,
            )
        finally:
            os.close(write_end)
        return Ran(list(argv), done.returncode, "", done.stderr, time.monotonic() - started)
    done = subprocess.run(
        command(argv), cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout
    )
    return Ran(list(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def head_1(argv: Sequence[str], cwd: Path, timeout: float = 120) -> Ran:
    """`streams <argv> | head -1` in bash: the exit status is the command's (PIPESTATUS)."""
    quoted = " ".join(_quote(a) for a in command(argv))
    script = f"{quoted} | head -1; exit ${{PIPESTATUS[0]}}"
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout
    )
    return Ran(list(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def interrupted(
    argv: Sequence[str], cwd: Path, ready: Callable[[], None], *, first_line_within: float = 0
) -> tuple[Ran, float]:
    """`streams <argv>`, Ctrl-C (SIGINT) once `ready()` returns; returns the run and how long
    it took to end after the signal. With `first_line_within`, first waits (up to that many
    seconds) for the command's first line on stdout, which is kept in `Ran.out`: a command that
    starts slowly on a busy machine is then not interrupted before it has printed anything."""
    started = time.monotonic()
    proc = subprocess.Popen(
        command(argv),
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out = _Drain(proc.stdout)
    err = _Drain(proc.stderr)
    if first_line_within:
        out.first_line.wait(first_line_within)
    ready()
    signalled = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    ended = time.monotonic()
    ran = Ran(list(argv), proc.returncode, out.text(), err.text(), ended - started)
    return ran, ended - signalled


class _Drain:
    """Reads a child's pipe to its end on a thread (a pipe read has no timeout of its own) and
    says when the first line has come."""

    def __init__(self, pipe: IO[str]) -> None:
        self._pipe = pipe
        self._parts: list[str] = []
        self.first_line = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        self._parts.append(self._pipe.readline())
        self.first_line.set()
        self._parts.append(self._pipe.read())

    def text(self) -> str:
        self._thread.join(30)
        return "".join(self._parts)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"
