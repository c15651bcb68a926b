"""The node's and the SDK's event loop: uvloop when installed, asyncio's on request."""

from __future__ import annotations

import asyncio

import pytest

from streams import eventloop


def test_asyncio_loop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV, raising=False)
    assert eventloop.chosen() == "asyncio"


def test_uvloop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.setenv(eventloop.ENV, "uvloop")
    assert eventloop.chosen() == "uvloop"
    loop = eventloop.new_loop()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_asyncio_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloop.ENV, "asyncio")
    loop = eventloop.new_loop()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)
        assert not type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_run_returns_the_coroutines_result_on_either_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    for name in ("asyncio", "uvloop", ""):
        monkeypatch.setenv(eventloop.ENV, name)
        assert eventloop.run(answer()) == 42


def test_an_unknown_loop_name_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloop.ENV, "tokio")
    with pytest.raises(eventloop.EventLoopError, match="expected one of uvloop, asyncio"):
        eventloop.chosen()


def test_a_node_started_with_an_unknown_loop_exits_with_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from streams.node.__main__ import main

    monkeypatch.setenv(eventloop.ENV, "tokio")
    with pytest.raises(SystemExit) as exited:
        main(["--region", "r1", "--topology", "/nonexistent.toml"])
    assert exited.value.code == 2
    assert "STREAMS_EVENT_LOOP='tokio'" in capsys.readouterr().err
