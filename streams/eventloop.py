"""Which asyncio event loop the node and the SDK run on: asyncio's own, or uvloop on request.

uvloop (libuv under asyncio's API) runs a loop iteration, a transport's reads and writes and a
callback's scheduling in C, where asyncio's default loop runs them in Python; issue 34's profile
put asyncio's loop at about 15 % of the node's CPU at pipeline 16. Measured here it gained
nothing: `python -m bench.ab --tree . --tree .@STREAMS_EVENT_LOOP=asyncio` (compiled core, one
region on Tansu, c50, 200,000 XADDs, 3 rounds alternating, quiet 2-core machine) gave P16 10,774
/s on uvloop against 11,622 /s on asyncio's loop and P1 3,916 against 5,464 (medians; asyncio's
loop ahead by 1.06 in the median of per-round ratios): on two cores the broker, librdkafka's
threads and the benchmark client take the CPU the loop would save. So asyncio's loop stays the
default and uvloop is a setting (docs/benchmarks.md, "Event loop").

`STREAMS_EVENT_LOOP=uvloop` runs uvloop (`pip install uvloop`; without it the node refuses to
start, saying so); `=asyncio` or unset runs asyncio's loop. Nothing else depends on the choice:
the node uses only the loop API both implement (servers, protocols, futures,
call_soon_threadsafe, signal handlers), and the RESP server names the transport methods it uses
(`streams.resp.wire`), as uvloop's transports are no `asyncio.Transport`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "STREAMS_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


class EventLoopError(RuntimeError):
    """STREAMS_EVENT_LOOP names a loop that is unknown or not installed."""


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def chosen() -> str:
    """The loop `new_loop` makes: "asyncio" unless STREAMS_EVENT_LOOP asks for "uvloop"."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted not in ("", *CHOICES):
        raise EventLoopError(f"{ENV}={wanted!r}: expected one of {', '.join(CHOICES)}")
    if wanted != "uvloop":
        return "asyncio"
    if _uvloop_factory() is None:
        raise EventLoopError(f"{ENV}=uvloop, but uvloop is not installed (pip install uvloop)")
    return "uvloop"


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the chosen kind."""
    if chosen() == "uvloop":
        factory = _uvloop_factory()
        assert factory is not None
        return factory()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the chosen loop."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main)
