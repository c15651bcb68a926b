"""Which asyncio event loop the node and the SDK run on: uvloop when it is installed, else
asyncio's own.

uvloop (libuv under asyncio's API) runs a loop iteration, a transport's reads and writes and a
callback's scheduling in C, where asyncio's default loop runs them in Python: that was about 15 %
of the node's CPU at pipeline 16 (issue 34's profile, `Handle._run` and the transports).
Nothing here depends on the choice: the node uses only the loop API both implement (servers,
protocols, futures, call_soon_threadsafe, signal handlers).

`STREAMS_EVENT_LOOP=asyncio` keeps asyncio's loop (to compare, or to rule the loop out when
chasing a bug); `=uvloop` demands uvloop and fails clearly without it; unset picks uvloop if it
imports.
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
    """The loop `new_loop` makes: "uvloop" or "asyncio" (see the module docstring)."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted not in ("", *CHOICES):
        raise EventLoopError(f"{ENV}={wanted!r}: expected one of {', '.join(CHOICES)}")
    if wanted == "asyncio":
        return "asyncio"
    if _uvloop_factory() is not None:
        return "uvloop"
    if wanted == "uvloop":
        raise EventLoopError(f"{ENV}=uvloop, but uvloop is not installed (pip install uvloop)")
    return "asyncio"


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
