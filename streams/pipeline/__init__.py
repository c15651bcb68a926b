"""The Spark pipeline over the op logs (`streams spark ...`, docs/pipeline.md).

`source`: the `streams_oplog` PySpark data source (batch and streaming, every partition of every
op log); `fold`: the per-key causal fold with the node's own `streams.crdt` code; `folding`: the
folds grouped by (partition, key) on Spark; `cut`: the causally closed cut per shard; `shards`:
shard count, per-shard files and digests; jobs: `audit`, `export` (and follow), `snapshot`.
PySpark is an optional dependency (`pip install -e ".[spark]"`); nothing here is imported by the
node.
"""
