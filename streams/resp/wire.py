"""The stream transport the RESP server writes to, named by its methods.

uvloop's transports (`streams.eventloop`) have asyncio's methods but are no subclass of
`asyncio.Transport`, so the server (compiled by mypyc, which checks declared classes at run time)
names what it uses instead of the class.
"""

from __future__ import annotations

from typing import Any, Protocol


class Wire(Protocol):
    """What the server uses of a stream transport. uvloop's transports (`streams.eventloop`) have
    asyncio's methods but are no subclass of `asyncio.Transport`, so the server names the
    methods it needs, not the class."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...

    def is_closing(self) -> bool: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_write_buffer_size(self) -> int: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...
