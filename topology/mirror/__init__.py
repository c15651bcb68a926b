"""A MirrorMaker-style mirror: copies each region's op log from its home cluster to the others.

Why our own mirror and not MirrorMaker 2 everywhere: the embedded topology (Tansu brokers, no JVM)
needs one, and tests need to replicate on demand (`Mirror.copy_available`,
`MirrorSet.copy_among`) and to cut replication (`pause`). The docker-compose setup runs the real
MirrorMaker 2 (topology/mm2/); both produce the same topic names and copy partition p to
partition p, so region nodes cannot tell them apart.

Guarantees:
- At least once, in source order within each partition, partition p of the source to partition p
  of the target (a shard's ops stay in its shard's partition), with key, value, headers and
  timestamp preserved. Duplicates are harmless: the materializer drops an op whose
  `(origin, seq)` it has already applied. A missing target topic is created with the source's
  partition count.
- Stateless resume, per partition: the target itself records how far the copy got. Every copied
  record carries `mirror.source` (the source cluster alias) and `mirror.offset` (its source
  offset); a restarted mirror reads each target partition's last record and continues at its
  `mirror.offset` + 1, after checking that the source still holds that very record (same
  offset, key and value). No consumer group, no offset store that could disagree with the data.
- Failures: Kafka errors are logged and retried (reopen the clients, resume from the target, but
  never past the first record whose delivery failed). A recreated target topic (a memory-only
  broker restarted) is refilled from the start; a recreated source topic, a target whose
  partition count differs from the source's, or a target written by someone else raise
  MirrorError: retrying cannot fix those.
- A mirror only ever reads the exact topic `<region>.oplog` on the region's home cluster, never a
  mirrored copy (that would loop records around the clusters); a source record that already carries
  `mirror.source` is refused as a configuration error.

Tansu specifics (docs/architecture.md, "Reading op logs on Tansu and on Apache Kafka"): resume
reads from the high watermark to partition EOF to get a partition's last record; "caught up" is
partition EOF, not a watermark; topics are created explicitly; consumers use assign(), never a
consumer group; the source reader's fetch wait follows `streams.kafka.reading.FetchPacer` (short
while copying, long when idle, doubled when the broker cannot assemble a fetch of a long log in
time).

Modules, each importing only those above it:
- `errors`: MirrorError, MirrorTimeout and the Deadline of one operation
- `headers`: the mirror headers a copy carries, read back
- `clients`: the route (clusters, topics) and the Kafka clients opened on it
- `topic_pair`: the source and target topics checked (ids, partition counts), the target created
- `resume`: where each partition continues, verified against the source
- `writer`: the target producer, delivery reports and the resume floors they set
- `copier`: `Mirror`, the copy loop (on demand and in a background thread), pause
- `mirror_set`: `MirrorSet`, every mirror of a topology
- `__main__`: the command line, `python -m topology.mirror --topology FILE [--once]`
"""

from topology.mirror.copier import Mirror
from topology.mirror.deadline import MirrorError, MirrorTimeout
from topology.mirror.headers import MIRROR_OFFSET_HEADER, MIRROR_SOURCE_HEADER
from topology.mirror.mirror_set import MirrorSet

__all__ = [
    "MIRROR_OFFSET_HEADER",
    "MIRROR_SOURCE_HEADER",
    "Mirror",
    "MirrorError",
    "MirrorSet",
    "MirrorTimeout",
]
