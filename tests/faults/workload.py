"""The load the fault scenarios run under, the ledger of what clients saw acknowledged, and the
checks that nothing acknowledged was lost, nothing deleted came back and nothing was doubled.

Why a ledger per writer rather than a model of the whole state: under faults a request can end
three ways (acknowledged, refused, unknown because the connection dropped or the batch failed),
and only the first two say anything. An acknowledged XADD must be in every region exactly once
unless an acknowledged delete removed it; a write whose outcome is unknown may be there or not,
but never twice. Every payload is unique (`<region>-<n>`) and clients never retry a request, so a
payload seen twice is a doubled op, whatever the cause.

The writers use redis-py with retries off: a library retry after a dropped connection would send
the same XADD twice and blur exactly what is being measured.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from support import topic_values, wait_until

from streams.crdt import ops
from streams.ops.pack import decode_each
from streams.replay.run import Request, replay
from topology.local import LocalTopology

SHARED_KEYS = [b"shared:%d" % i for i in range(4)]
QUEUE = b"q"
GROUP = b"cg"

UNKNOWN_OUTCOME = "may or may not have been applied"
"""The node's text for a write whose batch failed: the log decides whether it landed."""


def plain_client(port: int, timeout: float | None = 10.0) -> redis.Redis:
    """A redis-py client that never re-sends a request (see the module docstring)."""
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        protocol=2,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        retry_on_error=[],
    )


@dataclass
class Ledger:
    """What one region's writer sent and how each request ended."""

    region: int
    name: str = ""
    """How reports call this writer (r1, or r1' for a second node of r1)."""
    added: dict[bytes, tuple[bytes, bytes]] = field(default_factory=dict)
    """payload -> (key, entry ID) of every acknowledged XADD."""
    unsure_added: set[bytes] = field(default_factory=set)
    refused_added: set[bytes] = field(default_factory=set)
    """XADDs answered with an error that says nothing was done (LOADING, writes refused, ...)."""
    deleted: set[bytes] = field(default_factory=set)
    """payloads removed by an acknowledged XDEL or DEL."""
    unsure_deleted: set[bytes] = field(default_factory=set)
    groups_live: set[tuple[bytes, bytes]] = field(default_factory=set)
    groups_gone: set[tuple[bytes, bytes]] = field(default_factory=set)
    groups_unsure: set[tuple[bytes, bytes]] = field(default_factory=set)
    delivered: set[bytes] = field(default_factory=set)
    """IDs of `QUEUE` an acknowledged XREADGROUP delivered to this region's consumer."""
    acked: set[bytes] = field(default_factory=set)
    unsure_acked: set[bytes] = field(default_factory=set)
    keys: set[bytes] = field(default_factory=set)
    commands: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    first_failure: float | None = None
    outages: list[float] = field(default_factory=list)
    """Seconds from a first failed request to the next acknowledged one, per outage."""
    slowest: float = 0.0
    """The longest any single request took (acknowledged or not)."""
    events: list[tuple[float, str, float]] = field(default_factory=list)
    """(monotonic start, "ok" or the error text, seconds taken) per request."""

    def note_ok(self, took: float) -> None:
        self.events.append((time.monotonic() - took, "ok", took))
        self.commands += 1
        self.slowest = max(self.slowest, took)
        if self.first_failure is not None:
            self.outages.append(time.monotonic() - self.first_failure)
            self.first_failure = None

    def note_error(self, exc: Exception, took: float) -> None:
        self.commands += 1
        self.slowest = max(self.slowest, took)
        text = str(exc).split("(", 1)[0].strip()[:70] or type(exc).__name__
        self.events.append((time.monotonic() - took, f"{type(exc).__name__}: {text}", took))
        self.errors[f"{type(exc).__name__}: {text}"] += 1
        if self.first_failure is None:
            self.first_failure = time.monotonic()


