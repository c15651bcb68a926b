"""The Spark pipeline over the op logs (`streams spark ...`, docs/pipeline.md).

`source`: the `streams_oplog` PySpark data source (batch and streaming); `fold`: the per-key
causal fold with the node's own `streams.crdt` code; `jobs`: audit, export, follow, snapshot.
PySpark is an optional dependency (`pip install -e ".[spark]"`); nothing here is imported by the
node.
"""
