"""Seed 002's Unified Rocket Rides on the SDK: a streamer with double sends, two checkpointing
consumers that crash, and totals that agree anyway.

The streamer emits rides (id, distance) in batches; 10 % of the time it sends a whole batch twice
(a retry after an uncertain failure). Each ride carries its id as idempotency key (`_idk`).
Two `CheckpointConsumer`s (consumer0, consumer1) keep a running `total_distance` in their own
SQLite database; 10 % of the time one "crashes" after handling a batch but before committing
(the transaction rolls back) and is restarted from its checkpoint. At the end both totals must
equal the sum of the distances of the distinct rides; the script exits 1 otherwise.

    python examples/sdk/rocket_rides.py                       # starts a one-region topology
    python examples/sdk/rocket_rides.py --endpoint redis://127.0.0.1:6380 --rides 500
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from streams.sdk import CheckpointConsumer, CheckpointTx, Producer, SQLiteStore
from streams.sdk.checkpoint import CheckpointHandler, SQLiteTx


class SimulatedCrash(Exception):
    """The consumer process died after handling a batch, before its commit."""


class CrashingStore(SQLiteStore):
    """A SQLite store whose commit fails `crash_rate` of the time (the transaction rolls back)."""

    def __init__(self, path: Path, rng: random.Random, crash_rate: float) -> None:
        super().__init__(path)
        self.rng = rng
        self.crash_rate = crash_rate
        self.crashes = 0
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS consumer_states (name TEXT PRIMARY KEY, "
            "total_distance REAL NOT NULL, last_ride_id INTEGER NOT NULL)"
        )

    @contextlib.contextmanager
    def transaction(self, name: str) -> Iterator[SQLiteTx]:
        with super().transaction(name) as tx:
            yield tx
            if self.rng.random() < self.crash_rate:
                self.crashes += 1
                raise SimulatedCrash(name)

    def total(self, name: str) -> float:
        row = self.conn.execute(
            "SELECT total_distance FROM consumer_states WHERE name = ?", (name,)
        ).fetchone()
        return float(row[0]) if row else 0.0


def make_handler(name: str, verbose: bool) -> CheckpointHandler:
    """The seed's consumer: add each ride's distance to this consumer's running total, in the
    same transaction as the checkpoint."""

    def consume(entry_id: str, fields: dict[bytes, bytes], tx: CheckpointTx) -> None:
        assert isinstance(tx, SQLiteTx)
        ride_id, distance = int(fields[b"id"]), float(fields[b"distance"])
        tx.conn.execute(
            "INSERT INTO consumer_states (name, total_distance, last_ride_id) VALUES (?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET total_distance = total_distance + excluded."
            "total_distance, last_ride_id = excluded.last_ride_id",
            (name, distance, ride_id),
        )
        if verbose:
            print(f"{name} | Consumed record: id={ride_id} distance={distance:.1f}")

    return consume


class RideConsumer:
    """One consumer process of the seed: restarted from its checkpoint after each crash."""

    def __init__(
        self, name: str, endpoint: str, stream: str, store: CrashingStore, verbose: bool
    ) -> None:
        self.name, self.endpoint, self.stream, self.store = name, endpoint, stream, store
        self.handler = make_handler(name, verbose)
        self.skipped = 0
        self._counted = 0  # of the current consumer object's skips
        self.consumer = self._start()

    def _start(self) -> CheckpointConsumer:
        return CheckpointConsumer(
            self.endpoint, self.stream, self.name, self.handler, self.store, batch_size=20
        )

    def step(self) -> bool:
        """One batch; False once the stream is drained."""
        try:
            consumed = self.consumer.run_once()
        except SimulatedCrash:
            self.consumer.close()
            self.consumer = self._start()
            self._counted = 0
            return True
        skipped = self.consumer.skipped - self._counted
        self._counted = self.consumer.skipped
        self.skipped += skipped
        return consumed > 0 or skipped > 0

    def close(self) -> None:
        self.consumer.close()


def run(endpoint: str, rides: int, seed: int, workdir: Path, verbose: bool) -> int:
    rng = random.Random(seed)
    stream = f"rocket-rides-log-{seed}-{rng.randrange(10**9)}"
    distances = {ride: round(rng.uniform(1, 1000), 3) for ride in range(1, rides + 1)}
    stores = {
        n: CrashingStore(workdir / f"{n}.sqlite3", rng, 0.10) for n in ("consumer0", "consumer1")
    }
    consumers = [RideConsumer(n, endpoint, stream, store, verbose) for n, store in stores.items()]
    double_sends = 0
    try:
        with Producer(endpoint, stream) as producer:
            for start in range(1, rides + 1, 10):
                batch = list(range(start, min(start + 10, rides + 1)))
                entries = [{"id": r, "distance": distances[r]} for r in batch]
                keys = [str(r) for r in batch]
                producer.send_many(entries, idempotency_keys=keys)
                if rng.random() < 0.10:  # the streamer failed midway and sends the batch again
                    producer.send_many(entries, idempotency_keys=keys)
                    double_sends += 1
                for consumer in consumers:
                    consumer.step()
        for consumer in consumers:
            while consumer.step():
                pass
        expected = sum(distances.values())
        print(
            f"rides: {rides}, double-sent batches: {double_sends}, stream length: "
            f"{rides + 10 * double_sends} or less"
        )
        agree = True
        for c in consumers:
            total = c.store.total(c.name)
            agree = agree and abs(total - expected) < 1e-6 * max(1.0, expected)
            print(
                f"{c.name}: total_distance={total:.3f} checkpoint={c.store.checkpoint(c.name)}"
                f" crashes={c.store.crashes} skipped double sends={c.skipped}"
            )
        print(
            f"expected total_distance={expected:.3f}: "
            f"{'the consumers agree' if agree else 'MISMATCH'}"
        )
        return 0 if agree else 1
    finally:
        for c in consumers:
            c.close()
        for store in stores.values():
            store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", help="RESP URL of a region node (default: start one)")
    parser.add_argument("--rides", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--verbose", action="store_true", help="print every consumed record")
    args = parser.parse_args(argv)
    if args.rides < 1:
        parser.error("--rides must be >= 1")
    with tempfile.TemporaryDirectory(prefix="rocket-rides-") as tmp:
        if args.endpoint:
            return run(args.endpoint, args.rides, args.seed, Path(tmp), args.verbose)
        from topology.local import LocalTopology

        with LocalTopology(regions=1) as topo:
            url = f"redis://127.0.0.1:{topo.ports[1]}"
            return run(url, args.rides, args.seed, Path(tmp), args.verbose)


if __name__ == "__main__":
    sys.exit(main())
