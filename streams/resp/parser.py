"""The sans-I/O request parser: bytes in, argument lists out, Redis 7.0's rules and error texts.

A port of `processMultibulkBuffer` / `processInlineBuffer` (networking.c) and `sdssplitargs`
(sds.c) of Redis 7.0, so any client that works with Redis works here, and a client sending garbage
gets the same `-ERR Protocol error: ...` text Redis sends before it closes the connection (the
texts were checked against redis-server 7.0.15). hiredis's Reader is a *reply* parser: it accepts
things a server must refuse (`*1\\r\\n:1\\r\\n`, nested arrays), knows nothing of inline commands,
and its error texts are not Redis's, hence this module.

What a request is:
- a line starting with `*`: a multibulk, `*<n>\\r\\n` then n times `$<len>\\r\\n<len bytes>\\r\\n`;
  n <= 0 is an empty request (ignored); n > INT_MAX is `invalid multibulk length`; a bulk length
  above `proto-max-bulk-len` (512 MB) is `invalid bulk length`. Numbers follow Redis's
  `string2ll` (no sign `+`, no leading zero, no spaces). Like Redis, the two bytes after a bulk's
  data and the byte after a header's `\\r` are skipped unchecked.
- any other line (up to `\\n`, an optional `\\r` before it removed): an inline command, split like
  `sdssplitargs` (spaces separate, "double quotes" with \\n \\xHH escapes, 'single quotes');
  an empty line is an empty request. A line (or header) longer than 64 KB is refused as Redis
  refuses it (`too big inline request`, `too big mbulk count string`, `too big bulk count string`).

One deliberate difference: Redis looks for the end of a line with `strchr`, which stops at a NUL
byte, so a NUL inside a header or inline line makes Redis wait silently (until 64 KB arrive). Here a
NUL is an ordinary byte of a header (so `*1\\0\\r\\n` is `invalid multibulk length`, answered at
once), and ends the inline line's text as it ends `sdssplitargs`'s input.

The parser keeps the partial request (arguments read so far, the pending bulk length), so feeding
a 10 MB value in 64 KB pieces costs one join, not a rescan per piece. Requests written the way
client libraries write them take a fast path (`_canonical`: one C-level split of the read, one
batch check) that the careful port would parse identically; the unit tests hold both to a
reference model of Redis's rules.
"""

from __future__ import annotations

import re
from itertools import compress, islice
from operator import eq
from typing import Final

from streams.numbers import string2ll
from streams.resp.request import Dropped

MAX_INLINE: Final = 64 * 1024
"""PROTO_INLINE_MAX_SIZE: the longest inline line or header line."""
MAX_MULTIBULK: Final = 2**31 - 1
"""Redis 7.0 refuses a multibulk count above INT_MAX (6.x refused above 1024*1024)."""
MAX_BULK: Final = 512 * 1024 * 1024
"""proto-max-bulk-len's default."""
UNAUTH_MULTIBULK: Final = 10
UNAUTH_BULK: Final = 16384
"""Redis 7's limits on a request of a connection that must authenticate and has not yet
(networking.c): more arguments, or a longer one, is a protocol error, so a client without the
password cannot make the server read (and hold) a 512 MB value."""

KEPT_FLOOR: Final = 4096
"""`max_kept` is never lower: the fast path (`_canonical`) keeps every value shorter than this
whole, and no op log takes records that small anyway."""

_PREFIX: Final = "ERR Protocol error: "
_SPACE: Final = frozenset(b" \t\n\r\f\v")  # C isspace() in the C locale
_TOKEN_END: Final = frozenset(b" \t\n\r")  # what ends an unquoted token (besides NUL)
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES: Final = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_UNQUOTED_TOKEN: Final = re.compile(rb"[^ \t\n\r\f\v][^ \t\n\r]*")


