"""`streams replay --serve PORT`: a replayed state served read-only over RESP.

Why: the replay prints a state, but the questions operators ask of it are the ones they ask a
live node (XRANGE with bounds, XINFO STREAM FULL, XPENDING per consumer ...). Serving the replayed
`State` through the node's own command table (`streams.node.pipeline.router`) answers them
with the node's code, so redis-cli and redis-py see exactly what the live node would have said at
that position.

Read-only: a command the table flags as a write, or whose dispatch produced ops, is refused with
`READONLY ...`; the state is never changed by a client. The view moves only by the admin commands:

- `REPLAY.SEEK <position>`: refold to a new position and serve it. `<position>` is an `--at`
  vector (`r1=120,r2=98`, or `AT r1=120,r2=98`), `OFFSETS topic=offset,...`, `TIME iso8601`, or
  `END` (everything the cluster holds now). The refold starts from the `--snapshot` when one was
  given and the position is not before it, else from the start of the logs; it runs in a thread,
  and the old view keeps answering until the new one is complete. A position that cannot be
  resolved is an error reply and the view does not move.
- `REPLAY.POSITION`: region, the position (as `--at` takes it: per shard with several shards),
  the digest (as CRDT.DIGEST), the clock, tainted, records read, ops read but not applied,
  records skipped (forged ones, and refused ones under `--on-corrupt skip`), and the id of the
  Kafka cluster read (an `OFFSETS` seek may say `cluster=ID,...`; another cluster's is
  refused); with several shards also `shards`: per shard replayed, its index, digest and vector.

Shards: the whole region is served (every shard, unless `--shard N` picked one). Commands read
through `streams.crdt.keyspace.Sharded`, which routes each key to its shard's state, as a node
owning every shard does; CRDT.VECTOR is the per-origin sum over the shards and CRDT.DIGEST
combines the shards' digests, as a live node answers them.

The clock: commands that report idle times (XPENDING, XINFO CONSUMERS / STREAM FULL) compute them
against the newest origin time among the records applied, i.e. as of the position, not as of now.
A blocking read that finds nothing answers nil at once (a replayed state never changes by itself).
Connection basics (PING, ECHO, HELLO, SELECT, QUIT, CLIENT, COMMAND) use the node's functions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
import time
from collections.abc import Callable, Iterable

from streams import errors
from streams.commands.base import Command, Context
from streams.commands.table import run
from streams.crdt.fold import Applied
from streams.crdt.keyspace import Keyspace
from streams.errors import CommandError
from streams.kafka.clusters import ClusterMismatch
from streams.node.pipeline import auth, connection, router
from streams.node.pipeline.admin import vector_reply
from streams.node.pipeline.clients import Client
from streams.node.pipeline.dispatch import Builtin, Dispatcher, sync
from streams.node.runtime.backend import Outcome, Ran
from streams.replay import reader
from streams.replay.positions import PositionError, vector_text
from streams.replay.replayed import Replayed
from streams.replay.run import (
    CorruptError,
    Request,
    SnapshotPastError,
    replay,
)
from streams.reply import NULL_ARRAY, Map, Reply
from streams.resp.server import Held, Session, serve

READONLY = "READONLY You can't write against a replay of the op log (streams replay --serve)"
NOT_ON_REPLAY = "ERR '{name}' is not available on a replay of the op log (streams replay --serve)"
SEEK_USAGE = (
    "ERR usage: REPLAY.SEEK <r1=120,r2=98 | AT vector | OFFSETS topic=offset,... | TIME iso8601 "
    "| END>"
)

CONNECTION = ("ping", "echo", "hello", "select", "quit", "client", "command")
"""The node's connection commands a replay serves (AUTH, RESET, MULTI, CONFIG, INFO and the
CRDT.* commands but DIGEST and VECTOR have no meaning on a replay)."""
OWN = frozenset({b"replay.seek", b"replay.position"})

Runner = Callable[[Request], Replayed]


@dataclasses.dataclass
class View:
    """One replayed position: the state served, how it was asked for, and its clock."""

    result: Replayed
    asked: str
    clock_ms: int
    keyspace: Keyspace = dataclasses.field(init=False)
    """What commands read (one shard's state, or every shard's routed by key)."""

    def __post_init__(self) -> None:
        self.keyspace = self.result.keyspace()

    def _vector(self, vector: dict[int, int]) -> bytes:
        return vector_text(vector, self.result.names).encode()

    def position(self) -> Map:
        result = self.result
        fields: list[tuple[bytes, Reply]] = [
            (b"region", result.region_name.encode()),
            (b"at", result.at().encode()),
            (b"digest", result.digest().encode()),
            (b"asked", self.asked.encode()),
            (b"clock-ms", self.clock_ms),
            (b"tainted", int(result.tainted)),
            (b"records", result.records),
            (b"waiting-ops", result.waiting()),
            (b"skipped", len(result.skipped)),
            (b"cluster-id", (result.cluster_id or "").encode()),
        ]
        if result.shards > 1:
            shards: list[Reply] = [
                [index, fold.region.state.digest().encode(), self._vector(fold.region.vector)]
                for index, fold in result.folds.items()
            ]
            fields.append((b"shards", shards))
        return Map(tuple(fields))


def load(
    base: Request,
    where: dict[str, str | None],
    runner: Runner = replay,
    progress: bool = False,
) -> View:
    """Replay `base` moved to `where` (at / offsets / time; none: the end of the logs)."""
    newest = 0

    def clock(x: Applied) -> None:
        nonlocal newest
        newest = max(newest, x.record.ts_ms)

    moved = {"at": None, "offsets": None, "time": None, **where}
    req = dataclasses.replace(base, observer=clock, progress=progress)
    req.at, req.offsets, req.time = moved["at"], moved["offsets"], moved["time"]
    if moved["time"] is not None:
        req.snapshot = None  # records before a snapshot are not re-read: a time may lie before
    try:
        result = runner(req)
    except SnapshotPastError:
        newest = 0
        result = runner(dataclasses.replace(req, snapshot=None))
    asked = next((f"{k} {v}" for k, v in moved.items() if v is not None), "end")
    return View(result, asked, newest or int(time.time() * 1000))


def parse_seek(args: list[bytes]) -> dict[str, str | None]:
    """REPLAY.SEEK's arguments -> the `load` position."""
    words = [a.decode("utf-8", "replace") for a in args[1:]]
    if len(words) == 1 and words[0].lower() == "end":
        return {}
    if len(words) == 1 and "=" in words[0]:
        return {"at": words[0]}
    if len(words) == 2 and words[0].lower() in ("at", "offsets", "time"):
        return {words[0].lower(): words[1]}
    raise CommandError(SEEK_USAGE)


