"""A region's object store stopped for 10 s while its durable broker and node run, under load
(issue 21). A script, not a test (about 40 s: more than the suite's budget allows):

    PYTHONPATH=.:tests python3 tests/faults/object_store_outage.py

Exits 1 unless: the node stays up and says so clearly (errors, never a crash), every
acknowledged write is in both regions exactly once, r1 acknowledges a write (an XADD of its own,
besides the load) within `WRITES_BACK_S` of the store's return and fails no request in the last
seconds of the load, and the running mirrors (no manual copy) converge the regions. Figures for
docs/durability.md are printed.

Before issue 22's fix about one run in four never took writes again: the outage had left a
watermark past the last record in a log on r1's broker (Tansu writes the watermark and the batch
as separate objects), and the node's re-read or the mirror into r1 waited for an end that never
came (`streams.node.kafka.settle`, `topology.mirror.resume`).
"""

from __future__ import annotations

import sys
import tempfile
import time

from faults.workload import Writer, check_no_loss, converge, first_write, prepare, summary
from topology.local import LocalTopology

OUTAGE_S = 10.0
RATE = 20.0
AFTER_S = 25.0
"""Load after the store is back: the writer's renewal can wait on the broker's S3 retries."""
WRITES_BACK_S = 20.0
"""r1 must acknowledge a write within this long after its store is back."""


def main() -> int:
    data = tempfile.mkdtemp(prefix="streams-outage-")
    with LocalTopology(
        regions=2, manual_sync=False, data_dir=f"{data}/data", workdir=f"{data}/logs"
    ) as topo:
        prepare(topo)
        writers = [Writer(topo, r, RATE) for r in (1, 2)]
        for writer in writers:
            writer.start()
        time.sleep(2.0)
        stopped = time.monotonic()
        topo.stores[1].stop()
        down = time.monotonic()
        time.sleep(OUTAGE_S)
        topo.stores[1].start()
        back = time.monotonic() - stopped
        writes_back = first_write(topo.ports[1], WRITES_BACK_S)
        time.sleep(max(0.0, stopped + back + AFTER_S - time.monotonic()))
        ledgers = [writer.stop() for writer in writers]
        print(f"r1's object store stopped (SIGTERM, {down - stopped:.1f} s to exit), down")
        print(f"{OUTAGE_S:g} s, serving again {back:.1f} s after the stop began")
        print(summary(ledgers))
        alive = topo._procs[(1, 0)].poll() is None and topo.brokers[1].alive()
        print(f"r1 node and broker still running: {alive}")
        r1 = ledgers[0]
        errors = [(t - stopped, what) for t, what, _ in r1.events if what != "ok"]
        resumed = [t - stopped for t, what, _ in r1.events if what == "ok" and t - stopped > back]
        if errors:
            print(f"r1 first error at {errors[0][0]:.1f} s: {errors[0][1]}")
            print(f"r1 last error at {errors[-1][0]:.1f} s: {errors[-1][1]}")
        print(f"r1 first acknowledged request after the store was back: {resumed[:1]}")
        if writes_back is None:
            print(f"r1 took no write within {WRITES_BACK_S:g} s of the store's return")
        else:
            print(f"r1 took a write {writes_back:.1f} s after the store was back")
        by_second: dict[int, list[int]] = {}
        for t, what, _ in r1.events:
            counts = by_second.setdefault(int(t - stopped), [0, 0])
            counts[0 if what == "ok" else 1] += 1
        print("r1 requests by second since the stop (ok/failed):")
        print("  " + " ".join(f"{s}:{ok}/{bad}" for s, (ok, bad) in sorted(by_second.items())))
        if errors and r1.events[-1][1] == "ok":
            print(
                f"r1 without a failure since {errors[-1][0] - back:.1f} s after the store was back"
            )
        else:
            print(f"r1 still failing requests {AFTER_S:g} s after the store was back")
            alive = False
        took = converge({"r1": topo.client(1), "r2": topo.client(2)})
        print(f"converged by the running mirrors {took:.2f} s after the load")
        print(f"checked in both regions: {check_no_loss(topo, ledgers)}")
        print(f"mirror errors: {topo.mirrors.errors if topo.mirrors else None}")
        if not alive or not resumed or writes_back is None:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
