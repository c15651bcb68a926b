"""`streams ui` in a real browser, on the 3-region DEL-races-XADD history of
tests/replay/test_history_kafka.py: r1 writes two orders and a group, r3 deletes the key while
r2 adds a third order and later creates a group without having seen the DEL.

The page is served by the real command (`streams ui --topology FILE --region r1 --port 0`, a
subprocess) and read by Debian's chromium through Playwright; what it draws is checked against
what the text verbs print: the ops against `streams history --json`, the state at a clicked op
against `streams replay --at <that op's position> --key orders --json`.

Set STREAMS_UI_SCREENSHOT=path.png to save the page (docs/ui-history.png is made so).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, cast

import pytest
from replay.raced import raced_orders

from streams.cli import main
from topology.local import LocalTopology
from ui.browser import chromium

pytestmark = [pytest.mark.slow, pytest.mark.kafka]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[LocalTopology, str, dict[str, str]]]:
    with LocalTopology(regions=3, manual_sync=True, id_mode="strict") as topo:
        seen = raced_orders(topo)
        command = [sys.executable, "-m", "streams.cli", "ui", "--topology"]
        command += [str(topo.topology_path), "--region", "r1", "--port", "0"]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "http://127.0.0.1:" in line, line
            url = line.split("http://", 1)[1].split("/", 1)[0]
            yield topo, f"http://{url}/", seen
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def _json_lines(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(list(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _hook(view: dict[str, Any]) -> str:
    """`streams history`'s dot (`3:1`, `local 1:2`) as the page's data-op (shard 0 inserted)."""
    who, seq = view["dot"].rsplit(":", 1)
    return f"{who}:0:{seq}"


def test_the_key_page_draws_three_lanes_every_op_the_arrows_and_the_state_at_a_clicked_op(
    served: tuple[LocalTopology, str, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    topo, url, seen = served
    boot = topo.bootstrap[1]
    *steps, _summary = _json_lines(capsys, "history", "--bootstrap", boot, "orders", "--json")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 700})
        page.goto(url + "key/orders")
        page.wait_for_selector("[data-op]")
        lanes = page.eval_on_selector_all("[data-lane]", "els => els.map(e => e.textContent)")
        assert lanes == ["r1", "r2", "r3"]
        drawn = page.eval_on_selector_all(
            "[data-op]", "els => els.map(e => [e.dataset.op, e.dataset.region])"
        )
        names = {"1": "r1", "2": "r2", "3": "r3"}
        expected = [[_hook(s), names[s["dot"].split(":")[0].removeprefix("local ")]] for s in steps]
        assert drawn == expected  # every op, in r1's apply order, on its origin's lane
        delete = next(s for s in steps if s["op"] == "Del")
        arrows = page.eval_on_selector_all(
            "path.arrow", "els => els.map(e => [e.dataset.from, e.dataset.to])"
        )
        # The DEL had seen r1's ops up to seq 3: on this key, r1's second XADD (seq 2).
        assert delete["ctx"] == {"1": 3} and [_hook(delete), "1:0:2"] in arrows
        create_h = next(s for s in steps if s["op"] == "GroupCreate" and s["dot"][0] == "2")
        r1_seqs = [int(s["dot"].split(":")[1]) for s in steps if s["dot"].startswith("1:")]
        newest = max(q for q in r1_seqs if q <= create_h["ctx"]["1"])
        assert newest > 2  # r2 had seen r1's group ops on the key too (its AckEffect) ...
        assert [_hook(create_h), f"1:0:{newest}"] in arrows  # ... and not the DEL:
        assert not [a for a in arrows if a[0] == _hook(create_h) and a[1].startswith("3:")]

        shown_at: dict[str, list[list[Any]]] = {}
        for clicked in (next(s for s in steps if s["op"] == "XAdd"), delete):
            page.click(f'[data-op="{_hook(clicked)}"]')
            page.wait_for_selector(f'#state[data-index="{clicked["index"]}"]')
            at = cast(str, page.get_attribute("#state", "data-at"))
            lines = _json_lines(
                capsys, "replay", "--bootstrap", boot, "--at", at, "--key", "orders", "--json"
            )
            keys = [x for x in lines if x["type"] == "key"]
            shown = page.eval_on_selector_all(
                "#entries tr", "els => els.map(e => [e.dataset.entry, Number(e.dataset.origin)])"
            )
            groups = page.eval_on_selector_all("#groups tr", "els => els.map(e => e.dataset.group)")
            assert shown == [[e["id"], e["origin"]] for e in keys[0]["entries"]]
            assert groups == [g["name"] for g in keys[0]["groups"]]
            assert page.text_content("#command") == f"streams replay --at {at} --key orders"
            shown_at[clicked["op"]] = shown
        assert shown_at["XAdd"] == [[seen["o1"], 1]]
        # After the DEL, r1 holds only r2's concurrent order (the DEL had not observed it).
        assert shown_at["Del"] == [[seen["o3"], 2]]
        vectors = page.eval_on_selector_all(
            "#vectors tr", "els => els.map(e => [e.dataset.region, e.dataset.exact])"
        )
        assert vectors[0] == ["r1", "true"]

        page.wait_for_selector("#diff p:nth-child(2)")  # r2 and r3 compared (streams diff)
        compared = cast(str, page.text_content("#diff"))
        assert "r2: same orders as r1" in compared and "r3: same orders as r1" in compared
        if os.environ.get("STREAMS_UI_SCREENSHOT"):
            page.screenshot(path=os.environ["STREAMS_UI_SCREENSHOT"], full_page=True)

        page.goto(url + "key/nothing")
        page.wait_for_selector("#message")
        assert page.text_content("#message") == "no op in these logs touched key nothing"
        page.goto(url)
        page.wait_for_selector("#keys tr[data-key]")
        rows = page.eval_on_selector_all("#keys tr[data-key]", "els => els.map(e => e.dataset.key)")
        assert rows == ["orders", "other"]
