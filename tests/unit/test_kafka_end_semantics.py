"""`streams.kafka.reading.EndTracker` under Apache Kafka's documented semantics, not Tansu's (issue
25).

The readers were tested on Tansu only, where the high watermark is the last batch's base offset
+ 1. On Apache Kafka (docs/design "Transactions", KIP-98; librdkafka's `isolation.level`):

- the high watermark is the log end offset (one replica, or all in-sync replicas have it),
  transaction markers (control records) included: every marker takes an offset;
- the last stable offset (LSO) is the first offset of the oldest transaction still open, else
  the high watermark; a `read_committed` consumer receives nothing at or past it;
- such a consumer never receives control records nor the records of aborted transactions: its
  position moves past them, and a partition-EOF event reports the position where a fetch found
  nothing more, i.e. the LSO (after a trailing commit marker: one past the marker). librdkafka's
  fetcher: `end_offset` is the response's LastStableOffset under read_committed, and
  `_PARTITION_EOF` is raised when `end_offset == fetch_pos.offset`, once per end offset; the
  fetch position moves past control batches and aborted transactions' records.

`KafkaPartition` models exactly that, and hands out the events a consumer would see; the tests
feed them to the tracker and check where it says the end is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.kafka.reading import EndTracker

PART = ("r2.oplog", 0)


@dataclass
class KafkaPartition:
    """A partition's log as Kafka keeps it: data records of transactions and their markers."""

    entries: list[tuple[str, int]] = field(default_factory=list)
    """(kind, transaction): kind is `data`, `commit` or `abort`."""

    def write(self, txn: int, records: int, end: str | None = "commit") -> None:
        self.entries += [("data", txn)] * records
        if end is not None:
            self.entries.append((end, txn))

    def finish(self, txn: int, end: str = "commit") -> None:
        self.entries.append((end, txn))

    @property
    def high_watermark(self) -> int:
        return len(self.entries)

    @property
    def last_stable_offset(self) -> int:
        ended = {t for kind, t in self.entries if kind != "data"}
        for offset, (kind, txn) in enumerate(self.entries):
            if kind == "data" and txn not in ended:
                return offset
        return self.high_watermark

    def fetch(self, position: int, max_records: int) -> tuple[list[int], int, bool]:
        """One read_committed fetch from `position`: the data offsets delivered (committed
        transactions only, below the LSO, at most `max_records`), the next fetch position (past
        skipped markers and aborted records) and whether it came back empty at the end (then
        librdkafka reports a partition EOF at that position)."""
        lso = self.last_stable_offset
        committed = {t for kind, t in self.entries if kind == "commit"}
        delivered: list[int] = []
        while position < lso and len(delivered) < max_records:
            kind, txn = self.entries[position]
            if kind == "data" and txn in committed:
                delivered.append(position)
            position += 1
        return delivered, position, not delivered and position >= lso


def read(log: KafkaPartition, tracker: EndTracker, position: int, max_records: int = 2) -> int:
    """Fetch until the tracker says caught up (or 50 fetches), feeding it what a consumer sees;
    returns the fetch position reached."""
    for _ in range(50):
        if tracker.caught_up():
            break
        tracker.on_high_watermark(PART, log.high_watermark)
        delivered, position, at_end = log.fetch(position, max_records)
        for offset in delivered:
            tracker.on_record(PART, offset)
        if at_end:
            tracker.on_eof(PART, position)
    return position


def test_a_trailing_commit_marker_puts_the_end_one_past_it_not_at_the_last_record() -> None:
    log = KafkaPartition()
    log.write(txn=1, records=3)  # offsets 0-2, commit marker at 3
    assert (log.high_watermark, log.last_stable_offset) == (4, 4)
    tracker = EndTracker()
    tracker.assign(PART, 0)
    read(log, tracker, 0)
    assert tracker.caught_up()
    state = tracker.partitions[PART]
    assert state.position == 4  # the next offset to read is past the marker
    assert not tracker.behind(PART)  # high watermark 4 is not "more to read"


