"""The retention policy of a topology file's `[retention]` table: how much of the op logs is kept.

Why a policy at all: every op log is created with `retention.ms=-1` and `retention.bytes=-1`,
since Kafka's own time- or size-based deletion could remove a record no snapshot covers yet
(docs/kafka.md). Left alone the logs grow forever. With the policy, `streams retention apply`
deletes (Kafka DeleteRecords) the records every reader can do without: those the kept snapshots
cover, every mirror has copied and that are older than the tail kept (docs/architecture.md,
"Retention and new regions"; the rule itself is `streams.kafka.retention`).

    [retention]
    snapshots = 3          # keep the newest 3 snapshots of each shard (at least 1); the op logs
                           # keep everything the oldest of them does not cover
    tail_seconds = 3600    # and at least this many seconds of records before that (0: none)

No `[retention]` table: nothing is ever deleted from an op log (the default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streams.config.nodes import TopologyError, is_int

RETENTION_KEYS = ("snapshots", "tail_seconds")
MAX_SNAPSHOTS = 1000


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep the newest `snapshots` snapshots per shard, and of each op log what the oldest of
    them does not cover plus at least `tail_seconds` seconds of records before that."""

    snapshots: int
    tail_seconds: int = 0

    def __post_init__(self) -> None:
        if not is_int(self.snapshots) or not 1 <= self.snapshots <= MAX_SNAPSHOTS:
            raise TopologyError(
                f"[retention]: field 'snapshots' must be an integer 1..{MAX_SNAPSHOTS} (the"
                f" newest snapshots kept per shard), got {self.snapshots!r}"
            )
        if not is_int(self.tail_seconds) or self.tail_seconds < 0:
            raise TopologyError(
                "[retention]: field 'tail_seconds' must be an integer >= 0 (seconds of op-log"
                f" tail kept before the oldest kept snapshot), got {self.tail_seconds!r}"
            )


def parse_retention(raw: object) -> RetentionPolicy | None:
    """The `[retention]` table (None when absent); TopologyError naming the bad key."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise TopologyError("'retention' must be a table: write [retention]")
    unknown = sorted(set(raw) - set(RETENTION_KEYS))
    if unknown:
        raise TopologyError(
            f"[retention]: unknown key(s) {', '.join(map(repr, unknown))}"
            f" (known: {', '.join(RETENTION_KEYS)})"
        )
    if "snapshots" not in raw:
        raise TopologyError("[retention]: field 'snapshots' is required (e.g. snapshots = 3)")
    return RetentionPolicy(raw["snapshots"], raw.get("tail_seconds", 0))


def retention_lines(policy: RetentionPolicy | None) -> list[str]:
    """The `[retention]` table as TOML lines (none without a policy)."""
    if policy is None:
        return []
    return [
        "",
        "[retention]",
        f"snapshots = {policy.snapshots}",
        f"tail_seconds = {policy.tail_seconds}",
    ]
