"""Where `streams ui` gets what it draws: the replay verbs' own functions over a cluster's logs,
with their results kept until the page asks for fresh ones.

Why a cache: a key's page is paged, and every page, every click on an op and every comparison
would otherwise read the logs again. A key's history is read once (`streams.replay.history`), a
state at a point once per position (`streams.replay.run.replay` with `--at`, exactly what
`streams replay --at` folds), another region's logs once for `streams diff`
(`streams.replay.diff`); `fresh` (the page's reload) drops them, so a live topology is read anew.
One lock for histories, states and the key list (the fold is CPU work: two at once only make
both slower), another for comparisons: `streams diff` folds every compared region's logs several
times, and a page waiting on it would not open.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from streams.kafka.records import Trust
from streams.replay import diff as replay_diff
from streams.replay import history as replay_history
from streams.replay import logs, run
from streams.replay.positions import PositionError, at_text, is_per_shard, resolve_cuts
from streams.slots import shard_of
from streams.ui import api


@dataclass
class Source:
    """One region's logs on its Kafka cluster (and, with a topology file, the other regions'
    clusters, for `streams diff`)."""

    bootstrap: str
    region: str | None = None
    at: str | None = None
    """The position everything is shown at (`--at`, as `streams history --at`); None: the end."""
    trust: Trust | None = None
    others: dict[str, str] = field(default_factory=dict)
    """Other regions' name -> bootstrap (from the topology file): what diff compares against."""
    id_mode: str = "strict"
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _diff_lock: threading.Lock = field(default_factory=threading.Lock)
    _logs: logs.Logs | None = None
    _histories: dict[bytes, replay_history.History] = field(default_factory=dict)
    _states: dict[tuple[bytes, str], Any] = field(default_factory=dict)
    _keys: list[dict[str, Any]] | None = None
    _clusters: dict[tuple[str, int], replay_diff.Cluster] = field(default_factory=dict)
    _diffs: dict[tuple[str, int], replay_diff.Report] = field(default_factory=dict)

    def check(self) -> logs.Logs:
        """Find the region's logs and check `--at` against them before serving: an unknown
        region or a malformed position is an error at the command line, not on the page."""
        found = logs.discover(self.bootstrap, self.region)
        if self.at:
            shards = range(found.shards) if is_per_shard(self.at) else [0]
            resolve_cuts(self.at, found.ids, found.shards, list(shards))
        self._logs = found
        self.region = found.region_name
        return found

    def request(self, **changes: Any) -> run.Request:
        req = run.Request(
            bootstrap=self.bootstrap,
            region=self.region,
            at=self.at,
            trust=self.trust,
            id_mode=self.id_mode,
        )
        for name, value in changes.items():
            setattr(req, name, value)
        return req

    def forget(self) -> None:
        """Drop everything read: the next answers read the logs again (a live topology)."""
        with self._lock:
            self._histories.clear()
            self._states.clear()
            self._keys = None
        with self._diff_lock:
            self._clusters.clear()
            self._diffs.clear()

    # --- what the page asks -------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        found = self._logs or self.check()
        return {
            "region": found.region_name,
            "region_id": found.region_id,
            "bootstrap": self.bootstrap,
            "cluster_id": found.cluster_id,
            "shards": found.shards,
            "at": self.at,
            "regions": [found.names[r] for r in sorted(found.names)],
            "compare_with": sorted(self.others),
            "page": api.PAGE,
        }

    def history(self, key: bytes) -> replay_history.History:
        with self._lock:
            found = self._histories.get(key)
            if found is None:
                found = replay_history.history(self.request(), key)
                self._histories[key] = found
            return found

    def page(self, key: bytes, offset: int, limit: int) -> dict[str, Any]:
        h = self.history(key)
        regions = [*self.info()["regions"], *self.others]
        return api.history_page(h, offset, limit, regions)

    def state(self, key: bytes, index: int) -> dict[str, Any]:
        """The key just after the op applied `index`-th: `streams replay --at <the vector then>`
        (local ops made on that same vector are folded too: a position is per-origin seqs)."""
        h = self.history(key)
        step = next((s for s in h.steps if s.index == index), None)
        result = h.result
        if step is None:
            return api.state_json(h, index, None, "", result.names)
        shard = next(iter(result.folds))
        at = at_text({shard: step.vector}, result.names, result.shards)
        with self._lock:
            ks = self._states.get((key, at))
            if (key, at) not in self._states:
                replayed = run.replay(self.request(at=at, key=key))
                ks = replayed.keyspace().raw(key)
                self._states[(key, at)] = ks
        return api.state_json(h, index, ks, at, result.names)

    def keys(self) -> list[dict[str, Any]]:
        """Every key an op in these logs touched, with its count (one replay of the region)."""
        with self._lock:
            if self._keys is None:
                counts: dict[bytes, int] = {}

                def count(_part: tuple[str, int], _offset: int, record: Any) -> None:
                    key = record.body.key
                    counts[key] = counts.get(key, 0) + 1

                result = run.replay(self.request(listen=count))
                space = result.keyspace()
                present = {k: ks for k in counts if (ks := space.raw(k)) is not None}
                self._keys = api.keys_json(counts, present)
            return self._keys

    def diff(self, key: bytes) -> dict[str, Any]:
        """`streams diff` between this region and every other region of the topology file, for
        the key's shard; what it says of `key`."""
        found = self._logs or self.check()
        if not self.others:
            return {
                "available": False,
                "why": "only one region's cluster is known (--bootstrap): give --topology FILE "
                "--region R to compare regions",
                "regions": [],
            }
        shard = shard_of(key, found.shards)
        out = []
        for name, boot in sorted(self.others.items()):
            with self._diff_lock:
                report = self._diffs.get((name, shard))
                if report is None:
                    a = self._cluster(found.region_name, self.bootstrap, shard)
                    b = self._cluster(name, boot, shard)
                    report = replay_diff.diff(a.loaded[shard], b.loaded[shard])
                    self._diffs[(name, shard)] = report
            names = {**found.names, **self._clusters[(name, shard)].names}
            out.append(api.diff_json(key, found.region_name, name, report, names, shard))
        return {"available": True, "region": found.region_name, "regions": out}

    def _cluster(self, name: str, boot: str, shard: int) -> replay_diff.Cluster:
        got = self._clusters.get((name, shard))
        if got is None:
            got = replay_diff.load(boot, name, shard, None, self.trust)
            self._clusters[(name, shard)] = got
        return got


__all__ = ["PositionError", "Source"]