def test_an_open_transaction_ends_reading_at_the_last_stable_offset_below_the_watermark() -> None:
    log = KafkaPartition()
    log.write(txn=1, records=2)  # 0-1, commit at 2
    log.write(txn=2, records=3, end=None)  # 3-5 open: LSO 3, high watermark 6
    assert (log.last_stable_offset, log.high_watermark) == (3, 6)
    tracker = EndTracker()
    tracker.assign(PART, 0)
    position = read(log, tracker, 0)
    assert tracker.caught_up() and position == 3
    assert tracker.partitions[PART].position == 3
    # The high watermark (6) is above the position, but after the EOF at the LSO the reader
    # does not take the open transaction's records for records it failed to get.
    assert not tracker.behind(PART)
    # It commits: the records arrive, the end moves past its marker.
    log.finish(txn=2)
    tracker.on_high_watermark(PART, log.high_watermark)
    delivered, position, _ = log.fetch(position, 10)
    for offset in delivered:
        tracker.on_record(PART, offset)
    assert delivered == [3, 4, 5] and tracker.partitions[PART].eof_at is None


def test_an_aborted_transaction_at_the_end_is_skipped_and_the_end_is_past_its_marker() -> None:
    log = KafkaPartition()
    log.write(txn=1, records=1)  # 0, commit 1
    log.write(txn=2, records=2, end="abort")  # 2-3 aborted, marker 4
    tracker = EndTracker()
    tracker.assign(PART, 0)
    read(log, tracker, 0)
    assert tracker.caught_up()
    assert tracker.partitions[PART].position == 5


def test_a_growing_log_ends_at_the_first_watermark_once_later_commits_pass_it() -> None:
    """Another region writes steadily: a fetch never comes back empty, so no EOF is reported.
    The first high watermark (4: after txn 1's marker) is reached by the records of the next
    committed transaction, even though no record sits at offset 3 (the marker)."""
    log = KafkaPartition()
    log.write(txn=1, records=3)  # 0-2, commit 3: high watermark 4
    tracker = EndTracker()
    tracker.assign(PART, 0, growing=True)
    tracker.on_high_watermark(PART, log.high_watermark)
    delivered, position, at_end = log.fetch(0, 10)
    for offset in delivered:
        tracker.on_record(PART, offset)
    assert not tracker.caught_up()  # at 3, the marker: the target 4 is not passed by records
    log.write(txn=2, records=2)  # 4-5, commit 6: written before any empty fetch
    delivered, position, at_end = log.fetch(position, 10)
    assert not at_end
    for offset in delivered:
        tracker.on_record(PART, offset)
    assert tracker.caught_up()


def test_a_growing_log_with_an_open_transaction_at_the_first_watermark_ends_at_its_lso() -> None:
    """The first high watermark (on Kafka) counts an open transaction's records; reading cannot
    pass them until it commits, but the empty fetch at the LSO reports an EOF: caught up."""
    log = KafkaPartition()
    log.write(txn=1, records=2)  # 0-1, commit 2
    log.write(txn=2, records=4, end=None)  # 3-6 open
    tracker = EndTracker()
    tracker.assign(PART, 0, growing=True)
    read(log, tracker, 0)
    assert tracker.caught_up()
    assert tracker.partitions[PART].position == log.last_stable_offset == 3


def test_the_own_log_needs_its_eof_even_past_the_first_watermark() -> None:
    """Not growing (the region's own log): the first watermark is not enough, the EOF is."""
    log = KafkaPartition()
    log.write(txn=1, records=2)
    tracker = EndTracker()
    tracker.assign(PART, 0)
    tracker.on_high_watermark(PART, log.high_watermark)
    delivered, position, at_end = log.fetch(0, 10)
    for offset in delivered:
        tracker.on_record(PART, offset)
    assert not at_end and not tracker.caught_up()
    delivered, position, at_end = log.fetch(position, 10)
    assert at_end and delivered == []
    tracker.on_eof(PART, position)
    assert tracker.caught_up() and tracker.partitions[PART].position == 3
