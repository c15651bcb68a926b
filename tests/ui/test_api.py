"""The `streams ui` JSON API over HTTP, on a history folded in memory: no broker.

Three pure-core regions write a key: r1 two entries, then r3 deletes the key while r2 adds one
(concurrently); region 1's cluster holds r1's ops, then r2's, then r3's. `replay` is replaced by
the same fold over those records (what `streams.replay.run.replay` does after reading them), so
everything above it runs for real: `streams history`'s watch of the key, the ui's pages, its
states at a point (`--at`), its answers to bad requests.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from streams.crdt import ops
from streams.crdt.fold import Fold, Record
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.replay import history, logs, run
from streams.replay.positions import resolve_at
from streams.replay.replayed import Replayed
from streams.ui.server import make_server
from streams.ui.source import Source

NAMES = {1: "r1", 2: "r2", 3: "r3"}
LOGS = logs.Logs("mem:1", "r1", 1, "r1.local", ["r1.oplog", "r2.oplog", "r3.oplog"], 1, NAMES)
Logged = tuple[tuple[str, int], int, Record]


def _records() -> list[Logged]:
    r1, r2, r3 = Region(1), Region(2), Region(3)
    a = r1.issue(ops.XAdd(b"k", (1, 0), (b"f", b"a")), 1)
    b = r1.issue(ops.XAdd(b"k", (2, 0), (b"f", b"b")), 2)
    other = r1.issue(ops.XAdd(b"z", (3, 0), (b"f", b"z")), 3)
    for op in (a, b, other):
        r2.receive(op)
        r3.receive(op)
    c = r2.issue(ops.XAdd(b"k", (4, 0), (b"f", b"c")), 4)  # concurrent with the DEL
    d = r3.issue(ops.Del(b"k"), 5)
    return [
        (("r1.oplog", 0), 0, a),
        (("r1.oplog", 0), 1, b),
        (("r1.oplog", 0), 2, other),
        (("r2.oplog", 0), 0, c),
        (("r3.oplog", 0), 0, d),
    ]


def _fake_replay(records: list[Logged]) -> Any:
    def replay(req: run.Request) -> Replayed:
        make = req.make_region or Region
        cut = resolve_at(req.at, LOGS.ids) if req.at else None
        fold = Fold(make(1, IdMode.STRICT), cut=cut, observer=req.observer)
        for part, offset, record in records:
            if req.listen is not None:
                req.listen(part, offset, record)
            fold.feed(part, offset, record)
        fold.finish()
        return Replayed({0: fold}, LOGS)

    return replay


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    replay = _fake_replay(_records())
    monkeypatch.setattr(history, "replay", replay)
    monkeypatch.setattr(run, "replay", replay)
    source = Source("mem:1", "r1")
    source._logs = LOGS
    server = make_server(source, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def _error(url: str) -> tuple[int, str]:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, timeout=10)
    return caught.value.code, json.loads(caught.value.read())["error"]


def test_a_key_page_lists_its_ops_in_apply_order_with_hooks_lanes_and_seen_ops(url: str) -> None:
    page = _get(f"{url}/api/key/k")
    assert [lane["region"] for lane in page["lanes"]] == ["r1", "r2", "r3"]
    assert [(op["id"], op["region"], op["op"]) for op in page["ops"]] == [
        ("1:0:1", "r1", "XAdd"),
        ("1:0:2", "r1", "XAdd"),
        ("2:0:1", "r2", "XAdd"),
        ("3:0:1", "r3", "Del"),
    ]
    # Both had seen r1's ops up to seq 3 (the third on key z): on key k, r1's second XADD.
    assert [op["seen"] for op in page["ops"]] == [[], [], ["1:0:2"], ["1:0:2"]]
    assert page["ops"][3]["at"] == "r1=3,r2=1,r3=1"
    assert "kept 1 it had not observed" in page["ops"][3]["change"]
    second = _get(f"{url}/api/key/k?offset=1&limit=2")
    assert [op["id"] for op in second["ops"]] == ["1:0:2", "2:0:1"]
    assert (second["total"], second["offset"], second["limit"]) == (4, 1, 2)


def test_the_state_after_an_op_is_the_fold_at_its_position(url: str) -> None:
    page = _get(f"{url}/api/key/k")
    after_del = _get(f"{url}/api/state/k?index={page['ops'][3]['index']}")
    assert after_del["at"] == "r1=3,r2=1,r3=1"
    assert after_del["command"] == "streams replay --at r1=3,r2=1,r3=1 --key k"
    assert [(e["id"], e["origin"]) for e in after_del["state"]["entries"]] == [("4-0", 2)]
    assert after_del["vectors"]["r1"] == {
        "vector": {"r1": 3, "r2": 1, "r3": 1},
        "exact": True,
        "why": "r1 replayed to this point",
    }
    assert (
        after_del["vectors"]["r3"]["vector"] == {"r1": 3}
        and not after_del["vectors"]["r3"]["exact"]
    )
    after_b = _get(f"{url}/api/state/k?index={page['ops'][1]['index']}")
    assert [e["fields"] for e in after_b["state"]["entries"]] == [["f", "a"], ["f", "b"]]


def test_the_key_list_counts_ops_and_says_which_keys_exist(url: str) -> None:
    keys = _get(f"{url}/api/keys")["keys"]
    assert keys == [
        {"key": "k", "ops": 4, "exists": True, "length": 1, "groups": 0},
        {"key": "z", "ops": 1, "exists": True, "length": 1, "groups": 0},
    ]


def test_bad_requests_get_a_reason_and_an_unknown_key_an_empty_page(url: str) -> None:
    empty = _get(f"{url}/api/key/nothing")
    assert empty["ops"] == [] and empty["message"] == "no op in these logs touched key nothing"
    assert _error(f"{url}/api/state/k?index=x") == (400, "index='x' is not a number")
    assert _error(f"{url}/api/state/k")[0] == 400
    assert _error(f"{url}/api/nope/k") == (400, "no API /api/nope")
    assert _get(f"{url}/api/state/k?index=99")["message"] == "no op of key k was applied 99-th"
    assert not _get(f"{url}/api/diff/k")["available"]  # one cluster known: nothing to compare
    with urllib.request.urlopen(f"{url}/key/k", timeout=10) as reply:
        assert b'<script src="/static/ui.js">' in reply.read()
