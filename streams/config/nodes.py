"""A region's node processes in the topology file: which node owns which shards, and the text of
a shard set (`"0-3"`, `"0,2"`, `"4-7,9"`). `streams.config.topology` reads them as part of a region
and re-exports them; the field checks shared by both live here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# A shard is a partition of every op-log topic; 1024 shards is already far more processes than a
# region runs, and keeps a shard set's text and CLUSTER SLOTS replies small.
MAX_SHARDS = 1024
SHARD_SET_FORMS = "'0-3', '0,2' or '4-7,9'"


class TopologyError(ValueError):
    """A topology file or object that is not valid; the message names the place and the field."""


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_port(where: str, value: object, name: str = "resp_port", low: int = 1) -> None:
    """A port field: 1..65535, or `low` = 0 where 0 means "not served" (`tls_port`, and
    `resp_port` beside a TLS port, as Redis's `port 0`)."""
    if not is_int(value) or not low <= value <= 65535:  # type: ignore[operator]
        raise TopologyError(
            f"{where}: field {name!r} must be an integer in {low}..65535, got {value!r}"
        )


def check_ports(where: str, resp_port: object, tls_port: object) -> None:
    """`resp_port` (plaintext RESP) and `tls_port` (RESP over TLS): 0 switches one off, not
    both."""
    check_port(where, tls_port, "tls_port", low=0)
    check_port(where, resp_port, low=0 if tls_port else 1)


def check_bind(where: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise TopologyError(f"{where}: field 'bind' must be a non-empty string, got {value!r}")


def check_shard_count(value: object) -> None:
    if not is_int(value) or not 1 <= value <= MAX_SHARDS:  # type: ignore[operator]
        raise TopologyError(
            f"[topology]: field 'shards' must be an integer in 1..{MAX_SHARDS}, got {value!r}"
        )


def parse_shard_set(text: str) -> tuple[int, ...]:
    """`"4-7,9"` -> `(4, 5, 6, 7, 9)`: the shards a node owns, as written in a topology file.

    Items are single shards or inclusive ranges, separated by commas (spaces around items are
    allowed); the result is sorted. A shard named twice, a range that runs backwards or a shard
    past the largest possible one is refused rather than read some way: the text decides which
    node serves which keys.
    """
    if not isinstance(text, str):
        raise TopologyError(f"a shard set is text such as {SHARD_SET_FORMS}, got {text!r}")
    where = f"shard set {text!r}"
    if not text.strip():
        raise TopologyError(f"{where} is empty: name at least one shard ({SHARD_SET_FORMS})")
    seen: set[int] = set()
    for item in text.split(","):
        match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", item)
        if match is None:
            raise TopologyError(
                f"{where}: {item.strip()!r} is not a shard or a range of shards"
                f" (write {SHARD_SET_FORMS})"
            )
        first = int(match.group(1))
        last = first if match.group(2) is None else int(match.group(2))
        if last < first:
            raise TopologyError(f"{where}: the range {first}-{last} runs backwards")
        if last >= MAX_SHARDS:
            raise TopologyError(
                f"{where}: shard {last} does not exist: a database has at most {MAX_SHARDS}"
                f" shards, 0..{MAX_SHARDS - 1}"
            )
        twice = seen.intersection(range(first, last + 1))
        if twice:
            raise TopologyError(f"{where}: shard {min(twice)} is named twice")
        seen.update(range(first, last + 1))
    return tuple(sorted(seen))


def format_shard_set(shards: Iterable[int]) -> str:
    """The compact text of a shard set, runs as ranges: `(0, 1, 2, 3, 5)` -> `"0-3,5"`
    (what `parse_shard_set` reads back; "" for no shard)."""
    parts: list[str] = []
    ordered = sorted(set(shards))
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] != ordered[i - 1] + 1:
            first, last = ordered[start], ordered[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ",".join(parts)


@dataclass(frozen=True)
class NodeConfig:
    """One node process of a region: its number (`--node K`), where it listens, its shards.

    `implicit` marks the node a region gets when it lists none: it follows the region's bind and
    resp_port (so `dataclasses.replace(region, resp_port=...)` moves it along) and `dumps` leaves
    it out. It takes no part in comparisons: an explicit node equal to the default is the default.
    """

    index: int
    bind: str
    resp_port: int
    shards: tuple[int, ...]
    announce: str = ""
    """The host clients and the region's other nodes reach this node at (CLUSTER SLOTS, MOVED),
    as Redis's `cluster-announce-ip`: needed when it binds 0.0.0.0 or sits behind NAT or in a
    container; "" means `bind`."""
    tls_port: int = 0
    """RESP over TLS (`tls-port`); 0: none. With it `resp_port` may be 0 (no plaintext)."""
    implicit: bool = field(default=False, compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        if not is_int(self.index) or self.index < 0:
            raise TopologyError(
                f"node {self.index!r}: its index must be an integer >= 0 (nodes are numbered 0,"
                " 1, ... in file order)"
            )
        where = f"node {self.index}"
        check_bind(where, self.bind)
        check_ports(where, self.resp_port, self.tls_port)
        if self.resp_port and self.resp_port == self.tls_port:
            raise TopologyError(f"{where}: resp_port and tls_port are both {self.resp_port}")
        if not isinstance(self.announce, str):
            raise TopologyError(
                f"{where}: field 'announce' must be a string, got {self.announce!r}"
            )
        if not isinstance(self.shards, tuple | list) or not self.shards:
            raise TopologyError(
                f"{where}: field 'shards' must name at least one shard, got {self.shards!r}"
            )
        for shard in self.shards:
            if not is_int(shard) or not 0 <= shard < MAX_SHARDS:
                raise TopologyError(
                    f"{where}: field 'shards' holds {shard!r}; a shard is an integer in"
                    f" 0..{MAX_SHARDS - 1}"
                )
        if len(set(self.shards)) != len(self.shards):
            twice = next(s for s in self.shards if self.shards.count(s) > 1)
            raise TopologyError(f"{where}: field 'shards' names shard {twice} twice")
        object.__setattr__(self, "shards", tuple(sorted(self.shards)))

    @property
    def address(self) -> str:
        """`bind:port`, as printed and as a client connects (on the host the node runs on); the
        TLS port when the node serves no plaintext."""
        return f"{self.bind}:{self.resp_port or self.tls_port}"

    @property
    def ports(self) -> tuple[int, ...]:
        """Every port the node listens on (plaintext, TLS)."""
        return tuple(port for port in (self.resp_port, self.tls_port) if port)

    @property
    def announced(self) -> str:
        """The host others reach the node at: `announce`, else `bind`."""
        return self.announce or self.bind
