"""A key history with a DEL racing an XADD on three regions, written on a
`LocalTopology(regions=3, manual_sync=True)`: what `streams history` (test_history_kafka.py)
lists and `streams ui` (tests/ui) draws."""

from __future__ import annotations

from typing import Any, cast

from topology.local import LocalTopology


def _text(raw: Any) -> str:
    return cast(bytes, raw).decode()


def raced_orders(topo: LocalTopology) -> dict[str, str]:
    """r1 writes two orders and a group on them (a delivery, an ack); r3 deletes `orders` while
    r2 adds a third; r2 then creates a group without having seen the DEL. Local ops of r1 on
    key `other` between the syncs pin r1's apply order (see the history test). Returns the
    order IDs."""
    c1, c2, c3 = topo.client(1), topo.client(2), topo.client(3)
    seen = {
        "o1": _text(c1.xadd("orders", {"id": "1"})),
        "o2": _text(c1.xadd("orders", {"id": "2"})),
    }
    c1.xgroup_create("other", "w", id="0", mkstream=True)
    topo.sync()
    c1.xgroup_create("orders", "g", id="0")
    c1.xreadgroup("g", "alice", {"orders": ">"})
    c1.xack("orders", "g", seen["o1"])
    c3.delete("orders")  # r3 saw r1's two orders, nothing else
    seen["o3"] = _text(c2.xadd("orders", {"id": "3"}))  # concurrent with the DEL
    topo.sync([1, 2])
    c1.xgroup_createconsumer("other", "w", "bob")  # r1 has r2's XADD, not the DEL
    c2.xgroup_create("orders", "h", id="0")  # r2 has not seen the DEL either
    topo.sync([1, 3])
    c1.xgroup_createconsumer("other", "w", "carol")  # r1 has the DEL, not r2's create
    topo.sync()
    return seen
