"""Encode reply values as RESP2 or RESP3 bytes (the sans-I/O half of the server's output)."""

from __future__ import annotations

from mypy_extensions import mypyc_attr

from streams.errors import CommandError
from streams.reply import NULL_ARRAY, Map, Reply, Status


@mypyc_attr(native_class=False)
class Encoded(bytes):
    """A reply already in RESP, sent as it is: one whose bytes are the same in RESP2 and RESP3
    (arrays of bulk strings), produced in slices (`streams.commands.slices`)."""


def encode(reply: Reply, proto: int = 2) -> bytes:
    if type(reply) is Encoded:
        return reply
    out: list[bytes] = []
    _encode(reply, proto, out)
    return b"".join(out)


_NEWLINES_TO_SPACES = bytes.maketrans(b"\r\n", b"  ")


def _one_line(text: str) -> bytes:
    """A simple string or error must not hold CR or LF (errors may quote client input); Redis
    turns them into spaces (addReplyErrorFormat). Client bytes that are not UTF-8 and were
    decoded with `surrogateescape` go back out as the same bytes."""
    return text.encode("utf-8", "surrogateescape").translate(_NEWLINES_TO_SPACES)


def _encode(reply: Reply, proto: int, out: list[bytes]) -> None:
    if isinstance(reply, bytes):
        out.append(b"$%d\r\n%s\r\n" % (len(reply), reply))
    elif isinstance(reply, bool):
        raise TypeError("bool is not a reply value")
    elif isinstance(reply, int):
        out.append(b":%d\r\n" % reply)
    elif reply is None:
        out.append(b"_\r\n" if proto == 3 else b"$-1\r\n")
    elif isinstance(reply, list):
        out.append(b"*%d\r\n" % len(reply))
        for item in reply:
            _encode(item, proto, out)
    elif isinstance(reply, Status):
        out.append(b"+%s\r\n" % _one_line(reply.text))
    elif isinstance(reply, CommandError):
        out.append(b"-%s\r\n" % _one_line(reply.text))
    elif isinstance(reply, Map):
        if proto == 3:
            out.append(b"%%%d\r\n" % len(reply.pairs))
        elif reply.nested:
            out.append(b"*%d\r\n" % len(reply.pairs))
        else:
            out.append(b"*%d\r\n" % (2 * len(reply.pairs)))
        for k, v in reply.pairs:
            if proto != 3 and reply.nested:
                out.append(b"*2\r\n")
            _encode(k, proto, out)
            _encode(v, proto, out)
    elif reply is NULL_ARRAY:
        out.append(b"_\r\n" if proto == 3 else b"*-1\r\n")
    else:
        raise TypeError(f"not a reply value: {reply!r}")
