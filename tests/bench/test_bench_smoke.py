"""The benchmark harness runs end to end on tiny sizes (no timing is asserted: figures only make
sense on a quiet machine, and they go to docs/benchmarks.md, not into a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_smoke_run_prints_every_figure_next_to_redis() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", "-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    table = out.stdout
    systems = (
        "redis fsync always",
        "redis cluster 2 masters fsync always",
        "streams 1 region, 4 shards (2 processes, redis-benchmark --cluster)",
        "streams 1 region, 4 shards (2 processes, a client per shard)",
        "streams 3 regions, 1 shard (1 process)",
    )
    for figure in ("XADD c50 P1", "XADD c50 P16"):
        for system in systems:
            assert f"| {figure} | {system} |" in table, (figure, system)
    for figure in ("XADD c50 P1 replicated", "XADD c50 P16 replicated"):
        assert f"| {figure} | streams 3 regions, 1 shard (1 process) |" in table, figure
    for system in ("redis fsync always", "streams 3 regions, 1 shard (1 process)"):
        assert f"| XREADGROUP+XACK c50 | {system} |" in table, system
    assert "| streams 3 regions, 1 shard (1 process) |" in table.split("Replication drain")[1]
    assert "Idle streams 1 region, 4 shards (2 processes, redis-benchmark --cluster)" in table
    assert "Idle streams 3 regions, 1 shard (1 process)" in table
    assert "Replication latency r1 -> r2, streams 3 regions" in table
