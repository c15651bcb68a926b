"""README's main job, `streams demo`, run as a user runs it: every seed table on embedded brokers
(one shard per region, Tansu with the embedded mirror; one topology per ID mode, each table on
keys of its own), actual beside the seed's expected, and the exit status says whether all held.
It is also the one-shard shape of the seed tables on the light stack
(tests/integration/test_seed_tables_e2e.py runs the sharded shapes)."""

from __future__ import annotations

import re
import subprocess
import sys

from streams.scenarios import load_all


def test_streams_demo_runs_every_seed_table_and_says_all_hold() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "streams.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    total = len(load_all())
    assert f"{total} of {total} seed tables hold (0 failed)" in run.stdout, run.stdout[-4000:]
    # Every step is printed with its actual reply beside the seed's; none is marked wrong.
    steps = re.findall(r"\(seed: .*\) (\w+)$", run.stdout, re.M)
    assert steps and set(steps) == {"ok"}, sorted(set(steps))
