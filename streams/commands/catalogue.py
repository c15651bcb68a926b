"""The command catalogue: every command's metadata, Redis's as data and this database's own.

`REDIS` holds what redis-server 7.0.15 says about each of its commands and subcommands, and the
stream commands Redis added since (`redis8_commands.json`)
(`container|sub`): arity, flags, key positions, ACL categories, tips (`COMMAND INFO`) and summary,
version, group, complexity (`COMMAND DOCS`). It is read from `redis7_commands.json`, which
`scripts/gen_command_catalogue.py` writes from a real redis-server's own answers; nothing in it
is typed by hand. `OWN` declares, in the same shape, the commands Redis does not have (CRDT.*,
and CLIENT SETINFO from Redis 7.2).

What uses it: the command table takes each command's arity, flags and key positions from here
(`streams.commands.base.command`; `streams.commands.table` checks at import that every row is
catalogued), COMMAND INFO / DOCS / LIST describe commands from it, and a Redis command we do not
implement is refused with `unsupported` instead of Redis's unknown-command error, so a client
learns at once that this is a streams-only database. A name in no Redis 7.0 command keeps the
unknown-command error. Flags are Redis's own words (`write`, `readonly`, `blocking`, `no_auth`,
`no_multi`, ...): one vocabulary for the table, the node and COMMAND INFO.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from streams import REDIS_COMPAT_VERSION, __version__, errors
from streams.errors import CommandError

DATA_FILE = "redis7_commands.json"
REDIS8_FILE = "redis8_commands.json"
"""The stream commands Redis added after 7.0 (XDELEX, XACKDEL, XCFGSET, XNACK, XIDMPRECORD), in
the same shape, from their `src/commands/*.json` in redis/redis (the first line names the
commits). The options added to existing commands (XADD, XTRIM, XREADGROUP) change no metadata."""

DATA_GROUPS = frozenset(
    {"string", "list", "hash", "set", "sorted-set", "hyperloglog", "geo", "bitmap", "generic"}
)
"""Groups of commands over data types (and generic key commands such as EXPIRE)."""


@dataclass(frozen=True, slots=True)
class Spec:
    """One command's (or subcommand's) metadata, in the order COMMAND INFO and DOCS give it."""

    name: str
    arity: int
    """Redis's rule: n exactly n arguments (the name included), -n at least n."""
    flags: tuple[str, ...]
    keys: tuple[int, int, int]
    """First key, last key (negative: from the end), step; (0, 0, 0) when there is none."""
    acl: tuple[str, ...]
    tips: tuple[str, ...]
    group: str
    since: str
    summary: str
    complexity: str
    subcommands: tuple[str, ...] = ()

    def arity_ok(self, argc: int) -> bool:
        return argc == self.arity if self.arity >= 0 else argc >= -self.arity


def _load() -> dict[str, Spec]:
    lines = resources.files("streams.commands").joinpath(DATA_FILE).read_text().splitlines()
    header = json.loads(lines[0])
    if header["redis_version"] != REDIS_COMPAT_VERSION:
        raise RuntimeError(
            f"{DATA_FILE} describes Redis {header['redis_version']}, not "
            f"{REDIS_COMPAT_VERSION}: run scripts/gen_command_catalogue.py"
        )
    newer = resources.files("streams.commands").joinpath(REDIS8_FILE).read_text().splitlines()
    out: dict[str, Spec] = {}
    for line in lines[1:] + newer[1:]:
        d = json.loads(line)
        first, last, step = d["keys"]
        out[d["name"]] = Spec(
            d["name"],
            d["arity"],
            tuple(d["flags"]),
            (first, last, step),
            tuple(d["acl"]),
            tuple(d["tips"]),
            d["group"],
            d["since"],
            d["summary"],
            d["complexity"],
            tuple(d["subcommands"]),
        )
    return out


REDIS: Mapping[str, Spec] = _load()


def _own(name: str, arity: int, flags: str, acl: str, summary: str, complexity: str) -> Spec:
    return Spec(
        name,
        arity,
        tuple(flags.split()),
        (0, 0, 0),
        tuple(acl.split()),
        (),
        "server",
        __version__,
        summary,
        complexity,
    )


_ADMIN = "@admin @dangerous"

OWN: Mapping[str, Spec] = {
    s.name: s
    for s in (
        _own(
            "crdt.digest",
            1,
            "admin readonly",
            f"@read {_ADMIN}",
            "Hex digest of the region's replicated state",
            "O(N)",
        ),
        _own(
            "crdt.vector",
            1,
            "admin readonly",
            f"@read {_ADMIN}",
            "Applied op sequence per origin region",
            "O(regions)",
        ),
        _own(
            "crdt.shards",
            1,
            "admin readonly",
            f"@read {_ADMIN}",
            "Per shard of this node: index, digest and applied vector",
            "O(N)",
        ),
        _own(
            "crdt.info",
            1,
            "admin",
            f"@slow {_ADMIN}",
            "Region, ID mode, replication lag per origin and op-log positions",
            "O(1)",
        ),
        _own(
            "crdt.flush",
            1,
            "admin no_multi",
            f"@slow {_ADMIN}",
            "Log held-back XACK effects and local ops now",
            "O(groups)",
        ),
        _own(
            "crdt.clock",
            -1,
            "admin",
            f"@slow {_ADMIN}",
            "Pin or release the node's clock (with --debug-clock only)",
            "O(1)",
        ),
        _own(
            "crdt.fault",
            3,
            "admin no_multi",
            f"@slow {_ADMIN}",
            "Fail the next N op-log appends (with --debug-faults only)",
            "O(1)",
        ),
        _own(
            "crdt.snapshot",
            1,
            "admin no_multi",
            f"@slow {_ADMIN}",
            "Write a snapshot of the region's state to <region>.snapshot now",
            "O(N)",
        ),
        _own(
            "client|setinfo",
            4,
            "",
            "@slow",
            "Set client library name or version (Redis 7.2)",
            "O(1)",
        ),
    )
}
"""This database's commands that Redis 7.0 does not have."""


def spec(name: str) -> Spec:
    """The metadata of a command (`container|sub` for a subcommand), Redis's or our own."""
    found = REDIS.get(name) or OWN.get(name)
    if found is None:
        raise KeyError(f"{name!r} is in neither Redis 7.0's command catalogue nor ours")
    return found


def is_redis_command(name: str) -> bool:
    """A command (or `container|sub`) name of Redis 7.0."""
    return name in REDIS


def unsupported(name: str) -> CommandError:
    """The refusal for a Redis 7 command we do not implement (`name` lower case, `a|b` for a
    subcommand)."""
    found = REDIS.get(name)
    if found is not None and found.group in DATA_GROUPS:
        return CommandError(errors.UNSUPPORTED_COMMAND_FMT.format(name=name))
    return CommandError(errors.UNSUPPORTED_FEATURE_FMT.format(name=name))
