"""The mirror process (`python -m topology.mirror`, every pair of a 3-region topology) SIGKILLed
mid-copy while writers run in all regions, then restarted, three times: once while copying
steadily, once right after it started catching up the backlog its death left, once more. After
the last restart the regions converge through that process alone (no in-process copy), no op is
lost (every acknowledged XADD in every region exactly once, digests equal, the logs fold to
them) and none is copied or applied twice (each origin's op log holds seqs 1..n, each once, on
every cluster).

A killed mirror leaves no state behind: the restarted one resumes after the `mirror.offset` of the
target's last record (topology/mirror/resume.py), and its producer is idempotent, so a batch either
landed whole or not at all.
"""

from __future__ import annotations

import time
from functools import partial

from support import wait_until

from faults.workload import (
    Process,
    check_dots,
    check_logs_fold_to_nodes,
    check_no_loss,
    converge,
    prepare,
    run_load,
    summary,
    vector_of,
    waited,
)
from topology.local import LocalTopology

RATE = 40.0
"""Requests a second per region (three regions)."""
DEAD_S = 1.0
"""How long the mirror stays dead each time: the backlog it finds on restart."""


class MirrorProcess(Process):
    """`python -m topology.mirror --topology FILE`, each run's output in a file of its own."""

    def __init__(self, topo: LocalTopology) -> None:
        super().__init__(topo.workdir / "mirror-0.log")
        self.topo = topo
        self.starts = 0

    def run(self) -> None:
        self.starts += 1
        self.log = self.topo.workdir / f"mirror-{self.starts}.log"
        self.start(
            "topology.mirror", "--topology", str(self.topo.topology_path), "--interval", "0.1"
        )

    def copied_pairs(self) -> set[str]:
        """The pairs this run reported copying ("r1 -> r2: N copied (+d)") so far."""
        lines = self.output().splitlines()
        return {line.split(":", 1)[0] for line in lines if " copied (+" in line}

    def wait_for_pairs(self, count: int, timeout: float, interval: float = 0.01) -> None:
        """Until this run reported copying for `count` pairs; else say which did, and what the
        process wrote."""
        try:
            wait_until(lambda: len(self.copied_pairs()) >= count, timeout, interval)
        except AssertionError:
            raise AssertionError(
                f"{sorted(self.copied_pairs())} reported copying in {timeout:g} s, not {count}"
                f" pairs; the mirror process wrote:\n{self.output()[-4000:]}"
            ) from None


def lag(topo: LocalTopology) -> int:
    """Ops of other regions the regions have not applied yet, summed over the pairs."""
    vectors = {i: vector_of(topo.client(i)) for i in topo.ports}
    return sum(
        max(0, vectors[j].get(topo.names[j], 0) - vectors[i].get(topo.names[j], 0))
        for i in topo.ports
        for j in topo.ports
    )


def applied_up_to(topo: LocalTopology, vectors: dict[int, dict[str, int]]) -> bool:
    """Whether every region applied every other region's ops up to `vectors` (per region, its
    CRDT.VECTOR at some earlier moment)."""
    for i in topo.ports:
        applied = vector_of(topo.client(i))
        for j in topo.ports:
            if applied.get(topo.names[j], 0) < vectors[j].get(topo.names[j], 0):
                return False
    return True


def test_a_mirror_killed_mid_copy_under_load_loses_and_repeats_nothing() -> None:
    with LocalTopology(regions=3, manual_sync=True) as topo:
        prepare(topo)  # in-process copy, before the mirror process exists
        mirror = MirrorProcess(topo)
        mirror.run()
        kills: list[dict[str, float]] = []
        try:

            def crashes() -> None:
                mirror.wait_for_pairs(6, 30)  # all copying
                for k in range(3):
                    if k == 1:
                        # The restarted mirror copies the backlog its death left: kill it at
                        # its first progress line, before every pair caught up.
                        mirror.wait_for_pairs(1, 30, interval=0.002)
                    else:
                        time.sleep(1.0)
                    pairs = len(mirror.copied_pairs())
                    mirror.kill()
                    at_kill = lag(topo)
                    time.sleep(DEAD_S)
                    backlog = lag(topo)
                    mirror.run()
                    figures: dict[str, float] = {
                        "pairs_copying_at_kill": pairs,
                        "lag_at_kill": at_kill,
                        "backlog_at_restart": backlog,
                    }
                    if k != 0:  # after kill 1 the next kill comes mid-backlog: no wait
                        vectors = {i: vector_of(topo.client(i)) for i in topo.ports}
                        took = waited(partial(applied_up_to, topo, vectors), 30)
                        figures["restart_to_backlog_applied_s"] = took
                    kills.append(figures)

            ledgers = run_load(topo, [1, 2, 3], seconds=0, rate=RATE, during=crashes, tail=2.0)
            nodes = {topo.names[i]: topo.client(i) for i in topo.ports}
            converged_s = converge(nodes, timeout=60)
        finally:
            mirror.stop()
        print(
            f"\nmirror crash: 3 regions x {RATE:g} req/s; the mirror process (all 6 pairs) "
            "SIGKILLed 3 times (the second at its first progress report after a restart, "
            f"copying the backlog), dead {DEAD_S:g} s each, then restarted"
        )
        print(summary(ledgers))
        for k, figures in enumerate(kills, 1):
            shown = ", ".join(
                f"{name} {value:.2f}" if isinstance(value, float) else f"{name} {value}"
                for name, value in figures.items()
            )
            print(f"  kill {k}: {shown}")
        print(f"  converged through the restarted mirror {converged_s:.2f}s after the load")
        assert len(kills) == 3
        assert all(figures["lag_at_kill"] + figures["backlog_at_restart"] > 0 for figures in kills)
        counts = check_no_loss(topo, ledgers)
        print(f"  checked in every region: {counts}")
        check_logs_fold_to_nodes(topo)
        dots = check_dots(topo)
        print(f"  logs fold to the digests; op logs 1..n, none twice, on every cluster: {dots}")
