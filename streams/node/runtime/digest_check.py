"""A stored snapshot's digest, checked after the shard serves, at the lowest CPU priority.

Reading a snapshot back checks, before anything serves: the file's SHA-256 (every chunk there,
the bytes the node published, `streams.kafka.snapshot_chunks`), each block's CRC against its
payload, the order of the records and their counts against the trailer. One check is left: the
loaded state's digest against the digest the writer recorded in the trailer, an end-to-end check
of the format (a state that reads back other than it was written). It is the costly one: 1.5 s of
CPU per million entries of two fields, three quarters of loading a 1M-entry shard, and with three
regions starting at once on two cores the part that kept a restart above 10 s
(docs/durability.md, "Where a restart's time goes").

So a shard that boots from its snapshot store serves once the state and the tails are read, and
the digest is checked by a forked child, on its copy-on-write image of the state exactly as it was
read (the fork happens before any tail op touches it), under SCHED_IDLE: it takes only the CPU
the start leaves. On a mismatch the loader logs an error, refuses that snapshot and re-reads the
state in the background (`Loader.reload`: the previous snapshot, else every log from its start)
and switches over; until then the shard served the snapshot's state, and it takes no snapshot of its
own while the check is pending (a wrong state must not be stored under a digest of its own). A
re-read and a `--snapshot FILE` boot check the digest before they serve, as before.
"""

from __future__ import annotations

import enum
import os
import signal
import threading
from collections.abc import Callable

from streams.crdt.region import Region


class DigestCheck(enum.Enum):
    """How a deferred check ended."""

    MATCH = 0
    MISMATCH = 1
    FAILED = 2
    """The child could not compute the digest (out of memory, killed): nothing is known."""
    CANCELLED = 3
    """The node stopped first."""


def fork_check(region: Region, digest: str) -> int:
    """Fork a child that compares `region`'s digest with `digest` and exits with the
    `DigestCheck` value; returns its pid. Call it before anything else holds `region`: the child
    checks the state as it was at the fork."""
    pid = os.fork()
    if pid == 0:  # the child: pure Python on its copy of the state, then leave without cleanup
        status = DigestCheck.FAILED.value
        try:
            _lowest_priority()
            matches = region.state.digest() == digest
            status = (DigestCheck.MATCH if matches else DigestCheck.MISMATCH).value
        finally:
            os._exit(status)
    return pid


def _lowest_priority() -> None:
    """SCHED_IDLE where the kernel has it (Linux: the child runs only on CPU nothing else
    wants), else nice 19, which still took a share of the start's CPU: three regions of
    1,000,000 entries served after 8.7-9.2 s with it, 7.4-8.7 s under SCHED_IDLE."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


class PendingCheck:
    """A checking child, reaped on a thread of its own; `on_done(outcome)` runs on that thread
    (the loader hands it to its event loop)."""

    def __init__(self, pid: int, on_done: Callable[[DigestCheck], None]) -> None:
        self.pid = pid
        self._on_done = on_done
        self._cancelled = False
        # A pidfd names this child even after it is reaped (a pid could be reused): `cancel`
        # never signals another process.
        self._pidfd: int | None = os.pidfd_open(pid)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._wait, name=f"digest-check-{pid}", daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        _pid, status = os.waitpid(self.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        with self._lock:
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        if self._cancelled:
            outcome = DigestCheck.CANCELLED
        elif code in (DigestCheck.MATCH.value, DigestCheck.MISMATCH.value):
            outcome = DigestCheck(code)
        else:
            outcome = DigestCheck.FAILED
        self._on_done(outcome)

    def cancel(self) -> None:
        """Stop the child (the node stops); `on_done` gets CANCELLED."""
        self._cancelled = True
        with self._lock:
            if self._pidfd is not None:  # not reaped yet
                try:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # exited, not yet reaped
        self._thread.join(timeout=5.0)
