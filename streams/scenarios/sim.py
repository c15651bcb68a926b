"""Simulated regions: pure `Region`s with explicit sync, no Kafka, no sockets.

Each region keeps the replicated ops it issued, like its `<region>.oplog`; a sync delivers the
origins' logs among the chosen regions (duplicates are dropped by causal delivery), after first
having each region log its held-back consecutive-XACK effects, as
`LocalTopology.sync()` does (docs/architecture.md, "Other runtime facts").
"""

from __future__ import annotations

from streams.commands.execute import run
from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.reply import to_resp2_python

DEFAULT_CLOCK_MS = 1_000_000


class SimulatedRegions:
    def __init__(self, regions: int, mode: IdMode = IdMode.STRICT) -> None:
        self.regions = {i: Region(i, mode) for i in range(1, regions + 1)}
        self.logs: dict[int, list[ops.Op]] = {i: [] for i in self.regions}
        self.clock_ms = DEFAULT_CLOCK_MS

    def execute(self, region: int, args: tuple[bytes, ...], clock_ms: int | None) -> object:
        if clock_ms is not None:
            self.clock_ms = clock_ms
        done = run(self.regions[region], list(args), self.clock_ms, tuple(self.regions))
        self.logs[region].extend(done.replicated)
        return to_resp2_python(done.reply)

    def flush(self, region: int) -> None:
        self.logs[region].extend(self.regions[region].flush_acks(self.clock_ms))

    def sync(self, regions: tuple[int, ...] | None = None) -> None:
        chosen = tuple(self.regions) if regions is None else regions
        for r in chosen:
            self.flush(r)
        for origin in chosen:
            for target in chosen:
                if target != origin:
                    for op in self.logs[origin]:
                        self.regions[target].receive(op)

    def digests(self) -> dict[int, str]:
        return {i: r.state.digest() for i, r in self.regions.items()}
