"""A partition: the mirrors into region r3 stop for a few seconds while every region writes,
deletes, trims and creates/destroys groups; then they resume. After the heal the regions converge
on their own (continuous mirrors, no manual sync) within a bound the test records, nothing
acknowledged is lost, and the seed tables' conflict outcomes hold on the healed state:
observed-remove (a DEL or XTRIM removes only what its region had seen) and delete-wins (DEL and
XGROUP DESTROY beat a concurrent XGROUP CREATE)."""

from __future__ import annotations

import time

from faults.workload import (
    check_dots,
    check_logs_fold_to_nodes,
    check_no_loss,
    plain_client,
    prepare,
    run_load,
    settle,
    summary,
    waited,
)
from topology.local import LocalTopology

RATE = 60.0
PARTITION_S = 4.0


def ids(client: object, key: bytes) -> list[bytes]:
    return [eid for eid, _f in client.xrange(key)]  # type: ignore[attr-defined]


def test_a_partitioned_region_heals_converged_with_observed_remove_and_delete_wins() -> None:
    with LocalTopology(regions=3, manual_sync=False) as topo:
        prepare(topo)
        c1, c2, c3 = (plain_client(topo.ports[i]) for i in (1, 2, 3))
        # Before the partition, seen everywhere: an entry to DEL, entries to trim, a group to DEL.
        seen_by_all = c1.xadd(b"or:del", {b"p": b"observed"})
        trimmed = [c1.xadd(b"or:trim", {b"p": b"t%d" % n}) for n in range(10)]
        c1.xgroup_create(b"dw:del", b"group1", id="0", mkstream=True)
        settle(topo)
        assert topo.mirrors is not None
        into_r3 = [topo.mirrors.mirror(s, "r3") for s in ("r1", "r2")]
        outcome: dict[str, object] = {}

        def partition() -> None:
            time.sleep(1.0)
            for mirror in into_r3:
                mirror.pause()
            cut = time.monotonic()
            # Concurrent with r3, which cannot see any of this:
            c1.delete(b"or:del")  # observed-remove: removes only what r1 saw
            outcome["unseen"] = c3.xadd(b"or:del", {b"p": b"unseen"})
            c1.xtrim(b"or:trim", maxlen=0)  # observed-remove for trims
            outcome["r3_trim"] = [c3.xadd(b"or:trim", {b"p": b"r3-%d" % n}) for n in range(5)]
            c1.delete(b"dw:del")  # delete wins over r3's concurrent create
            assert c3.xgroup_create(b"dw:del", b"group2", id="0")
            c1.xgroup_create(b"dw:destroy", b"group1", id="0", mkstream=True)
            waited(lambda: c2.exists(b"dw:destroy") == 1, 20)
            assert c2.xgroup_destroy(b"dw:destroy", b"group1") == 1
            assert c3.xgroup_create(b"dw:destroy", b"group1", id="0", mkstream=True)
            time.sleep(max(0.0, PARTITION_S - (time.monotonic() - cut)))
            v1, v2, v3 = topo.vector(1), topo.vector(2), topo.vector(3)
            outcome["r3_behind"] = {
                "r1": v1["r1"] - v3.get("r1", 0),
                "r2": v2["r2"] - v3.get("r2", 0),
            }
            healed = time.monotonic()
            for mirror in into_r3:
                mirror.resume()
            outcome["healed"] = healed
            outcome["caught_up_s"] = waited(
                lambda: (v := topo.vector(3))["r1"] >= v1["r1"] and v["r2"] >= v2["r2"], 20
            )

        ledgers = run_load(topo, [1, 2, 3], seconds=7.0, rate=RATE, during=partition, tail=1.0)
        stopped = time.monotonic()

        def converged() -> bool:
            digests = {c.execute_command("CRDT.DIGEST") for c in (c1, c2, c3)}
            vectors = [topo.vector(i) for i in (1, 2, 3)]
            return len(digests) == 1 and all(v == vectors[0] for v in vectors)

        took = waited(converged, 60)
        healed = outcome["healed"]
        assert isinstance(healed, float)
        print(
            f"\npartition: mirrors into r3 paused {PARTITION_S:g} s under 3 regions x {RATE:g} "
            f"req/s; r3 was behind by {outcome['r3_behind']} ops at the heal"
        )
        print(summary(ledgers))
        print(
            f"  r3 applied the backlog {outcome['caught_up_s']:.2f}s after the heal (under load); "
            f"all digests equal {took:.2f}s after the writers stopped "
            f"({stopped - healed + took:.2f}s after the heal, writers ran 1 s past it)"
        )
        settle(topo)
        counts = check_no_loss(topo, ledgers)
        print(f"  checked in every region: {counts}")
        for c in (c1, c2, c3):
            assert ids(c, b"or:del") == [outcome["unseen"]]  # seen entry gone, unseen one kept
            assert seen_by_all not in ids(c, b"or:del")
            assert ids(c, b"or:trim") == outcome["r3_trim"]
            assert not set(trimmed) & set(ids(c, b"or:trim"))
            assert c.exists(b"dw:del") == 0  # DEL beat the concurrent group2
            assert c.exists(b"dw:destroy") == 0  # DESTROY beat the concurrent group1
        print("  observed-remove (DEL, XTRIM) and delete-wins (DEL, DESTROY vs CREATE) hold")
        check_logs_fold_to_nodes(topo)
        dots = check_dots(topo)
        print(f"  logs fold to the digests; op logs 1..n on every cluster ({sum(dots.values())})")
