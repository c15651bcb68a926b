"""`MirrorSet`: every mirror of a topology, started, paused and synchronised together."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from streams.config import Topology
from streams.kafka.topics import Replication
from topology.mirror.copier import Mirror


class MirrorSet:
    """Every mirror of a topology: one per ordered pair (home region -> each other cluster).

    Regions that share a cluster need no mirror between them (the materializer reads every op log
    on its cluster), so such pairs are skipped.
    """

    def __init__(
        self, topology: Topology, naming: str | None = None, joining: frozenset[str] = frozenset()
    ) -> None:
        """`joining`: regions whose clusters are filled from each source's first record held
        (`Route.from_log_start`: a region joining over truncated logs)."""
        self.topology = topology
        self.naming = naming or topology.mirror_naming
        self.mirrors: dict[tuple[str, str], Mirror] = {}
        replication = Replication(topology.replication_factor, topology.min_insync_replicas)
        for source in topology.regions:
            for target in topology.regions:
                if target.name == source.name or target.bootstrap == source.bootstrap:
                    continue
                self.mirrors[(source.name, target.name)] = Mirror(
                    source.bootstrap,
                    target.bootstrap,
                    source.name,
                    source.alias,
                    self.naming,
                    replication=replication,
                    from_log_start=target.name in joining,
                )

    def mirror(self, source: str, target: str) -> Mirror:
        """The mirror copying region `source`'s op log to region `target`'s cluster."""
        try:
            return self.mirrors[(source, target)]
        except KeyError:
            raise KeyError(f"no mirror from {source!r} to {target!r}") from None

    @property
    def copied(self) -> int:
        return sum(mirror.copied for mirror in self.mirrors.values())

    @property
    def errors(self) -> dict[tuple[str, str], BaseException]:
        """Background mirrors that gave up, and why."""
        return {pair: m.error for pair, m in self.mirrors.items() if m.error is not None}

    def start(self) -> None:
        for mirror in self.mirrors.values():
            mirror.start()

    def stop(self) -> None:
        for mirror in self.mirrors.values():
            mirror.stop()

    def pause(self) -> None:
        for mirror in self.mirrors.values():
            mirror.pause()

    def resume(self) -> None:
        for mirror in self.mirrors.values():
            mirror.resume()

    @property
    def paused(self) -> bool:
        return all(mirror.paused for mirror in self.mirrors.values())

    def copy_among(self, region_names: list[str] | None = None, timeout: float = 30.0) -> int:
        """`copy_available` for every pair whose source and target are both in `region_names`
        (every pair when None), in parallel; returns the total copied. One pass: an op log
        copied here was complete at its EOF, and mirrors never copy mirrored topics, so a single
        pass replicates everything among the regions."""
        if region_names is None:
            chosen = set(self.topology.names)
        else:
            for name in region_names:
                self.topology.region(name)  # KeyError naming the unknown region
            chosen = set(region_names)
        pairs = [m for (s, t), m in self.mirrors.items() if s in chosen and t in chosen]
        if not pairs:
            return 0
        with ThreadPoolExecutor(max_workers=len(pairs), thread_name_prefix="mirror-copy") as pool:
            futures = [pool.submit(m.copy_available, timeout) for m in pairs]
            return sum(future.result() for future in futures)

    def __enter__(self) -> MirrorSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