class ReplayBackend:
    """The pipeline's backend over a `View`: reads only, as of the view's position."""

    def __init__(self, view: View) -> None:
        self.view = view

    async def paused(self) -> None:
        return None

    def committed(self, cmd: Command, args: list[bytes]) -> Ran | None:
        """The view holds only what the log holds: `execute` reads it."""
        return None

    def execute(self, cmd: Command, args: list[bytes]) -> Ran:
        if "write" in cmd.flags:
            return Ran(CommandError(READONLY))
        view = self.view
        result = view.result
        ctx = Context(view.keyspace, result.region_id, result.mode, view.clock_ms)
        out = run(cmd, ctx, args)
        if out.ops:
            return Ran(CommandError(READONLY))
        if out.block is not None and (out.reply is None or out.reply is NULL_ARRAY):
            return Ran(NULL_ARRAY)  # nothing will arrive: the view moves only by REPLAY.SEEK
        return Ran(out.reply)

    def pending(self, shards: frozenset[int] | None) -> Outcome | None:
        return None  # nothing is ever written here

    async def wait(
        self, keys: Iterable[bytes], timeout: float, lost: asyncio.Future[None] | None
    ) -> None:
        return None


class ReplayHandler:
    """The RESP handler: REPLAY.SEEK / REPLAY.POSITION, else the node's request pipeline over
    the view; `seek` swaps the view once a refold is complete."""

    def __init__(self, base: Request, view: View, runner: Runner = replay) -> None:
        self.base = base
        self.runner = runner
        self.backend = ReplayBackend(view)
        self.dispatcher = Dispatcher(self.backend, auth.AuthConfig())
        self.dispatcher.bind(self._builtins())
        self._seeking = asyncio.Lock()

    @property
    def view(self) -> View:
        return self.backend.view

    async def __call__(self, session: Session, args: list[bytes]) -> Reply | Held:
        name = args[0].lower()
        if name in OWN:
            return await self._own(name, args)
        return await self.dispatcher.handle(session, args)

    def _builtins(self) -> dict[str, Builtin]:
        """The connection commands as the node runs them; the node's other commands (MULTI,
        CONFIG, INFO, CRDT.*) have no meaning on a replay."""
        handlers: dict[str, Builtin] = dict.fromkeys(router.BUILTINS, sync(_not_on_replay))
        served = connection.builtins(self.dispatcher.auth, self.dispatcher.clients)
        handlers.update({name: served[name] for name in CONNECTION})
        handlers["crdt.digest"] = sync(lambda c, a: self.view.result.digest().encode())
        handlers["crdt.vector"] = sync(self._vector)
        return handlers

    def _vector(self, client: Client, args: list[bytes]) -> Reply:
        result = self.view.result
        return vector_reply(result.vector(), result.names, result.region_id)

    async def _own(self, name: bytes, args: list[bytes]) -> Reply:
        if name == b"replay.position":
            if len(args) != 1:
                return errors.wrong_arity("replay.position")
            return self.view.position()
        try:
            where = parse_seek(args)
        except CommandError as exc:
            return exc
        async with self._seeking:
            try:
                view = await asyncio.to_thread(load, self.base, where, self.runner)
            except (
                PositionError,
                ClusterMismatch,
                CorruptError,
                reader.ReadError,
                OSError,
            ) as exc:
                return CommandError(f"ERR cannot seek: {exc}".replace("\n", " "))
            self.backend.view = view
        return view.position()


