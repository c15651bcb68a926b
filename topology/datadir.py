"""A data directory a topology runs on: one `streams up` at a time (`DataDirLock`), and starting
its processes side by side (`in_parallel`)."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable
from pathlib import Path

LOCK_FILE = "LOCK"


class DataDirInUse(RuntimeError):
    """Another `streams up` holds the data directory."""


class DataDirLock:
    """An exclusive `flock` on `<data dir>/LOCK`, held while a topology runs on the directory.

    The lock belongs to the open file description; the file names the holder's pid for the error
    message. (A broker left running by a `streams up` that was SIGKILLed holds its own log dir's
    lock: a broker started beside it on the same directory refuses to start.)
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise DataDirInUse(
                f"data directory {self.path.parent} is in use (pid {holder} locked it): stop that"
                " `streams up` first, or give another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)  # the lock goes with the last descriptor (children's included)


def in_parallel(calls: list[Callable[[], None]]) -> None:
    """Run `calls` on threads of their own; raise the first failure once all have ended."""
    failures: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as exc:  # reported below, on the caller's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
