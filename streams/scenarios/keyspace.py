"""A scenario driver that runs a seed table on keys of its own, so tables can share a topology
(`streams demo` runs every table of an ID mode on one topology; the seed-table tests do the same
on sharded regions and on Apache Kafka).

Each key a command names (`streams.commands.keyspec`) gets the table's prefix on the way in, and
the prefix is taken off every reply on the way out (XREAD and XREADGROUP name their keys), so the
table reads as written. IDs do not depend on key names (each table pins its region clocks), so a
table's replies are the same as on a topology of its own. A table of two regions runs on the
first two of a bigger topology; its syncs are among its own regions.
"""

from __future__ import annotations

from streams.commands.keyspec import command_keys
from streams.scenarios import Scenario
from streams.scenarios.resp_driver import RespDriver, Topology

CONTAINERS = {b"xgroup", b"xinfo"}
"""Commands whose keys depend on their subcommand (`keyspec` names them `xgroup|create`)."""


def _name(args: tuple[bytes, ...]) -> str:
    first = args[0].lower()
    if first in CONTAINERS and len(args) > 1:
        return f"{first.decode()}|{args[1].lower().decode()}"
    return first.decode()


class KeyspaceDriver(RespDriver):
    def __init__(self, topology: Topology, prefix: bytes, regions: int) -> None:
        super().__init__(topology)
        self.prefix = prefix
        self.regions = tuple(range(1, regions + 1))

    @classmethod
    def for_table(cls, topology: Topology, scenario: Scenario) -> KeyspaceDriver:
        """The driver of one seed table: keys prefixed `<slug>:`, syncs among its regions."""
        return cls(topology, scenario.slug.encode() + b":", scenario.regions)

    def execute(self, region: int, args: tuple[bytes, ...], clock_ms: int | None) -> object:
        keys = command_keys(_name(args), list(args))
        named = [self.prefix + a if any(a is k for k in keys) else a for a in args]
        return self._strip(super().execute(region, tuple(named), clock_ms))

    def sync(self, regions: tuple[int, ...] | None) -> None:
        """A full sync of the table's regions (the shared topology may have more)."""
        super().sync(self.regions if regions is None else regions)

    def _strip(self, reply: object) -> object:
        if isinstance(reply, bytes) and reply.startswith(self.prefix):
            return reply[len(self.prefix) :]
        if isinstance(reply, list):
            return [self._strip(item) for item in reply]
        return reply
