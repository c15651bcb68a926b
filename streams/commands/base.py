"""What every command module shares: the context it reads, the result it returns, the table entry
it registers, and Redis's argument parsers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from streams import errors
from streams.commands import catalogue
from streams.commands.catalogue import Spec
from streams.crdt.keyspace import Keyspace
from streams.crdt.ops import Body, Fields
from streams.errors import CommandError
from streams.ids import IdMode, StreamID, format_id
from streams.numbers import string2ll
from streams.reply import Reply


class Context:
    """What a command may read: the region's materialized state (one shard's `State`, or several
    shards' seen as one: `streams.crdt.keyspace`), who it is, and the time.

    `now_ms` is read at the edge (the node's clock, or the test's), never inside the core.

    A plain class with `Final` attributes (read-only to mypy), not a frozen dataclass: one is
    made per command, and a frozen dataclass's constructor is the dataclass module's Python
    `__init__` even in the compiled core (2.4 % of a node at pipeline 16, py-spy).

    `regions` are the topology's regions (this one included), which a decision about every
    region's PELs needs (XDELEX / XTRIM ... ACKED); empty means this region alone (one region, or
    a read-only view that decides nothing of the kind).
    """

    __slots__ = ("state", "region", "mode", "now_ms", "regions")

    def __init__(
        self,
        state: Keyspace,
        region: int,
        mode: IdMode,
        now_ms: int,
        regions: tuple[int, ...] = (),
    ) -> None:
        self.state: Final = state
        self.region: Final = region
        self.mode: Final = mode
        self.now_ms: Final = now_ms
        self.regions: Final = regions or (region,)


@dataclass(frozen=True)
class BlockRequest:
    """A blocking read found nothing: park the client, re-run `args` when a key changes."""

    keys: tuple[bytes, ...]
    timeout_ms: int
    args: tuple[bytes, ...]
    rerun: Command | None = field(default=None, compare=False)
    """The row to re-run with, when it is not the command's own (XREADGROUP's re-run answers
    Redis's unblocking errors when the key or group went away meanwhile)."""
    retry_ms: int | None = None
    """Run again after this many milliseconds even if no key changed: XREADGROUP ... CLAIM
    waiting for a pending entry to become idle enough (time passing changes no key)."""


@dataclass
class Result:
    reply: Reply
    ops: list[Body] = field(default_factory=list)
    block: BlockRequest | None = None
    """Set when a blocking read found nothing: park the client and run again."""
    block_ms: int | None = None
    """A blocking XREADGROUP's BLOCK milliseconds as parsed, also when it found entries (its
    reply waits for its deliveries to commit: `streams.node.pipeline.replies`)."""

    def __init__(
        self,
        reply: Reply,
        ops: list[Body] | None = None,
        block: BlockRequest | None = None,
        block_ms: int | None = None,
    ) -> None:
        """Written out (the dataclass keeps it): one `Result` per command, and compiled this is
        a native constructor, not the dataclass module's Python `__init__` (`streams.crdt.ops`)."""
        self.reply = reply
        self.ops = [] if ops is None else ops
        self.block = block
        self.block_ms = block_ms

    @property
    def effects(self) -> list[Body]:
        """The ops to issue: none when the command failed (an error reply changes nothing)."""
        return [] if isinstance(self.reply, CommandError) else self.ops


Handler = Callable[[Context, list[bytes]], Result]


@dataclass(frozen=True)
class Command:
    """One row of the command table: a catalogue entry (`streams.commands.catalogue`: arity,
    flags, key positions, docs) and what runs it. `handler` is None for a container (its
    subcommands run) and for the commands the node runs itself (connection, server,
    transactions: `streams.node.pipeline.router`)."""

    spec: Spec
    handler: Handler | None = None
    subcommands: dict[str, Command] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def arity(self) -> int:
        return self.spec.arity

    @property
    def flags(self) -> tuple[str, ...]:
        return self.spec.flags

    def arity_ok(self, argc: int) -> bool:
        return self.spec.arity_ok(argc)


def command(name: str, handler: Handler | None = None) -> Command:
    """The row of a catalogued command (Redis's, or one of `catalogue.OWN`)."""
    return Command(catalogue.spec(name), handler)


def container(name: str, subs: list[Command]) -> Command:
    """A command with subcommands (`xgroup`, `client`, ...); each sub is named `name|sub`."""
    return Command(catalogue.spec(name), None, {s.name.split("|")[1]: s for s in subs})


def parse_int(raw: bytes, error: str = errors.NOT_INTEGER) -> int:
    """Redis's getLongLongFromObject: `string2ll`, or the error reply."""
    value = string2ll(raw)
    if value is None:
        raise CommandError(error)
    return value


def entry_reply(sid: StreamID, fields: Fields) -> Reply:
    """An entry as every command replies it: [ID, [field, value, ...]]."""
    return [format_id(sid), list(fields)]


def eq(raw: bytes, word: bytes) -> bool:
    """Case-insensitive option match."""
    return raw.lower() == word


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
