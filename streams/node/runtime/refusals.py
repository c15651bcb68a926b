"""Why a shard refused a command, as a typed value.

A refusal is an error reply (a `CommandError`: its text is what the client reads, Redis-style)
that also carries its `kind`, so the parts that decide what to do next (the request pipeline's
reply policy, `streams.node.pipeline.replies`) look at the kind and never at the wording.

- LOADING: the shard boots (Redis's LOADING), answered as is;
- WRITES_REFUSED: the write path is down after a failed batch, until the shard re-read its log;
  a blocked XREADGROUP that met it keeps waiting until writes are taken again;
- READER_STOPPED: the shard's reader stopped for good (a record it cannot decode); treated as
  WRITES_REFUSED (an operator may fix it with `--skip-record`);
- FENCED: another node took over the shard's writer; answered at once, since this node takes no
  write again until it is restarted (a blocked read must not wait for it);
- NOT_CONFIRMED: the batch holding the command's ops failed and may or may not have landed; a
  write's reply (a read held on that batch runs again instead);
- TOO_LARGE, NOT_ENCODABLE: the op cannot go to the log; answered to its own client only.
"""

from __future__ import annotations

from enum import Enum

from streams import errors
from streams.errors import CommandError


class RefusalKind(Enum):
    LOADING = "loading"
    WRITES_REFUSED = "writes-refused"
    READER_STOPPED = "reader-stopped"
    FENCED = "fenced"
    NOT_CONFIRMED = "not-confirmed"
    TOO_LARGE = "too-large"
    NOT_ENCODABLE = "not-encodable"


PASSING = frozenset({RefusalKind.WRITES_REFUSED, RefusalKind.READER_STOPPED})
"""Refusals that end without a restart of the node: a blocked XREADGROUP that met one keeps
waiting for writes to be taken again rather than answer with it (FENCED is not among them: a
fenced node takes no write until it is restarted, so the client is told at once)."""


class Refusal(CommandError):
    """An error reply with the reason the node refused (see the module's table)."""

    def __init__(self, kind: RefusalKind, text: str) -> None:
        super().__init__(text)
        self.kind = kind

    @property
    def passing(self) -> bool:
        return self.kind in PASSING


def is_refusal(reply: object, kinds: frozenset[RefusalKind]) -> bool:
    """Whether `reply` is a refusal of one of `kinds`."""
    return isinstance(reply, Refusal) and reply.kind in kinds


LOADING = Refusal(RefusalKind.LOADING, errors.LOADING)


def writes_refused(why: str) -> Refusal:
    return Refusal(RefusalKind.WRITES_REFUSED, f"ERR writes refused, nothing was applied: {why}")


def reader_stopped(why: str) -> Refusal:
    return Refusal(RefusalKind.READER_STOPPED, f"ERR writes refused: {why}")


def fenced(why: str | None) -> Refusal:
    return Refusal(RefusalKind.FENCED, f"ERR {why or 'this region writer was fenced'}")


def not_confirmed(why: str) -> Refusal:
    return Refusal(
        RefusalKind.NOT_CONFIRMED,
        f"ERR the op log did not confirm the write ({why}); it may or may not have been "
        "applied; writes are refused until the node has re-read its log (reads go on)",
    )


def too_large(size: str, limit: int) -> Refusal:
    return Refusal(
        RefusalKind.TOO_LARGE,
        f"ERR the write is too large for the op log, nothing was applied: its record takes"
        f" {size} bytes, the log takes at most {limit} (max.message.bytes)",
    )


def not_encodable(why: str) -> Refusal:
    return Refusal(
        RefusalKind.NOT_ENCODABLE, f"ERR the write cannot be logged, nothing was applied: {why}"
    )
