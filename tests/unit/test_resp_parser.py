"""The sans-I/O request parser, fed bytes: Redis 7.0.15's requests and error texts, any chunking,
the fast path equal to the careful one, huge values, deep pipelines, fuzzed frames.

The expected texts of `REDIS_CASES` were taken from a real redis-server 7.0.15 (each input sent on
a fresh connection; "closed" means Redis answered the error and closed);
tests/integration/test_resp_robustness.py re-checks them against the live server and a node.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streams.resp.parser import KEPT_FLOOR, MAX_INLINE, RequestParser, split_args
from streams.resp.request import Dropped

PE = "ERR Protocol error: "

# input, the requests Redis runs, the error it answers before closing (None: stays open)
REDIS_CASES: list[tuple[bytes, list[list[bytes]], str | None]] = [
    (b"*abc\r\n", [], "invalid multibulk length"),
    (b"*2147483647\r\n", [], None),  # Redis 7.0 allows up to INT_MAX (6.x: 1024*1024)
    (b"*2147483648\r\n", [], "invalid multibulk length"),
    (b"*-1\r\nPING\r\n", [[b"PING"]], None),
    (b"*-5\r\nPING\r\n", [[b"PING"]], None),
    (b"*0\r\nPING\r\n", [[b"PING"]], None),
    (b"*-0\r\nPING\r\n", [], "invalid multibulk length"),
    (b"*\r\n", [], "invalid multibulk length"),
    (b"*01\r\n$4\r\nPING\r\n", [], "invalid multibulk length"),
    (b"*+1\r\n$4\r\nPING\r\n", [], "invalid multibulk length"),
    (b"*1 \r\n$4\r\nPING\r\n", [], "invalid multibulk length"),
    (b"*1\r\nx\r\n", [], "expected '$', got 'x'"),
    (b"*1\r\n:1\r\n", [], "expected '$', got ':'"),
    (b"*1\r\n*1\r\n", [], "expected '$', got '*'"),
    (b"*1\r\n\r\n", [], "expected '$', got '\r'"),  # sent as a space: CR/LF become spaces
    (b"*1\r\n\xff\r\n", [], "expected '$', got '\udcff'"),  # the raw byte 0xff on the wire
    (b"*2\r\n+A\r\n=5\r\ntxt:B\r\n", [], "expected '$', got '+'"),  # hiredis would accept it
    (b"*1\r\n$536870912\r\n", [], None),  # proto-max-bulk-len: 512 MB
    (b"*1\r\n$536870913\r\n", [], "invalid bulk length"),
    (b"*1\r\n$-1\r\n", [], "invalid bulk length"),
    (b"*2\r\n$4\r\nECHO\r\n$-1\r\n", [], "invalid bulk length"),
    (b"*1\r\n$04\r\nPING\r\n", [], "invalid bulk length"),
    (b"*1\r\n$+4\r\nPING\r\n", [], "invalid bulk length"),
    (b"*1\r\n$ 4\r\nPING\r\n", [], "invalid bulk length"),
    (b"*1\r\n$\xff\r\n", [], "invalid bulk length"),
    (b"*1\r\n$4\r\nPINGxx", [[b"PING"]], None),  # the 2 bytes after the data are not checked
    (b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n", [[b"PING"], [b"PING"]], None),
    (b"*1\rX$4\r\nPING\r\n", [[b"PING"]], None),  # nor the byte after a header's CR
    (b"PING\r\n*1\r\n$3\r\nfoo\r\n", [[b"PING"], [b"foo"]], None),
    (b'PING "a\r\n', [], "unbalanced quotes in request"),
    (b"PING 'a\r\n", [], "unbalanced quotes in request"),
    (b'ECHO "a"b\r\n', [], "unbalanced quotes in request"),
    (b'ECHO x"a b"y\r\n', [], "unbalanced quotes in request"),
    (b'ECHO "a\\\r\n', [], "unbalanced quotes in request"),
    (b'ECHO "a\\x41\\n"\r\n', [[b"ECHO", b"aA\n"]], None),
    (b'ECHO "\\xZZ"\r\n', [[b"ECHO", b"xZZ"]], None),
    (b'ECHO "\\x4"\r\n', [[b"ECHO", b"x4"]], None),
    (b"ECHO 'a\\nb'\r\n", [[b"ECHO", b"a\\nb"]], None),
    (b"ECHO 'it\\'s'\r\n", [[b"ECHO", b"it's"]], None),
    (b'ECHO ""\r\n', [[b"ECHO", b""]], None),
    (b"ECHO ''\r\n", [[b"ECHO", b""]], None),
    (b'ECHO x"a b"\r\n', [[b"ECHO", b"xa b"]], None),
    (b'ECHO "a"\tb\r\n', [[b"ECHO", b"a", b"b"]], None),
    (b"ECHO a\rb\r\n", [[b"ECHO", b"a", b"b"]], None),
    (b"ECHO a\vb\r\n", [[b"ECHO", b"a\vb"]], None),
    (b"ECHO \vb\r\n", [[b"ECHO", b"b"]], None),
    (b"\r\n\r\nPING\r\n", [[b"PING"]], None),
    (b"\nPING\n", [[b"PING"]], None),
    (b"   \r\nPING\r\n", [[b"PING"]], None),
    (b"x" * 70000, [], "too big inline request"),
    (b"*1\r\n$" + b"1" * 70000, [], "too big bulk count string"),
    (b"*" + b"1" * 70000, [], "too big mbulk count string"),
]


def feed_all(data: bytes, cuts: list[int] | None = None) -> tuple[list[list[bytes]], str | None]:
    parser = RequestParser()
    out: list[list[bytes]] = []
    pos = 0
    for cut in sorted(set(cuts or [])) + [len(data)]:
        if cut > pos:
            out.extend(parser.feed(data[pos:cut]))
            pos = cut
    return out, parser.error


@pytest.mark.parametrize("data,requests,error", REDIS_CASES, ids=lambda v: repr(v)[:40])
def test_redis_7_0_15_requests_and_error_texts(
    data: bytes, requests: list[list[bytes]], error: str | None
) -> None:
    assert feed_all(data) == (requests, None if error is None else PE + error)
    # byte by byte too: the texts do not depend on how the bytes arrive
    assert feed_all(data, list(range(len(data)))) == (
        requests,
        None if error is None else PE + error,
    )


def test_nul_is_an_ordinary_header_byte_and_ends_an_inline_line() -> None:
    """The documented difference: Redis's strchr stops at NUL and waits; here the client gets
    the error at once (a header) or the text before the NUL (an inline line)."""
    assert feed_all(b"*1\x00\r\n$4\r\nPING\r\n") == ([], PE + "invalid multibulk length")
    assert feed_all(b"*1\r\n$4\x00\r\nPING\r\n") == ([], PE + "invalid bulk length")
    assert feed_all(b"ECHO a\x00b\r\nPING\r\n") == ([[b"ECHO", b"a"], [b"PING"]], None)
    assert feed_all(b"*1\r\n$4\r\nP\x00NG\r\n") == ([[b"P\x00NG"]], None)  # data is binary


def test_an_error_keeps_the_requests_before_it_and_stops_the_parser() -> None:
    parser = RequestParser()
    assert parser.feed(b"PING\r\n*1\r\n$4\r\nPING\r\n*x\r\n*1\r\n$4\r\nPING\r\n") == [
        [b"PING"],
        [b"PING"],
    ]
    assert parser.error == PE + "invalid multibulk length"
    assert parser.feed(b"PING\r\n") == []


def test_fast_path_stops_at_the_first_request_not_written_canonically() -> None:
    ping = b"*1\r\n$4\r\nPING\r\n"
    odd = b"*1\r\n$3\r\nPING\r\n"  # PIN, then 'G\r' skipped, then '\n': an empty line
    data = ping * 3 + odd + ping
    assert feed_all(data) == ([[b"PING"]] * 3 + [[b"PIN"], [b"PING"]], None)
    assert feed_all(data) == reference(data)


def test_pipeline_in_pieces_of_every_size() -> None:
    request = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nf\r\n$10\r\nvvvvvvvvvv\r\n"
    data = (request + b"XLEN s\r\n") * 30
    expected = [[b"XADD", b"s", b"*", b"f", b"v" * 10], [b"XLEN", b"s"]] * 30
    for size in range(1, len(request) + 3):
        assert feed_all(data, list(range(0, len(data), size))) == (expected, None), size


def test_deep_pipeline_in_one_packet_keeps_order() -> None:
    frames = []
    expected = []
    for i in range(20000):
        if i % 7 == 3:
            frames.append(b"ECHO %d\r\n" % i)  # inline commands mixed in
        else:
            frames.append(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n" % (len(b"%d" % i), i))
        expected.append([b"ECHO", b"%d" % i])
    parser = RequestParser()
    assert parser.feed(b"".join(frames)) == expected
    assert parser.error is None and parser.buffered == 0


def test_a_10_mb_value_arriving_in_64k_pieces() -> None:
    value = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    value = value[:-7] + b"\r\n*1\r\n$"  # CRLF and frame-looking bytes inside the value
    frame = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nf\r\n$%d\r\n%s\r\n" % (
        len(value),
        value,
    )
    parser = RequestParser()
    out: list[list[bytes]] = []
    pieces = [frame[i : i + 65536] for i in range(0, len(frame), 65536)]
    for n, piece in enumerate(pieces):
        out.extend(parser.feed(piece))
        if n + 1 < len(pieces):
            assert not out
        if 0 < n < len(pieces) - 1:
            # Held pieces are kept as they came, one more per feed, until the value is complete:
            # joined once at the end, never re-copied or re-scanned per piece (linear cost).
            assert parser._chunks[-1] is piece and len(parser._chunks) == n + 1
    assert out == [[b"XADD", b"s", b"*", b"f", value]]
    assert parser.buffered == 0 and not parser._chunks


def test_partial_requests_are_held_and_counted() -> None:
    parser = RequestParser()
    assert parser.feed(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel") == []
    assert parser.buffered == len(b"ECHO") + len(b"hel")
    assert parser.feed(b"lo\r\nPI") == [[b"ECHO", b"hello"]]
    assert parser.feed(b"NG\r\n") == [[b"PING"]]
    assert parser.buffered == 0


def test_inline_limit_is_deterministic() -> None:
    """Up to 64 KB before the `\\n` (CR included) is accepted however the bytes arrive; more is
    refused even when the newline came in the same read (Redis refuses it as soon as 64 KB wait
    without a newline, which with its 16 KB reads is every time)."""
    line = b"ECHO " + b"a" * (MAX_INLINE - 6) + b"\r"
    assert feed_all(line + b"\n") == ([[b"ECHO", b"a" * (MAX_INLINE - 6)]], None)
    assert feed_all(b"a" + line + b"\n") == ([], PE + "too big inline request")


def test_limits_are_settable() -> None:
    parser = RequestParser(max_multibulk=1024 * 1024, max_bulk=10)
    assert parser.feed(b"*1048577\r\n") == []
    assert parser.error == PE + "invalid multibulk length"
    parser = RequestParser(max_bulk=10)
    assert parser.feed(b"*1\r\n$11\r\n") == [] and parser.error == PE + "invalid bulk length"


@pytest.mark.parametrize("piece", [1, 7, 4096, 65536, 10**9])
def test_an_argument_over_max_kept_is_read_and_dropped_holding_nothing(piece: int) -> None:
    """Issue 27: a value the op log could never carry is thrown away as it arrives (the parser
    holds at most the piece it was fed), and its request comes out as a `Dropped` with an empty
    argument in its place; the requests around it are parsed as ever."""
    big = b"\r\n*1\r\n$4\r\nPING\r\n" * 1000  # frame-looking bytes inside the value
    data = (
        b"*1\r\n$4\r\nPING\r\n"
        + multibulk([b"XADD", b"s", b"*", b"f", big, b"g", b"x" * 5000])
        + multibulk([b"ECHO", b"after"])
    )
    parser = RequestParser(max_kept=5000)
    out: list[list[bytes]] = []
    most = 0
    for i in range(0, len(data), piece):
        out.extend(parser.feed(data[i : i + piece]))
        most = max(most, parser.buffered)
    assert parser.error is None
    assert out == [
        [b"PING"],
        [b"XADD", b"s", b"*", b"f", b"", b"g", b"x" * 5000],
        [b"ECHO", b"after"],
    ]
    dropped = out[1]
    assert type(dropped) is Dropped and (dropped.longest, dropped.kept) == (len(big), 5000)
    assert [type(r) for r in (out[0], out[2])] == [list, list]
    if piece < len(data):
        assert most < len(big)  # never the dropped value whole
    assert parser.buffered == 0


def test_max_kept_never_goes_below_the_fast_paths_lengths() -> None:
    parser = RequestParser(max_kept=10)
    assert parser.max_kept == KEPT_FLOOR
    parser.max_kept = 1
    assert parser.max_kept == KEPT_FLOOR
    value = b"v" * (KEPT_FLOOR - 1)
    assert parser.feed(multibulk([b"ECHO", value])) == [[b"ECHO", value]]


def test_a_protocol_error_after_a_dropped_argument_stops_the_parser_as_ever() -> None:
    parser = RequestParser(max_kept=KEPT_FLOOR)
    assert parser.feed(b"*3\r\n$4\r\nECHO\r\n$5000\r\n" + b"x" * 5002 + b"X\r\n") == []
    assert parser.error == PE + "expected '$', got 'X'"
    assert parser.buffered == 0 and parser.feed(b"*1\r\n$4\r\nPING\r\n") == []


def test_split_args_examples() -> None:
    assert split_args(b"") == []
    assert split_args(b" \t ") == []
    assert split_args(b"set  k  v") == [b"set", b"k", b"v"]
    assert split_args(b"set \"a b\" 'c d'") == [b"set", b"a b", b"c d"]
    assert split_args(b'"\\x00\\xff\\t\\r\\n\\b\\a\\\\\\""') == [b'\x00\xff\t\r\n\b\a\\"']
    assert split_args(b'"a" b') == [b"a", b"b"]
    assert split_args(b'"a"b') is None
    assert split_args(b"'a") is None


# --- a reference: Redis's processInputBuffer over the whole input at once ---------------------


def _ll(raw: bytes) -> int | None:
    """string2ll, written out the long way."""
    if not raw or len(raw) >= 21:
        return None
    neg = raw[:1] == b"-"
    digits = raw[1:] if neg else raw
    if not digits or digits == b"0" and neg:
        return None
    if digits != b"0" and not (49 <= digits[0] <= 57):
        return None
    if any(not 48 <= c <= 57 for c in digits):
        return None
    value = -int(digits) if neg else int(digits)
    return value if -(2**63) <= value < 2**63 else None


def reference(data: bytes) -> tuple[list[list[bytes]], str | None]:
    out: list[list[bytes]] = []
    pos, n, big = 0, len(data), MAX_INLINE

    def line_end(char: bytes, at: int) -> int | None:
        end = data.find(char, at)
        return None if end < 0 or end - at > big else end

    while pos < n:
        if data[pos] != 0x2A:
            nl = line_end(b"\n", pos)
            if nl is None:
                return out, (PE + "too big inline request") if n - pos > big else None
            line = data[pos : nl - 1 if nl > pos and data[nl - 1] == 13 else nl]
            args = split_args(line)
            if args is None:
                return out, PE + "unbalanced quotes in request"
            if args:
                out.append(args)
            pos = nl + 1
            continue
        cr = line_end(b"\r", pos)
        if cr is None or cr + 1 >= n:
            too_big = cr is None and n - pos > big
            return out, (PE + "too big mbulk count string") if too_big else None
        count = _ll(data[pos + 1 : cr])
        if count is None or count > 2**31 - 1:
            return out, PE + "invalid multibulk length"
        pos = cr + 2
        args = []
        for _ in range(max(count, 0)):
            cr = line_end(b"\r", pos)
            if cr is None or cr + 1 >= n:
                too_big = cr is None and n - pos > big
                return out, (PE + "too big bulk count string") if too_big else None
            if data[pos] != 0x24:
                got = data[pos : pos + 1].decode("utf-8", "surrogateescape")
                return out, PE + f"expected '$', got '{got}'"
            size = _ll(data[pos + 1 : cr])
            if size is None or size < 0 or size > 512 * 1024 * 1024:
                return out, PE + "invalid bulk length"
            pos = cr + 2
            if pos + size + 2 > n:
                return out, None
            args.append(data[pos : pos + size])
            pos += size + 2
        if args:
            out.append(args)
    return out, None


# --- generated frames ---------------------------------------------------------------------------

binary_arg = st.one_of(
    st.binary(max_size=12),
    st.sampled_from([b"", b"\r\n", b"*1\r\n$4\r\nPING\r\n", b"$", b"a\rb", b"\n"]),
    st.binary(min_size=4090, max_size=4100),  # around the fast path's limit
)


def multibulk(args: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


@st.composite
def bad_multibulk(draw: st.DrawFn) -> bytes:
    args = draw(st.lists(st.binary(max_size=6), min_size=1, max_size=4))
    count = draw(
        st.sampled_from(
            [
                b"%d" % len(args),
                b"0",
                b"-1",
                b"-0",
                b"+1",
                b"01",
                b"",
                b" 1",
                b"2147483648",
                b"99999999999999999999999",
                b"x",
                b"%d" % (len(args) + 1),
            ]
        )
    )
    out = [b"*" + count + b"\r\n"]
    for a in args:
        size = draw(
            st.sampled_from(
                [
                    b"%d" % len(a),
                    b"%d" % (len(a) + 1),
                    b"-1",
                    b"0%d" % len(a),
                    b"+1",
                    b"536870913",
                    b"",
                    b"%d" % max(0, len(a) - 1),
                ]
            )
        )
        kind = draw(st.sampled_from([b"$", b"$", b"$", b"+", b":", b"*", b"x", b"\r"]))
        tail = draw(st.sampled_from([b"\r\n", b"\r\n", b"xx", b"\r", b""]))
        out.append(kind + size + b"\r\n" + a + tail)
    return b"".join(out)


inline_text = st.text(alphabet=" \t\v'\"\\xab01nr", max_size=12).map(lambda s: s.encode())
frame = st.one_of(
    st.lists(binary_arg, min_size=0, max_size=5).map(multibulk),
    bad_multibulk(),
    st.tuples(inline_text, st.sampled_from([b"\r\n", b"\n", b"\r\r\n"])).map(b"".join),
    st.binary(max_size=20),
    st.sampled_from(
        [
            b"*1\r\n$536870913\r\n",
            b"*2147483648\r\n",
            b"*1\r\n$536870912\r\n",
            b"*3\r\n",
            b"*1\r\n$4\r\nPI",
            b"\r\n",
            b"*-1\r\n",
        ]
    ),
)


@st.composite
def stream(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    data = b"".join(draw(st.lists(frame, max_size=8)))
    if draw(st.booleans()):  # truncated
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        cuts = draw(st.lists(st.integers(0, len(data)), max_size=6))
    else:  # every k bytes: a header or a value ends exactly at a piece's end, many times
        cuts = list(range(0, len(data), draw(st.integers(1, 9))))
    return data, cuts


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(stream())
@example((b"*1\r\n$4\r\nPING\r\n" * 3, [3, 20]))
@example((b"*1\r\n$4\r\nPING\r\n" * 3 + b"*1\r\n$3\r\nPING\r\n*1\r\n$4\r\nPING\r\n", []))
@example((b"*2\r\n$1\r\na\r\n$2\r\na\r\n\r\n*1\r\n$4\r\nPING\r\n", []))
@example((b"*1\r\n$4096\r\n" + b"v" * 4096 + b"\r\n*1\r\n$4\r\nPING\r\n", [5000]))
@example((b"*-9999999999999999999\r\nPING\r\n", []))
def test_parser_equals_reference_under_any_chunking(case: tuple[bytes, list[int]]) -> None:
    data, cuts = case
    one_shot = feed_all(data)
    assert feed_all(data, cuts) == one_shot
    assert one_shot == reference(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=5))
def test_random_bytes_never_raise(data: bytes, cuts: list[int]) -> None:
    requests, error = feed_all(data, cuts)
    assert all(isinstance(r, list) and r and all(isinstance(a, bytes) for a in r) for r in requests)
    assert error is None or error.startswith(PE)
