"""What the replicated state's digest feeds sha256 for a key's entries, computed block by block.

The digest (`State.digest`, CRDT.DIGEST, a snapshot's trailer, the Spark job's) is sha256 over,
per entry in merged (ID, origin) order, `E` + the length + `ms-seq@origin`, then `F` + length +
item for each field and value. Its value is compared between regions, versions and Spark, so it
never changes; how it is computed may. Entry by entry it costs about 1.5 us in Python, the
largest part of reading a 1M-entry snapshot back, so a closed block whose entries all share the
master entry's field names (the common case) is fed column-wise: one `marshal.loads`, its IDs
formatted by one `map`, its values taken column by column, the pieces interleaved by `zip` and
joined once; deleted slots are dropped with `compress`. Anything else (the open tail block, rows
with their own field names) goes entry by entry. A key with one origin (a single region's keys)
is fed block after block; with several origins the per-entry pieces are merged by (ID, origin).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, compress, repeat
from operator import itemgetter

from streams.crdt.blocks import Block, _unpack_ints, payload_of
from streams.crdt.entries import EntryLogs
from streams.ids import StreamID

Update = Callable[[bytes], object]
"""sha256's `update` (or any sink of the digest input)."""

_PREFIXES = 4096
_E = [b"E" + n.to_bytes(8, "big") for n in range(64)]  # `ms-seq@origin` is under 64 bytes
_F = [b"F" + n.to_bytes(8, "big") for n in range(_PREFIXES)]


def feed(update: Update, tag: bytes, data: bytes) -> None:
    """One tagged, length-prefixed item of the digest input."""
    update(tag + len(data).to_bytes(8, "big") + data)


def _f(n: int) -> bytes:
    return _F[n] if n < _PREFIXES else b"F" + n.to_bytes(8, "big")


def feed_entries(update: Update, entries: EntryLogs) -> None:
    """Feed every live entry of a key, in merged order."""
    logs = entries.logs
    if len(logs) == 1:
        for origin, log in logs.items():
            for block in log.blocks:
                if block.live:
                    columns = _block_columns(block, origin)[1]
                    update(b"".join(chain.from_iterable(zip(*columns, strict=False))))
        return
    streams = [_origin_pieces(origin, log.blocks) for origin, log in sorted(logs.items())]
    for _sid, _origin, piece in heapq.merge(*streams):
        update(piece)


def _origin_pieces(origin: int, blocks: Iterable[Block]) -> Iterator[tuple[StreamID, int, bytes]]:
    """(id, origin, that entry's digest input) for one origin's live entries, in ID order."""
    for block in blocks:
        if block.live:
            ids, columns = _block_columns(block, origin)
            yield from zip(ids, repeat(origin), map(b"".join, zip(*columns, strict=False)))


Columns = list[Iterable[bytes]]
"""A block's digest input in columns: zipped, each row is one live entry's pieces (the columns
of field names are endless `repeat`s, hence the zips that are not strict)."""


def _block_columns(block: Block, origin: int) -> tuple[list[StreamID], Columns]:
    """The live entries' IDs and digest input."""
    if block.open is None:
        assert block.payload is not None
        master, ms0, seq0, _dot0, msd, seqd, _dotd, rows, same = payload_of(block.payload)
        n = len(rows)
        if same == (1 << n) - 1:
            mss = list(map(ms0.__add__, _unpack_ints(msd)))
            seqs = list(map(seq0.__add__, _unpack_ints(seqd)))
            names = [_f(len(name)) + name for name in master]
            return _columns(block.dead, n, mss, seqs, b"%%d-%%d@%d" % origin, names, rows)
    ids, _dots, fields = block.decoded()
    live = list(block.live_slots())
    return [ids[i] for i in live], [[_entry(ids[i], origin, fields[i]) for i in live]]


def _columns(
    dead: int,
    n: int,
    mss: list[int],
    seqs: list[int],
    fmt: bytes,
    names: list[bytes],
    rows: tuple[tuple[bytes, ...], ...],
) -> tuple[list[StreamID], Columns]:
    """Every row holds only values (SAMEFIELDS): feed them column by column."""
    ids = list(zip(mss, seqs, strict=True))
    es = list(map(fmt.__mod__, ids))
    columns: Columns = [list(map(_E.__getitem__, map(len, es))), es]
    for j, name in enumerate(names):
        values = list(map(itemgetter(j), rows))
        lengths = list(map(len, values))
        prefix = _F.__getitem__ if max(lengths) < _PREFIXES else _f
        columns += [repeat(name), list(map(prefix, lengths)), values]
    if dead:
        keep = list(map("0".__eq__, format(dead, f"0{n}b")[::-1]))
        ids = list(compress(ids, keep))
        columns = [c if isinstance(c, repeat) else list(compress(c, keep)) for c in columns]
    return ids, columns


def _entry(sid: StreamID, origin: int, fields: Iterable[bytes]) -> bytes:
    e = b"%d-%d@%d" % (sid[0], sid[1], origin)
    return b"".join(chain((_E[len(e)], e), *((_f(len(item)), item) for item in fields)))
