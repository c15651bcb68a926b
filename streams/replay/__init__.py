"""Replay-from-offset debugging: rebuild any region's state as of any position of the op logs.

A region of S shards is S replicated state machines (partition s of every log is shard s), so
every verb discovers the shard count from the logs' partition count and folds each shard on its
own; `--shard N` picks one.

- `logs`: which logs a region has on a cluster, its shard count and its origins' names.
- `positions`: `--at` (plain or per shard), `--offsets`, `--time`: parsing, and the cuts.
- `reader`: reads op-log topic partitions from Kafka at explicit offsets and feeds a fold.
- `run`: the engine: one `streams.crdt.fold.Fold` per shard, from snapshots when given.
- `replayed`: its result, with the region's digest and vector as a live node reports them.
- `describe`: the state as text and JSON lines (versioned record schema).
- `diff`: compare two replays shard by shard; bisect to the first diverging op.
- `keywatch`, `history`: every op on one key in apply order, with what it changed.
- `serve`: a replayed state served read-only over RESP (`replay --serve`), movable by REPLAY.SEEK.
- `cli`, `verbs`: the `streams log / replay / snapshot / diff / history` verbs.
"""
