"""A running node follows its topology file's set of regions, within about a second, without a
restart:

- a region removed from the file (`streams region remove`) is no longer waited for by causal
  stability (tombstone collection) nor by the commands that decide about every region's PELs;
- a region added (`streams region add`, `LocalTopology.add_region`; issue 37, part C) is waited
  for from then on: causal stability counts it (it has applied nothing as far as this node knows,
  so no tombstone is collected until its own ops say how far it got), and the record gate accepts
  its ops; its op log's copy on this cluster, made by the mirror, is read like any `*.oplog`
  topic (the materializer looks for new topics every half second).

Why the file: it is what every process of a database reads at start, so a node started later
agrees with one that saw the change. A joining region is counted before anything is taken from
a peer for it (`topology.join`): the file is rewritten, every running node is seen to follow it
(CRDT.INFO `regions`), and only then is the peer's snapshot taken, so no tombstone the new region
could still need is collected anywhere. Other changes (addresses, shards) need a restart. A file
that does not read is logged and ignored (the node keeps the regions it has).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from streams.config import Topology, TopologyError, load

log = logging.getLogger(__name__)


class TopologyWatch:
    def __init__(self, path: str | Path, topology: Topology) -> None:
        self.path = Path(path)
        self.topology = topology
        self._stamp = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def poll(self) -> Topology | None:
        """The file's topology when it changed the set of regions (else None)."""
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return None
        self._stamp = stamp
        try:
            fresh = load(self.path)
        except TopologyError as exc:
            log.error(
                "%s changed but does not read (%s); keeping the regions known", self.path, exc
            )
            return None
        before = {r.id for r in self.topology.regions}
        after = {r.id for r in fresh.regions}
        if after == before:
            return None
        self.topology = fresh
        return fresh
