"""`streams history KEY` on a real 3-region LocalTopology: the docs' DEL-races-XADD example.

r1 writes two orders and a group on them (deliveries, an ack); then r3 deletes the key while r2
adds a third order and, later, creates a group without having seen the DEL. r1's local ops on
another key between the syncs (XGROUP CREATECONSUMER: made on r1's applied vector, nothing
replicated) pin the order in which r1 applied the concurrent ops (the fold gates replicated ops
on local ops' contexts), so the listing's order is the live r1's order:
r2's XADD, then r3's DEL (which keeps the XADD it had not observed and destroys the group), then
r2's group create, beaten by the DEL's tombstone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from replay.raced import raced_orders
from streams.cli import main
from topology.local import LocalTopology


def _text(raw: Any) -> str:
    return cast(bytes, raw).decode()


@pytest.fixture(scope="module")
def raced() -> Iterator[tuple[LocalTopology, dict[str, Any]]]:
    with LocalTopology(regions=3, manual_sync=True, id_mode="strict") as topo:
        seen: dict[str, Any] = dict(raced_orders(topo))
        c1 = topo.client(1)
        seen["xrange"] = [(_text(i), f) for i, f in cast(list[Any], c1.xrange("orders"))]
        seen["groups"] = c1.xinfo_groups("orders")
        yield topo, seen


def _history(boot: str, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, Any]]:
    assert main(["history", "--bootstrap", boot, "orders", "--json", *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_history_lists_every_op_on_the_key_in_apply_order_with_its_effect(
    raced: tuple[LocalTopology, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, seen = raced
    o1, o2, o3 = seen["o1"], seen["o2"], seen["o3"]
    assert seen["xrange"] == [(o3, {b"id": b"3"})] and seen["groups"] == []
    lines = _history(topo.bootstrap[1], capsys)
    *steps, summary = lines
    assert summary["type"] == "summary" and summary["key"] == "orders"
    assert summary["applied"] == len(steps) and summary["not_applied"] == 0
    assert all(s["type"] == "history" and s["v"] == 1 and s["key"] == "orders" for s in steps)
    assert [s["index"] for s in steps] == sorted(s["index"] for s in steps)  # apply order
    # r2 answers r1's AckEffect with its own frontier (ACKED deletes need every region's), at
    # its next flush: before or after its XGROUP CREATE, so it is checked apart.
    answers = [s for s in steps if (s["op"], s["dot"].split(":")[0]) == ("AckEffect", "2")]
    assert len(answers) == 1 and answers[0]["args"]["group"] == "g"
    assert answers[0]["topic"] == "r2.oplog"
    steps = [s for s in steps if s not in answers]
    assert [(s["op"], s["dot"].split(":")[0]) for s in steps] == [
        ("XAdd", "1"),
        ("XAdd", "1"),
        ("GroupCreate", "1"),
        ("Deliver", "local 1"),
        ("Ack", "local 1"),
        ("AckEffect", "1"),
        ("XAdd", "2"),
        ("Del", "3"),
        ("GroupCreate", "2"),
    ]
    add1, add2, create_g, deliver, ack, effect, add3, delete, create_h = steps
    assert [s["topic"] for s in steps] == [
        "r1.oplog",
        "r1.oplog",
        "r1.oplog",
        "r1.local",
        "r1.local",
        "r1.oplog",
        "r2.oplog",
        "r3.oplog",
        "r2.oplog",
    ]
    assert add1["effect"]["added"] == {"id": o1, "origin": 1, "fields": ["id", "1"]}
    assert add2["effect"]["added"]["id"] == o2
    assert add3["effect"]["added"] == {"id": o3, "origin": 2, "fields": ["id", "3"]}
    assert create_g["effect"]["result"] == "created" and create_g["args"]["group"] == "g"
    assert [(d["id"], d["consumer"]) for d in deliver["effect"]["delivered"]] == [
        (o1, "alice"),
        (o2, "alice"),
    ]
    assert deliver["effect"]["consumers_created"] == ["alice"]
    assert [a["id"] for a in ack["effect"]["acked"]] == [o1]
    assert effect["effect"]["result"] == "applied"
    # The DEL's context: r1's two orders, not r2's concurrent XADD nor r1's group create.
    assert delete["ctx"] == {"1": 3}
    assert delete["effect"]["removed"] == [{"id": o1, "origin": 1}, {"id": o2, "origin": 1}]
    assert delete["effect"]["kept_unobserved"] == [{"id": o3, "origin": 2}]
    assert delete["effect"]["groups_destroyed"] == ["g"]
    assert "kept 1 it had not observed (concurrent)" in delete["change"]
    assert create_h["args"]["group"] == "h"
    assert create_h["effect"] == {"result": "beaten", "beaten_by": [delete["dot"]]}
    assert "NOT created: beaten by tombstone(s) 3:1" in create_h["change"]


def test_history_at_a_position_stops_there_and_lists_what_was_read_but_not_applied(
    raced: tuple[LocalTopology, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, seen = raced
    vector = topo.vector(1)
    # Reading an op log stops at the first record past the cut: r2's second op (its answer to
    # r1's AckEffect or its XGROUP CREATE, whichever it flushed first) is read, and its third
    # with it when r2 flushed both in one record (a busy machine), nothing after that record.
    *everything, _ = _history(topo.bootstrap[1], capsys)
    r2_later = sorted(
        (int(s["dot"].split(":")[1]), s["op"]) for s in everything if s["dot"].startswith("2:")
    )[1:]
    *steps, summary = _history(topo.bootstrap[1], capsys, "--at", f"r1={vector['r1']},r2=1,r3=0")
    # r2's XADD is applied and nothing of r2 or r3 past the cut. Not "the last one applied": r1's
    # AckEffect is concurrent with it, and the fold applies concurrent ops in the order it reads
    # them (CI met the AckEffect last once; the full history listed it first).
    applied = [(s["op"], s["dot"]) for s in steps if s["applied"]]
    assert ("XAdd", "2:1") in applied
    assert all(dot == "2:1" or dot.split(":")[0] in ("1", "local 1") for _, dot in applied)
    assert summary["vector"]["r2"] == 1 and summary["vector"].get("r3", 0) == 0
    unapplied = [s for s in steps if not s["applied"]]
    from_r2 = sorted(
        (int(s["dot"].split(":")[1]), s["op"]) for s in unapplied if s["dot"][0] == "2"
    )
    assert from_r2 and from_r2 == r2_later[: len(from_r2)]
    assert [s["op"] for s in unapplied if s["dot"][0] != "2"] == ["Del"]
    assert all("past the requested position" in s["change"] for s in unapplied)


def test_history_text_and_topology_file_and_exit_codes(
    raced: tuple[LocalTopology, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topo, seen = raced
    monkeypatch.chdir(tmp_path)  # no stray audit file may appear here
    path = str(topo.topology_path)
    assert main(["history", "--topology", path, "--region", "r1", "orders"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("history of orders in region r1 (id 1) at r1=")
    assert len(out) == 1 + 10
    assert any(" Del: removed 2 entries" in line and "r3.oplog@0" in line for line in out)
    assert main(["history", "--topology", path, "--region", "r1", "nothing"]) == 0
    assert "(no op in these logs touched key nothing)" in capsys.readouterr().out
    assert main(["history", "--topology", path, "--region", "r9", "orders"]) == 3
    assert main(["history", "--topology", path, "orders"]) == 3
    assert main(["history", "--bootstrap", topo.bootstrap[1], "orders", "--at", "r7=1"]) == 3
    assert "unknown region 'r7'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