class Writer(threading.Thread):
    """One region's client: a steady mix of XADD, XDEL, DEL, XGROUP CREATE/DESTROY and
    XREADGROUP + XACK at about `rate` commands a second, until `stop()`.

    `port` and `tag` serve a second node of the same region (split brain): another port, and
    payloads, keys and the consumer name of its own, so the two ledgers never collide."""

    def __init__(
        self,
        topo: LocalTopology,
        region: int,
        rate: float,
        groups: bool = True,
        port: int | None = None,
        tag: str | None = None,
    ) -> None:
        self.tag = (tag or str(region)).encode()
        super().__init__(name=f"writer {self.tag.decode()}", daemon=True)
        self.port = port or topo.ports[region]
        self.region = region
        self.rate = rate
        self.groups = groups
        self.ledger = Ledger(region, tag or f"r{region}")
        self._halt = threading.Event()
        self._client: redis.Redis | None = None
        self._n = 0
        self._sent = 0
        self._began = time.monotonic()
        self.failure: BaseException | None = None

    def stop(self) -> Ledger:
        self._halt.set()
        self.join(60)
        assert not self.is_alive(), f"writer {self.tag!r} did not stop"
        if self.failure is not None:
            raise AssertionError(f"writer {self.tag!r} crashed") from self.failure
        return self.ledger

    # --- one request ------------------------------------------------------------------------

    def _call(self, *args: Any) -> tuple[bool, Any]:
        """(True, reply) when acknowledged, (False, None) when the outcome is unknown (dropped
        connection, timeout, a failed batch); (False, exc) when refused (an error reply that
        says nothing was done, LOADING included: it is answered before the command runs)."""
        if self._client is None:
            self._client = plain_client(self.port, timeout=30)
        self._sent += 1
        ahead = self._sent / self.rate - (time.monotonic() - self._began)
        if ahead > 0:
            time.sleep(ahead)
        elif ahead < -0.5:  # behind after an outage: go on at the rate, no catch-up burst
            self._began -= ahead + 0.5
        started = time.monotonic()
        try:
            reply = self._client.execute_command(*args)
        except redis.BusyLoadingError as exc:  # before ConnectionError: it is a subclass
            self.ledger.note_error(exc, time.monotonic() - started)
            time.sleep(0.05)
            return False, exc
        except redis.ResponseError as exc:
            self.ledger.note_error(exc, time.monotonic() - started)
            return (False, None) if UNKNOWN_OUTCOME in str(exc) else (False, exc)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self.ledger.note_error(exc, time.monotonic() - started)
            self._client.close()
            self._client = None
            time.sleep(0.05)
            return False, None
        self.ledger.note_ok(time.monotonic() - started)
        return True, reply

    def _payload(self) -> bytes:
        self._n += 1
        return b"%s-%d" % (self.tag, self._n)

    def _xadd(self, key: bytes) -> bytes | None:
        payload = self._payload()
        self.ledger.keys.add(key)
        ok, reply = self._call("XADD", key, "*", "p", payload)
        if ok:
            self.ledger.added[payload] = (key, reply)
            return payload
        if reply is None:
            self.ledger.unsure_added.add(payload)
        else:
            self.ledger.refused_added.add(payload)
        return None

    # --- the mix ----------------------------------------------------------------------------

    def run(self) -> None:
        self._began = time.monotonic()
        try:
            self._loop()
        except BaseException as exc:  # surfaced by stop()
            self.failure = exc
        finally:
            if self._client is not None:
                self._client.close()

    def _loop(self) -> None:
        tag = self.tag
        own = b"own:%s" % tag
        grp = b"grp:%s" % tag
        self.ledger.keys.add(grp)
        own_live: list[bytes] = []
        scratch: list[bytes] = []
        cycle = 0
        while not self._halt.is_set():
            cycle += 1
            self._xadd(SHARED_KEYS[cycle % len(SHARED_KEYS)])
            payload = self._xadd(own)
            if payload is not None:
                own_live.append(payload)
            self._xadd(QUEUE)
            scratch_key = b"scratch:%s:%d" % (tag, cycle // 4)
            payload = self._xadd(scratch_key)
            if payload is not None:
                scratch.append(payload)
            if cycle % 3 == 0 and own_live:
                victim = own_live.pop(0)
                ok, reply = self._call("XDEL", own, self.ledger.added[victim][1])
                if ok and reply != 1:
                    raise AssertionError(f"XDEL of acknowledged {victim!r} deleted {reply}")
                (self.ledger.deleted if ok else self.ledger.unsure_deleted).add(victim)
            if cycle % 4 == 3:
                ok, _reply = self._call("DEL", scratch_key)
                (self.ledger.deleted if ok else self.ledger.unsure_deleted).update(scratch)
                scratch.clear()
            if self.groups and cycle % 5 == 0:
                name = b"g%d" % cycle
                ok, _ = self._call("XGROUP", "CREATE", grp, name, "$", "MKSTREAM")
                (self.ledger.groups_live if ok else self.ledger.groups_unsure).add((grp, name))
            if self.groups and cycle % 5 == 2 and self.ledger.groups_live:
                name = sorted(self.ledger.groups_live)[0][1]
                self.ledger.groups_live.discard((grp, name))
                ok, reply = self._call("XGROUP", "DESTROY", grp, name)
                if ok and reply != 1:
                    raise AssertionError(f"XGROUP DESTROY of acknowledged {name!r} gave {reply}")
                (self.ledger.groups_gone if ok else self.ledger.groups_unsure).add((grp, name))
            if self.groups:
                self._consume()

    def _consume(self) -> None:
        ok, reply = self._call(
            "XREADGROUP", "GROUP", GROUP, b"c%s" % self.tag, "COUNT", 4, "STREAMS", QUEUE, ">"
        )
        if not ok or not reply:
            return
        ids = [eid for eid, _fields in reply[0][1]]
        self.ledger.delivered.update(ids)
        to_ack = ids[::2]
        if not to_ack:
            return
        ok, _ = self._call("XACK", QUEUE, GROUP, *to_ack)
        (self.ledger.acked if ok else self.ledger.unsure_acked).update(to_ack)


class Prober(threading.Thread):
    """A bystander client: one request every `interval` seconds (XLEN by default) until
    `stop()`, noting what each got and how long it took; the latency other clients see."""

    def __init__(
        self,
        port: int,
        timeout: float = 30.0,
        interval: float = 0.05,
        request: Callable[[redis.Redis], object] | None = None,
    ) -> None:
        super().__init__(name=f"prober {port}", daemon=True)
        self.client = plain_client(port, timeout=timeout)
        self.timeout = timeout
        self.interval = interval
        self.request = request or (lambda client: client.xlen(b"shared:0"))
        self.halt = threading.Event()
        self.events: list[tuple[float, str, float]] = []
        """(monotonic start, "ok", "LOADING" or the error, seconds taken) per request."""

    def run(self) -> None:
        while not self.halt.is_set():
            started = time.monotonic()
            try:
                self.request(self.client)
                outcome = "ok"
            except redis.BusyLoadingError:
                outcome = "BusyLoadingError: LOADING"
            except redis.RedisError as exc:
                outcome = f"{type(exc).__name__}: {str(exc).split('(', 1)[0].strip()[:60]}"
            self.events.append((started, outcome, time.monotonic() - started))
            self.halt.wait(self.interval)

    def stop(self) -> None:
        self.halt.set()
        self.join(self.timeout + 5)
        assert not self.is_alive(), "the prober did not stop"
        self.client.close()

    @property
    def slowest(self) -> float:
        return max((took for _t, _o, took in self.events), default=0.0)

    def errors(self) -> list[str]:
        return [outcome for _t, outcome, _took in self.events if outcome != "ok"]

    def latencies(self, start: float = 0.0, end: float = float("inf")) -> list[float]:
        return sorted(took for t, outcome, took in self.events if start <= t < end)


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def window(
    events: list[tuple[float, str, float]], start: float, end: float
) -> dict[str, tuple[int, float]]:
    """outcome -> (count, slowest) of the requests (Ledger or Prober events) started within
    [start, end)."""
    out: dict[str, tuple[int, float]] = {}
    for t, outcome, took in events:
        if start <= t < end:
            count, slowest = out.get(outcome, (0, 0.0))
            out[outcome] = (count + 1, round(max(slowest, took), 2))
    return out


def prepare(topo: LocalTopology) -> None:
    """The consumer group every region reads `QUEUE` with, replicated before the load."""
    topo.client(1).xgroup_create(QUEUE, GROUP, id="0", mkstream=True)
    topo.sync()


def run_load(
    topo: LocalTopology,
    regions: Iterable[int],
    seconds: float,
    rate: float,
    during: Callable[[], None] | None = None,
    groups: bool = True,
    tail: float = 2.0,
    phase: str = "",
) -> list[Ledger]:
    """Writers in `regions` for `seconds`; `during` runs in this thread meanwhile (the fault),
    and the load goes on at least `tail` seconds after it returned (writes after recovery).
    `phase` tags a later load on the same topology (payloads, keys and consumers `<region><phase>`),
    so its payload numbering never meets an earlier load's."""
    writers = [Writer(topo, r, rate, groups, tag=f"{r}{phase}" if phase else None) for r in regions]
    started = time.monotonic()
    for w in writers:
        w.start()
    if during is not None:
        during()
    time.sleep(max(seconds - (time.monotonic() - started), tail))
    return [w.stop() for w in writers]


def waited(predicate: Callable[[], bool], timeout: float) -> float:
    """`support.wait_until`, returning the seconds it took."""
    started = time.monotonic()
    wait_until(predicate, timeout=timeout)
    return time.monotonic() - started


def node_pid(client: redis.Redis) -> int:
    return int(client.info("server")["process_id"])


def node_memory_mb(pid: int) -> tuple[int, int]:
    """(resident now, peak resident) of a process in MB: VmRSS and VmHWM from /proc."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def first_write(port: int, timeout: float) -> float | None:
    """Seconds until the node on `port` acknowledges a write (an XADD to `probe`), or None when
    it refused or could not be reached for `timeout` seconds."""
    probe = plain_client(port, timeout=30)
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout:
            try:
                probe.xadd(b"probe", {b"p": b"x"})
                return time.monotonic() - started
            except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError):
                time.sleep(0.02)  # BusyLoadingError (LOADING) is a ConnectionError
        return None
    finally:
        probe.close()


class Process:
    """A product process a test starts (`python -m MODULE ...`), in its own session, its output
    in `log`: SIGKILL it (`kill`) or stop it cleanly (`stop`: SIGTERM, SIGKILL after 10 s)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, module: str, *args: str) -> None:
        assert self.proc is None, "already running"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None and self.alive(), f"it died by itself:\n{self.output()}"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def serving(client: redis.Redis, timeout: float = 60) -> float:
    """Wait until the node answers a read (not LOADING); returns the seconds waited."""
    started = time.monotonic()
    while True:
        try:
            client.xlen(b"probe")
            return time.monotonic() - started
        except (redis.BusyLoadingError, redis.ConnectionError):
            if time.monotonic() - started > timeout:
                raise
            time.sleep(0.02)


