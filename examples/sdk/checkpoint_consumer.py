"""A `CheckpointConsumer` (docs/sdk.md, seed 002) writing orders into SQLite exactly once.

A producer sends orders with idempotency keys and, as a retry after an uncertain failure would,
sends the last three again. A `CheckpointConsumer` named "billing" inserts each order into its
own `orders` table through the store's transaction (`tx.conn`), so the rows and the checkpoint
commit together; the double sends are skipped by their keys. Then the consumer is closed, more
orders arrive, and a new consumer on the same store resumes after the checkpoint. The script
exits 1 unless the table holds every order exactly once.

    python examples/sdk/checkpoint_consumer.py                    # starts a one-region topology
    python examples/sdk/checkpoint_consumer.py --endpoint redis://127.0.0.1:6380
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

from streams.sdk import CheckpointConsumer, CheckpointTx, Producer, SQLiteStore
from streams.sdk.checkpoint import SQLiteTx


def record_order(entry_id: str, fields: dict[bytes, bytes], tx: CheckpointTx) -> None:
    """The handler: one row per order, written in the transaction that moves the checkpoint."""
    assert isinstance(tx, SQLiteTx)
    tx.conn.execute(
        "INSERT INTO orders (entry_id, order_id, amount) VALUES (?, ?, ?)",
        (entry_id, fields[b"order"].decode(), float(fields[b"amount"])),
    )


def drain(consumer: CheckpointConsumer) -> int:
    """Consume batch after batch until the stream has nothing new; returns entries handled (a
    batch of double sends only handles none but still moves the checkpoint)."""
    total = 0
    while True:
        before = consumer.checkpoint
        handled = consumer.run_once()
        total += handled
        if handled == 0 and consumer.checkpoint == before:
            return total


def send_orders(endpoint: str, stream: str, first: int, count: int, resend: int = 0) -> None:
    orders: list[dict[str, str | float]] = [
        {"order": str(n), "amount": n * 1.5} for n in range(first, first + count)
    ]
    keys = [f"order-{n}" for n in range(first, first + count)]
    with Producer(endpoint, stream) as producer:
        first_ids = producer.send_many(orders, idempotency_keys=keys)
        if resend:  # a retry after an uncertain failure: the same entries, the same keys
            again = producer.send_many(orders[-resend:], idempotency_keys=keys[-resend:])
            same = sum(a == b for a, b in zip(again, first_ids[-resend:], strict=True))
            # XADD IDMP (Redis 8.6) answers a resend with the first send's ID and adds nothing;
            # the consumer's own key check below catches what a server without it would add.
            print(f"resent {resend} orders: the server kept {same} of them once (XADD IDMP)")


def run(endpoint: str, workdir: Path) -> int:
    stream = f"orders-{uuid.uuid4().hex[:8]}"
    store = SQLiteStore(workdir / "billing.sqlite3")
    store.conn.execute(
        "CREATE TABLE IF NOT EXISTS orders (entry_id TEXT PRIMARY KEY, order_id TEXT, amount REAL)"
    )
    try:
        send_orders(endpoint, stream, first=1, count=20, resend=3)
        with CheckpointConsumer(
            endpoint, stream, "billing", record_order, store, batch_size=8
        ) as consumer:
            handled = drain(consumer)
            print(
                f"first run: {handled} orders recorded, {consumer.skipped} double sends skipped, "
                f"checkpoint {consumer.checkpoint}"
            )
        send_orders(endpoint, stream, first=21, count=5)
        with CheckpointConsumer(
            endpoint, stream, "billing", record_order, store, batch_size=8
        ) as consumer:  # a restart: resumes after the stored checkpoint
            handled = drain(consumer)
            print(
                f"after a restart: {handled} new orders recorded, checkpoint {consumer.checkpoint}"
            )
        rows = store.conn.execute("SELECT order_id FROM orders").fetchall()
        orders = sorted(int(row[0]) for row in rows)
        ok = orders == list(range(1, 26))
        print(
            f"orders table: {len(orders)} rows for 25 orders: "
            f"{'every order exactly once' if ok else 'MISMATCH ' + str(orders)}"
        )
        return 0 if ok else 1
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", help="RESP URL of a region node (default: start one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="checkpoint-consumer-") as tmp:
        if args.endpoint:
            return run(args.endpoint, Path(tmp))
        from topology.local import LocalTopology

        with LocalTopology(regions=1) as topo:
            return run(f"redis://127.0.0.1:{topo.ports[1]}", Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
