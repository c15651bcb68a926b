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
    for figure in ("XADD c50 P1", "XADD c50 P16", "XREADGROUP+XACK c50"):
        for system in ("redis fsync always", "redis no persistence", "streams 2 regions"):
            assert f"| {figure} | {system} |" in table, (figure, system)
    assert "Idle 2-region topology" in table
    assert "Replication latency r1 -> r2" in table