def settle(topo: LocalTopology, timeout: float = 60, regions: list[int] | None = None) -> None:
    """Every node serving, then replicate until every region applied every other's ops."""
    for i in regions or topo.ports:
        serving(topo.client(i))
    deadline = time.monotonic() + timeout
    while True:
        try:
            topo.sync(regions, timeout=timeout)
            return
        except redis.BusyLoadingError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def vector_of(client: redis.Redis) -> dict[str, int]:
    flat = client.execute_command("CRDT.VECTOR")
    return {flat[k].decode(): int(flat[k + 1]) for k in range(0, len(flat), 2)}


def converge(nodes: dict[str, redis.Redis], timeout: float = 60) -> float:
    """Wait, without copying anything itself (the running mirrors must do it), until every node
    applied every region's ops up to what that region's own node applied. `nodes`: region name
    -> a node of that region. Returns the seconds waited; CRDT.FLUSH first, as `sync` does."""
    started = time.monotonic()
    for client in nodes.values():
        client.execute_command("CRDT.FLUSH")
    while True:
        vectors = {name: vector_of(client) for name, client in nodes.items()}
        behind = {
            (i, j): (vectors[i].get(j, 0), vectors[j].get(j, 0))
            for i in nodes
            for j in nodes
            if vectors[i].get(j, 0) < vectors[j].get(j, 0)
        }
        if not behind:
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, f"not converged: {behind}"
        time.sleep(0.02)


