"""Region snapshots: one file holding a region's whole materialized state and the log positions
it covers, so a node (or a replay) starts from it and reads only the tail of the logs.

Why a format of its own, in Avro: a region node boots from it, `streams snapshot` and
`streams replay --snapshot` write and read it, and the Spark snapshot job writes the same thing,
so it must be language-neutral, self-describing and versioned. Avro object container files are
all three, and Spark writes them natively.

API (pure; no Kafka):
- `write_snapshot(region, positions, out, *, region_name=None, meta=None, with_digest=True)`:
  write `streams.crdt.Region` `region` and `positions` ({(topic, partition): next offset}, every
  op-log topic of the cluster and the region's own `.local`) to the binary file `out`.
- `read_snapshot(fp) -> (region, positions, meta)`: the inverse (`reading`). Raises
  `SnapshotError` for an unreadable, truncated, reordered or self-inconsistent file: never a
  partial or wrong state.
- `read_snapshot_unchecked(fp) -> (region, positions, meta, digest)`: all of that but the last
  check, the loaded state's digest against the trailer's, left to the caller (a node booting
  from its store makes it after it serves, `streams.node.runtime.digest_check`).

Layout (`schemas/snapshot_v2.avsc`, container metadata `streams.snapshot.format_version` = "2",
deflate-compressed Avro blocks):
1. `Header`: format_version, region id and name, ID mode, `block_format` (the payload encoding of
   `streams.crdt.blocks`; another one is refused), local_seq, the causal applied vector,
   positions, free-form meta (writer, time, `tainted` when built over skipped records).
2. Per key in byte order: `KeyMeta` (last_id, entries_added, max_deleted_id, DEL and group
   tombstones, entry and group counts), then `EntryBlocks` (one origin each, ID order: the
   origin log's packed blocks as the node holds them, Redis's listpack nodes one for one, each
   with first and last ID, slot count, dead-slot mask, listpack size, payload and a CRC-32; at
   most `MAX_CHUNK_ITEMS` blocks or about `MAX_CHUNK_BYTES` of payload per record: records stay
   bounded whatever the state's size), then per group a `GroupMeta` (cursors, default cursor,
   entries_read, ack_sent, PEL and consumer counts) followed by `PendingChunk`s and
   `ConsumerChunk`s: the region-local part, present only for the snapshot's own region.
3. `Trailer`: counts of records, keys and live entries, and the digest of the replicated state
   (`State.digest()`, optional for writers that cannot compute it); a file without it is
   truncated.

Why blocks (version 2): a reader installs them (`EntryLogs.install_blocks`) instead of adding
entries one by one (a 1M-entry snapshot reads in about an eighth of the CPU time, a node
restarts from it about 4x faster), and its node boundaries and deleted slots survive the
restart as Redis's do through an RDB. Version 1
files (`schemas/snapshot_v1.avsc`: `EntryChunk`s of entries with their dot seq, in place of
`EntryBlocks`) are still read, their entries re-packed; `write_snapshot(..., format_version=1)`
still writes one (tests).

Shards: a snapshot holds one shard (one `Region`; a region of S shards has S of them, and its
positions name only that shard's partition of each log). `meta["shard"]` says which, and
`read_shard(fp)` reads it from the header alone (else the partition the positions name, else 0),
so a node given one `--snapshot` file per shard knows where each goes.

Ops still waiting in the causal buffer are not stored: the positions must point at or before
them so that the tail replay reads them again (`streams.crdt.fold.Fold.safe_positions`).
"""

from streams.snapshot.format import (
    FORMAT_VERSION,
    MAX_CHUNK_BYTES,
    MAX_CHUNK_ITEMS,
    Positions,
    SnapshotError,
    write_snapshot,
)
from streams.snapshot.reading import (
    DIGEST_MISMATCH,
    SnapshotHeader,
    read_header,
    read_shard,
    read_snapshot,
    read_snapshot_unchecked,
)

__all__ = [
    "DIGEST_MISMATCH",
    "SnapshotHeader",
    "read_header",
    "FORMAT_VERSION",
    "MAX_CHUNK_BYTES",
    "MAX_CHUNK_ITEMS",
    "Positions",
    "SnapshotError",
    "read_shard",
    "read_snapshot",
    "read_snapshot_unchecked",
    "write_snapshot",
]
