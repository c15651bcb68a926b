"""Region r1's node, broker and object store SIGKILLed at the same instant under load, with the
mirrors idle (they copy on demand afterwards), then started again; did the regions converge?
A script, not a test (tests/faults/test_durable_crash.py runs the same crash once):

    PYTHONPATH=.:tests python3 tests/faults/durable_crash_repro.py [RUNS]

What such a crash leaves on Tansu 0.6.0's S3 storage, which writes one produce or EndTxn as
several objects in turn (docs/durability.md has the evidence):
- a transaction prepared but not completed (EndTxn marked it PrepareCommit, the kill came before
  its markers): `init_transactions` does not complete it, its records stay behind the last stable
  offset, and the next commit on the partition completes it: the restarted node read its log to
  that EOF, wrote the old op's seq again, and the old op appeared beside it (one seq twice);
- a watermark past the last record (the kill came between the watermark object and the batch):
  the partition never reports its EOF, and a reader waiting for it waits for ever;
- a produce whose sequence was recorded but whose batch was not: its retry is answered as a
  duplicate, which librdkafka reports as delivered, and the record is missing.
Before `streams.node.kafka.settle` (the restarted node makes its own logs' end readable, writing an
aborted barrier when it must) and the mirror's checks (`topology.mirror.resume`, `.writer`),
about one run in four did not converge. Prints per run whether the regions converged and the
barriers r1's node wrote; for the first that did not, each region's applied vector and whether
every op log on every cluster holds seqs 1..n. Exit 1 if a run did not converge, 0 if all did.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from faults.workload import first_write, log_dots, prepare, run_load
from topology.local import LocalTopology, TopologyError


def one_run(run: int) -> bool:
    data = tempfile.mkdtemp(prefix="streams-crash-repro-")
    with LocalTopology(
        regions=2, manual_sync=True, data_dir=f"{data}/data", workdir=f"{data}/logs"
    ) as topo:
        prepare(topo)

        def crash() -> None:
            time.sleep(1.5)
            topo.kill_node(1)  # the three at the same instant
            topo.brokers[1].stop()
            topo.stores[1].kill()
            time.sleep(0.5)
            topo.stores[1].start()
            topo.brokers[1].start()
            topo.start_node(1)
            first_write(topo.ports[1], 60)

        try:
            run_load(topo, [1, 2], seconds=5.0, rate=40.0, during=crash)
        except TopologyError as exc:
            print(f"run {run}: r1's node did not start again: {str(exc)[:200]}", flush=True)
            return False
        try:
            topo.sync(timeout=20)
        except TimeoutError as exc:
            print(f"run {run}: did not converge: {exc}", flush=True)
            for i in (1, 2):
                flat = topo.client(i).execute_command("CRDT.INFO")
                info = dict(zip(flat[::2], flat[1::2], strict=True))
                print(f"  r{i} applied {info[b'vector']!r}, waiting ops {info[b'waiting_ops']}")
            for i in (1, 2):
                for topic in ("r1.oplog", "r2.oplog"):
                    seqs = [seq for _origin, seq in log_dots(topo.bootstrap[i], topic)]
                    whole = seqs == list(range(1, len(seqs) + 1))
                    print(f"  {topic} on r{i}'s cluster: {len(seqs)} records, 1..n: {whole}")
            return False
        log = Path(topo.workdir) / "node-r1.log"
        barriers = [
            line.split("own log end not readable (", 1)[1].rsplit("): writing", 1)[0]
            for line in log.read_text().splitlines()
            if "own log end not readable" in line
        ]
        print(f"run {run}: converged; barriers written by r1's node: {barriers or 'none'}")
        return True


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    for run in range(1, runs + 1):
        if not one_run(run):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