# --- the checks -----------------------------------------------------------------------------


def contents(client: redis.Redis, keys: Iterable[bytes]) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """payload -> [(key, entry ID), ...] over `keys` (a list: doubles show)."""
    seen: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for key in sorted(keys):
        for eid, fields in client.xrange(key):
            payload = fields.get(b"p")
            if payload is not None:
                seen.setdefault(payload, []).append((key, eid))
    return seen


def check_no_loss(
    topo: LocalTopology,
    ledgers: list[Ledger],
    regions: Iterable[int] | None = None,
    nodes: dict[str, redis.Redis] | None = None,
) -> dict[str, int]:
    """Every region (or those in `regions`, or the named `nodes`): each acknowledged XADD
    exactly once (unless deleted), no refused XADD, nothing deleted back, no payload twice,
    acknowledged group creates/destroys hold; every digest equal. Returns counts for the
    report."""
    keys = set().union(*(ledger.keys for ledger in ledgers))
    deleted = set().union(*(ledger.deleted for ledger in ledgers))
    unsure_deleted = set().union(*(ledger.unsure_deleted for ledger in ledgers))
    refused = set().union(*(ledger.refused_added for ledger in ledgers))
    if nodes is None:
        chosen = sorted(topo.ports if regions is None else regions)
        nodes = {f"r{i}": topo.client(i) for i in chosen}
    digests = {}
    for i, client in nodes.items():
        seen = contents(client, keys)
        doubled = {p: where for p, where in seen.items() if len(where) > 1}
        assert not doubled, f"{i}: payloads present more than once: {list(doubled.items())[:5]}"
        back = refused & seen.keys()
        assert not back, f"{i}: XADDs answered with an error are present: {sorted(back)[:5]}"
        for ledger in ledgers:
            for payload, (key, eid) in ledger.added.items():
                if payload in deleted:
                    assert payload not in seen, f"{i}: deleted {payload!r} came back on {key!r}"
                elif payload not in unsure_deleted:
                    assert seen.get(payload) == [(key, eid)], (
                        f"{i}: acknowledged XADD {payload!r} {key!r} {eid!r} is "
                        f"{seen.get(payload, 'missing')}"
                    )
            for key, name in ledger.groups_live:
                names = {g["name"] for g in client.xinfo_groups(key)}
                assert name in names, f"{i}: acknowledged group {name!r} on {key!r} is missing"
            for key, name in ledger.groups_gone:
                if (key, name) in ledger.groups_unsure:
                    continue
                names = (
                    {g["name"] for g in client.xinfo_groups(key)} if client.exists(key) else set()
                )
                assert name not in names, f"{i}: destroyed group {name!r} came back"
        digests[i] = client.execute_command("CRDT.DIGEST")
    assert len(set(digests.values())) == 1, f"digests differ after sync: {digests}"
    return {
        "acknowledged_xadds": sum(len(ledger.added) for ledger in ledgers),
        "unknown_outcome_xadds": sum(len(ledger.unsure_added) for ledger in ledgers),
        "refused_xadds": len(refused),
        "acknowledged_deletes": len(deleted),
        "groups_created_live": sum(len(ledger.groups_live) for ledger in ledgers),
        "groups_destroyed": sum(len(ledger.groups_gone) for ledger in ledgers),
    }