class ProtocolError(Exception):
    """The client broke the protocol; `reply` is the error text to send before closing."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.reply = _PREFIX + detail


def split_args(line: bytes) -> list[bytes] | None:
    """`sdssplitargs`: the arguments of an inline command, or None for unbalanced quotes."""
    nul = line.find(b"\0")
    if nul >= 0:
        line = line[:nul]
    if b'"' not in line and b"'" not in line:
        return _UNQUOTED_TOKEN.findall(line)
    return _split_quoted(line)


def _split_quoted(line: bytes) -> list[bytes] | None:
    """The general case of `sdssplitargs`, character by character as the C code walks it."""
    n = len(line)
    i = 0
    out: list[bytes] = []
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n:
            return out
        token = bytearray()
        in_double = in_single = done = False
        while not done:
            c = line[i] if i < n else 0
            nxt = line[i + 1] if i + 1 < n else 0
            if in_double:
                if (
                    c == 0x5C
                    and nxt == 0x78
                    and i + 3 < n
                    and line[i + 2] in _HEX
                    and (line[i + 3] in _HEX)
                ):
                    token.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 0x5C and nxt:
                    i += 1
                    token.append(_ESCAPES.get(nxt, nxt))
                elif c == 0x22:
                    if nxt and nxt not in _SPACE:  # a closing quote must end the token
                        return None
                    done = True
                elif not c:
                    return None
                else:
                    token.append(c)
            elif in_single:
                if c == 0x5C and nxt == 0x27:
                    i += 1
                    token.append(0x27)
                elif c == 0x27:
                    if nxt and nxt not in _SPACE:
                        return None
                    done = True
                elif not c:
                    return None
                else:
                    token.append(c)
            elif not c or c in _TOKEN_END:
                done = True
            elif c == 0x22:
                in_double = True
            elif c == 0x27:
                in_single = True
            else:
                token.append(c)
            if i < n:
                i += 1
        out.append(bytes(token))


class RequestParser:
    """Feed bytes as they arrive; get back the complete requests, in order.

    After a protocol error `feed` returns the requests completed before the bad bytes, sets
    `error` to the reply text (`ERR Protocol error: ...`) and ignores everything fed later: the
    connection answers those requests, then the error, then closes, as Redis does.

    While `gated` (the connection must still authenticate), Redis's unauthenticated limits hold
    (`UNAUTH_MULTIBULK`, `UNAUTH_BULK`) and requests are parsed one at a time: the bytes after a
    complete request wait (`stalled`) until the connection has answered it and calls `resume`,
    so `AUTH` and a large request pipelined behind it are read as Redis reads them, the second
    one under the limits of a connection that is authenticated by then.

    An argument longer than `max_kept` (and within `max_bulk`) is read and dropped as it
    arrives, never held: its request comes out as a `Dropped` (see there).
    """

    __slots__ = (
        "error",
        "gated",
        "_rest",
        "_max_bulk",
        "_max_kept",
        "_max_multibulk",
        "_max_inline",
        "_chunks",
        "_held",
        "_need",
        "_until",
        "_args",
        "_left",
        "_bulk",
        "_skip",
        "_dropped",
    )

    def __init__(
        self,
        *,
        max_bulk: int = MAX_BULK,
        max_kept: int = MAX_BULK,
        max_multibulk: int = MAX_MULTIBULK,
        max_inline: int = MAX_INLINE,
    ) -> None:
        self.error: str | None = None
        self.gated = False
        self._rest = b""  # while gated: the bytes after the request being answered
        self._max_bulk = max_bulk
        self._max_kept = max(max_kept, KEPT_FLOOR)
        self._max_multibulk = max_multibulk
        self._max_inline = max_inline
        # Unparsed bytes (from a request or argument boundary) wait in `_chunks` until parsing
        # can move on: until they reach `_need` bytes (a bulk's data), or until a chunk brings
        # the `_until` byte (the end of a line) or the line grows too big. So a value or a line
        # arriving in small pieces is joined once, never re-copied and re-scanned per piece.
        self._chunks: list[bytes] = []
        self._held = 0  # total length of `_chunks`
        self._need = 0
        self._until: bytes | None = None
        self._args: list[bytes] = []  # the arguments read so far of a partial multibulk
        self._left = 0  # arguments still to read of that multibulk (0: between requests)
        self._bulk = -1  # the length of the argument whose `$<len>` line was read, else -1
        self._skip = 0  # bytes still to drop of an argument over `max_kept` (its CRLF included)
        self._dropped = 0  # the longest argument dropped from the partial multibulk, else 0

    @property
    def buffered(self) -> int:
        """Bytes held for a request not complete yet (for tests and memory accounting)."""
        return self._held + sum(len(a) for a in self._args)

    @property
    def max_bulk(self) -> int:
        """proto-max-bulk-len: the longest argument accepted (CONFIG SET changes it live)."""
        return self._max_bulk

    @max_bulk.setter
    def max_bulk(self, value: int) -> None:
        self._max_bulk = value

    @property
    def max_kept(self) -> int:
        """The longest argument kept: a longer one (up to `max_bulk`) is read and dropped.
        Never below `KEPT_FLOOR`."""
        return self._max_kept

    @max_kept.setter
    def max_kept(self, value: int) -> None:
        self._max_kept = max(value, KEPT_FLOOR)

    @property
    def stalled(self) -> bool:
        """Gated and holding bytes behind a request not answered yet (see `resume`)."""
        return bool(self._rest)

    def resume(self) -> list[list[bytes]]:
        """The connection answered the request a gated feed returned: parse what came after it
        (under the limits `gated` says now)."""
        rest, self._rest = self._rest, b""
        return self.feed(rest) if rest else []

    def feed(self, data: bytes) -> list[list[bytes]]:
        if self.error is not None:
            return []
        if self._rest:  # gated, a request is being answered: its successors wait
            self._rest += data
            return []
        if self._chunks:
            self._chunks.append(data)
            self._held += len(data)
            if self._need:
                if self._held < self._need:
                    return []
            elif self._until is not None and self._until not in data:
                if self._held <= self._max_inline:
                    return []
            buf = b"".join(self._chunks)
            self._chunks = []
            self._held = self._need = 0
            self._until = None
        else:
            buf = data
        out: list[list[bytes]] = []
        try:
            pos = 0
            if self._left:  # finish the request a previous feed left partial
                pos = self._parse(buf, 0, out, one=True)
                if self._left or self._need:
                    return out
            if self.gated:
                if not out:
                    pos = self._parse(buf, pos, out, one=True)
                if out and pos < len(buf) and not self._need and self._until is None:
                    self._rest = buf[pos:]
                return out
            pos = _canonical(buf, pos, out)
            self._parse(buf, pos, out, one=False)
        except ProtocolError as exc:
            self.error = exc.reply
            self._chunks = []
            self._held = self._need = 0
            self._args = []
            self._left = 0
            self._skip = self._dropped = 0
        return out

    def _parse(self, buf: bytes, pos: int, out: list[list[bytes]], *, one: bool) -> int:
        """Parse `buf` from `pos` as far as it goes, or with `one` only to the end of the
        multibulk a previous feed left partial; keep what is left for the next feed and return
        the position after the last complete request."""
        n = len(buf)
        args = self._args
        left = self._left
        bulk = self._bulk
        max_inline = self._max_inline
        max_bulk = self._max_bulk
        max_kept = self._max_kept
        find = buf.find
        try:
            while True:
                if not left:  # at the start of a request
                    if pos >= n:
                        return pos
                    if buf[pos] != 0x2A:  # not '*': an inline command
                        inline = self._inline(buf, pos)
                        if inline is None:
                            self._until = b"\n"
                            return pos
                        pos, request = inline
                        if request:
                            out.append(request)
                            if one:
                                return pos
                        continue
                    cr = find(b"\r", pos)
                    if cr < 0 or cr - pos > max_inline:
                        if n - pos > max_inline:
                            raise ProtocolError("too big mbulk count string")
                        self._until = b"\r"
                        return pos
                    if cr + 1 >= n:  # the byte after '\r' is not here yet
                        self._need = n - pos + 1
                        return pos
                    count = string2ll(buf[pos + 1 : cr])
                    if count is None or count > self._max_multibulk:
                        raise ProtocolError("invalid multibulk length")
                    if count > UNAUTH_MULTIBULK and self.gated:
                        raise ProtocolError("unauthenticated multibulk length")
                    pos = cr + 2
                    if count <= 0:
                        continue
                    left = count
                    args = []
                while left:  # the arguments of a multibulk
                    if bulk < 0:
                        cr = find(b"\r", pos)
                        if cr < 0 or cr - pos > max_inline:
                            if n - pos > max_inline:
                                raise ProtocolError("too big bulk count string")
                            self._until = b"\r"
                            return pos
                        if cr + 1 >= n:
                            self._need = n - pos + 1
                            return pos
                        if buf[pos] != 0x24:  # '$'
                            got = buf[pos : pos + 1].decode("utf-8", "surrogateescape")
                            raise ProtocolError(f"expected '$', got '{got}'")
                        line = buf[pos + 1 : cr]
                        # a number too long for string2ll is above max_bulk too: same error
                        if not line.isdigit() or (line[0] == 0x30 and len(line) > 1):
                            raise ProtocolError("invalid bulk length")
                        bulk = int(line)
                        if bulk > max_bulk:
                            raise ProtocolError("invalid bulk length")
                        if bulk > UNAUTH_BULK and self.gated:
                            raise ProtocolError("unauthenticated bulk length")
                        pos = cr + 2
                        if bulk > max_kept:
                            self._skip = bulk + 2
                            self._dropped = max(self._dropped, bulk)
                    if self._skip:
                        taken = min(self._skip, n - pos)
                        pos += taken
                        self._skip -= taken
                        if self._skip:  # the rest of it is not here yet: nothing is held
                            return pos
                        args.append(b"")
                        bulk = -1
                        left -= 1
                        continue
                    end = pos + bulk
                    if end + 2 > n:  # wait for the data and the two bytes after it
                        self._need = end + 2 - pos
                        return pos
                    args.append(buf[pos:end])
                    pos = end + 2
                    bulk = -1
                    left -= 1
                if self._dropped:
                    out.append(Dropped(args, self._dropped, max_kept))
                    self._dropped = 0
                else:
                    out.append(args)
                args = []
                if one:
                    return pos
        finally:
            self._args = args
            self._left = left
            self._bulk = bulk
            if self._need or self._until is not None:  # even empty: the wait is remembered
                self._chunks = [buf[pos:]]
                self._held = n - pos

    def _inline(self, buf: bytes, pos: int) -> tuple[int, list[bytes]] | None:
        """One inline line at `pos`: (the position after it, its arguments), or None if the
        line is not complete yet."""
        nl = buf.find(b"\n", pos)
        if nl < 0 or nl - pos > self._max_inline:
            if len(buf) - pos > self._max_inline:
                raise ProtocolError("too big inline request")
            return None
        end = nl - 1 if nl > pos and buf[nl - 1] == 0x0D else nl
        request = split_args(buf[pos:end])
        if request is None:
            raise ProtocolError("unbalanced quotes in request")
        return nl + 1, request


_FAST_MAX: Final = KEPT_FLOOR
_COUNTS: Final = {b"*%d" % i: i for i in range(1, _FAST_MAX)}
_HEADS: Final = [b"$%d" % i for i in range(_FAST_MAX)]
_MASKS: Final = [b"\0" + b"\1\0" * i for i in range(_FAST_MAX)]


def _canonical(buf: bytes, pos: int, out: list[list[bytes]]) -> int:
    """The fast path: take the complete requests from `pos` on that are written exactly as
    clients write them (`*<n>` then `$<len>` lines, every line ended by CRLF, no value holding a
    CRLF, n and len below 4096), and return where the first other one starts.

    One C-level split on CRLF does the scanning, a light walk over the `*<n>` tokens cuts the
    requests, and one check over the whole batch proves each header token equals the canonical
    header of the value after it (`$<len(value)>`): then the bytes are exactly
    `$<len>\r\n<value>\r\n`, which the careful parser would read the same way. Anything else
    (inline commands, odd spacing, a CRLF inside a value, big values, a partial request at the
    end) is left to `RequestParser._parse`.
    """
    tokens = (buf[pos:] if pos else buf).split(b"\r\n")
    last = len(tokens) - 1  # the only token not followed by CRLF
    counts = _COUNTS
    masks = _MASKS
    requests: list[list[bytes]] = []
    shape: list[bytes] = []
    i = 0
    while i < last:
        n = counts.get(tokens[i])
        if n is None:
            break
        j = i + 1 + 2 * n
        if j > last:
            break
        requests.append(tokens[i + 2 : j : 2])
        shape.append(masks[n])
        i = j
    if not i:
        return pos
    is_head = b"".join(shape)  # 1 where a token must be the header of the token after it
    heads = compress(tokens, is_head)
    values = compress(islice(tokens, 1, None), is_head)
    try:
        canonical = all(map(eq, heads, map(_HEADS.__getitem__, map(len, values))))
    except IndexError:  # a value of 4096 bytes or more
        canonical = False
    if not canonical:
        return _canonical_each(tokens, pos, requests, out)
    out.extend(requests)
    # the bytes taken: all of buf from pos, less the tokens left (and their CRLFs)
    return len(buf) - sum(map(len, islice(tokens, i, None))) - 2 * (last - i)


def _canonical_each(
    tokens: list[bytes], pos: int, requests: list[list[bytes]], out: list[list[bytes]]
) -> int:
    """The batch check failed: take the canonical requests before the first one that is not."""
    i = 0
    for data in requests:
        j = i + 1 + 2 * len(data)
        if [_HEADS[len(d)] if len(d) < _FAST_MAX else None for d in data] != tokens[i + 1 : j : 2]:
            break
        out.append(data)
        i = j
    return pos + sum(map(len, islice(tokens, i))) + 2 * i