def _not_on_replay(client: Client, args: list[bytes]) -> Reply:
    resolved = router.resolve(args)
    name = resolved if isinstance(resolved, str) else resolved.name
    return CommandError(NOT_ON_REPLAY.format(name=name))


async def _serve_forever(handler: ReplayHandler, host: str, port: int) -> None:
    server = await serve(handler, host, port)
    bound = server.sockets[0].getsockname()
    result = handler.view.result
    print(
        f"serving region {result.region_name}{_shards_text(result)} at "
        f"{result.at() or '(empty)'} (digest {result.digest()[:16]}...) read-only on "
        f"{bound[0]}:{bound[1]}; "
        "REPLAY.SEEK <position> moves it, REPLAY.POSITION shows it; Ctrl-C stops",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        server.close()
        await server.wait_closed()


def _shards_text(result: Replayed) -> str:
    if result.shards == 1:
        return ""
    if result.shard is not None:
        return f" (shard {result.shard} of {result.shards})"
    return f" ({result.shards} shards)"


def serve_replay(req: Request, host: str, port: int) -> int:
    """The `--serve` entry point: replay, then serve until SIGINT / SIGTERM. Exit 2 when the
    first state served was built over skipped records (tainted), else 0."""
    where: dict[str, str | None] = {"at": req.at, "offsets": req.offsets, "time": req.time}
    view = load(req, where, replay, progress=req.progress)
    for note in view.result.notes:
        print(f"streams: note: {note}", file=sys.stderr)
    if view.result.tainted:
        print(
            f"streams replay: TAINTED: built over {len(view.result.skipped)} skipped "
            f"record(s) (listed in {req.audit})",
            file=sys.stderr,
        )
    handler: ReplayHandler | None = None

    async def main() -> None:
        nonlocal handler
        handler = ReplayHandler(req, view)
        await _serve_forever(handler, host, port)

    asyncio.run(main())
    return 2 if view.result.tainted else 0