def check_pel(client: redis.Redis, ledger: Ledger) -> dict[str, int]:
    """The region's PEL after a fault: every entry delivered and not acknowledged-acked is
    pending (never lost); no acknowledged ack is pending again."""
    pending: set[bytes] = set()
    start = b"-"
    while True:
        rows = client.xpending_range(QUEUE, GROUP, min=start, max="+", count=1000)
        pending.update(row["message_id"] for row in rows)
        if len(rows) < 1000:
            break
        last = rows[-1]["message_id"]
        ms, seq = last.split(b"-")
        start = b"%s-%d" % (ms, int(seq) + 1)
    must = ledger.delivered - ledger.acked - ledger.unsure_acked
    lost = must - pending
    assert not lost, f"r{ledger.region}: {len(lost)} delivered, unacked entries left the PEL"
    back = ledger.acked & pending
    assert not back, f"r{ledger.region}: {len(back)} acknowledged acks are pending again"
    return {"delivered": len(ledger.delivered), "pending": len(pending), "must_pend": len(must)}


def fold_digest(bootstrap: str, region: str) -> str:
    """What the region's logs on its cluster fold to (a fresh replay), as CRDT.DIGEST."""
    return replay(Request(bootstrap=bootstrap, region=region)).region.state.digest()


def check_logs_fold_to_nodes(topo: LocalTopology) -> None:
    for i in topo.ports:
        node = topo.client(i).execute_command("CRDT.DIGEST").decode()
        folded = fold_digest(topo.bootstrap[i], topo.names[i])
        assert node == folded, f"r{i}: the node's digest differs from what its logs fold to"


