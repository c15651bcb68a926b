"""MULTI / EXEC / DISCARD: the per-connection queue and Redis 7.0's rules for it.

Between MULTI and EXEC every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is queued and
answered `+QUEUED`. A command refused at queue time (unknown command or subcommand, wrong number
of arguments, a Redis command this database does not implement, a command not allowed in a
transaction) is answered with its error and marks the transaction: EXEC then answers EXECABORT and
runs nothing. EXEC with a wrong number of arguments aborts the transaction at once, naming the
reason, as Redis does. Errors that happen while a queued command runs are returned inside EXEC's
array; the other commands still run.

The node runs the queue (`RegionNode._exec`) under one acquisition of its command lock, so no
command of another client and no op from another region is applied in between.

WATCH is not supported: regions accept writes concurrently, so a check-and-set over one region's
view would promise an isolation the database cannot give. WATCH answers a clear error; UNWATCH is
accepted (nothing is ever watched).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams import errors
from streams.errors import CommandError
from streams.reply import OK, Reply, Status
from streams.resp.server import Session

QUEUED = Status("QUEUED")
KEY = "multi"
"""`session.extra[KEY]`: the open transaction of the connection."""
RUNNING = "exec"
"""`session.extra[RUNNING]`: the number of commands of the transaction EXEC is running."""

IMMEDIATE = frozenset({b"exec", b"discard", b"multi", b"watch", b"quit", b"reset"})
"""Commands that run at once even inside MULTI (Redis's processCommand exceptions)."""


@dataclass
class Transaction:
    queued: list[list[bytes]] = field(default_factory=list)
    dirty: bool = False

    def queue(self, args: list[bytes], refusal: CommandError | None = None) -> Reply:
        """Queue a command, or (refusal given) answer the refusal and doom the transaction."""
        if refusal is not None:
            self.dirty = True
            return refusal
        self.queued.append(args)
        return QUEUED


def active(session: Session) -> Transaction | None:
    tx = session.extra.get(KEY)
    return tx if isinstance(tx, Transaction) else None


def multi(session: Session, args: list[bytes]) -> Reply:
    if active(session) is not None:
        raise CommandError(errors.MULTI_NESTED)
    session.extra[KEY] = Transaction()
    return OK


def discard(session: Session, args: list[bytes]) -> Reply:
    if session.extra.pop(KEY, None) is None:
        raise CommandError(errors.DISCARD_WITHOUT_MULTI)
    return OK


def take(session: Session) -> Transaction:
    """EXEC: end the transaction and hand over its queue, or raise the reason it cannot run."""
    tx = session.extra.pop(KEY, None)
    if not isinstance(tx, Transaction):
        raise CommandError(errors.EXEC_WITHOUT_MULTI)
    if tx.dirty:
        raise CommandError(errors.EXECABORT)
    return tx


def reject(session: Session, name: bytes, error: CommandError) -> CommandError:
    """A command refused before it could run or be queued (unknown, wrong arity): inside MULTI it
    dooms the transaction, and a refused EXEC aborts it, naming the reason."""
    tx = active(session)
    if tx is None:
        return error
    if name == b"exec":
        session.extra.pop(KEY, None)
        reason = error.text.split(" ", 1)[1] if error.code == "ERR" else error.text
        return CommandError(f"EXECABORT Transaction discarded because of: {reason}")
    tx.dirty = True
    return error


def watch(session: Session, args: list[bytes]) -> Reply:
    if active(session) is not None:
        raise CommandError(errors.WATCH_INSIDE_MULTI)
    raise CommandError(errors.WATCH_UNSUPPORTED)


def unwatch(session: Session, args: list[bytes]) -> Reply:
    return OK


def depth(session: Session) -> int:
    """CLIENT LIST's `multi` field: commands queued (or being executed by EXEC), -1 outside."""
    tx = active(session)
    if tx is not None:
        return len(tx.queued)
    running = session.extra.get(RUNNING)
    return running if isinstance(running, int) else -1


def reset(session: Session) -> None:
    """RESET: drop any open transaction."""
    session.extra.pop(KEY, None)