def log_records(bootstrap: str, topic: str) -> list[tuple[int, int, bytes]]:
    """(origin, seq, bytes) of every op of `topic` partition 0, in offset order (read_committed);
    a pack's ops each with their own record bytes (`streams.ops.pack`)."""
    records: list[tuple[int, int, bytes]] = []
    for value in topic_values(bootstrap, topic):
        for item, record in decode_each(value):
            assert isinstance(record, ops.Op), f"{topic} holds a {type(record).__name__}"
            records.append((record.origin, record.seq, item))
    return records


def log_dots(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """(origin, seq) of every record of `topic` partition 0, in offset order (read_committed)."""
    return [(origin, seq) for origin, seq, _value in log_records(bootstrap, topic)]


def check_dots(topo: LocalTopology, copies: bool = False) -> dict[str, int]:
    """In every cluster, each region's op log (home or mirrored) holds seqs 1..n in order, none
    twice and none missing: the log never forked and no op was copied twice. With `copies`, a
    seq may come again as an exact copy of its first record (never as another record under
    that dot): what a mirror writes when it copies at least once after a fault, and what a
    node's barrier writes after a crash or an outage on Tansu (`streams.node.kafka.settle`); every
    reader drops such copies. Returns each log's count of distinct seqs."""
    counts: dict[str, int] = {}
    for i in topo.ports:
        for j in topo.ports:
            topic = f"{topo.names[j]}.oplog"
            first: dict[int, bytes] = {}
            seqs: list[int] = []
            for _origin, seq, value in log_records(topo.bootstrap[i], topic):
                if seq in first:
                    assert first[seq] == value, (
                        f"{topic} on r{i}'s cluster holds two different records under seq {seq}"
                    )
                    assert copies, f"{topic} on r{i}'s cluster holds seq {seq} twice"
                    continue
                first[seq] = value
                seqs.append(seq)
            assert seqs == list(range(1, len(seqs) + 1)), (
                f"{topic} on r{i}'s cluster is not 1..n: first break at "
                f"{next(k for k, s in enumerate(seqs) if s != k + 1)} of {len(seqs)}"
            )
            counts[f"{topic}@r{i}"] = len(seqs)
    return counts


def crdt_info(client: redis.Redis) -> dict[str, str]:
    flat = client.execute_command("CRDT.INFO")
    return {
        flat[k].decode(): (
            flat[k + 1].decode(errors="replace")
            if isinstance(flat[k + 1], bytes)
            else str(flat[k + 1])
        )
        for k in range(0, len(flat), 2)
    }


def summary(ledgers: list[Ledger]) -> str:
    lines = []
    for ledger in ledgers:
        outages = (
            f"{len(ledger.outages)}, longest {max(ledger.outages):.2f}s"
            if ledger.outages
            else "none"
        )
        errors = "; ".join(f"{k} x{v}" for k, v in ledger.errors.most_common(4)) or "none"
        lines.append(
            f"  {ledger.name}: {ledger.commands} requests, {len(ledger.added)} XADD acked, "
            f"{len(ledger.unsure_added)} unknown, slowest {ledger.slowest:.2f}s, "
            f"outages {outages}, errors {errors}"
        )
    return "\n".join(lines)
