"""Which arguments of a request are keys, found as Redis 7.0.15 finds them.

Redis has two ways, and they disagree on malformed requests, so both are here:

- `command_keys`: `getKeysFromCommand` (db.c), what Redis Cluster routes a request by
  (`getNodeByQuery`): a command's own key-finding function where it has one (XREAD and
  XREADGROUP: `xreadGetKeys`, which skips the options before STREAMS and finds no key at all in a
  request that cannot parse), else the command table's range (first key, last key, step:
  `catalogue.Spec.keys`, from COMMAND INFO).
- `getkeys`: what COMMAND GETKEYS answers (`getKeysFromCommandWithSpecs`): the key specs, which
  for XREAD / XREADGROUP search for the first `STREAMS` word anywhere after the options' start
  (a group or count that reads `streams` is taken for the keyword) and take half of what follows;
  a spec that does not fit the arguments falls back to `xreadGetKeys`. redis-py's RedisCluster asks
  COMMAND GETKEYS for the keys of every `movablekeys` command, so this one decides where redis-py
  sends an XREAD.

Both are exact for the commands this database serves (every other command's key specs are one
index or range per key, which equals the catalogue's range). For Redis commands it refuses, the
catalogue's range is used as is (movable-key commands such as EVAL or SORT ... STORE have no
range for their extra keys): those requests are refused whatever node they reach.
"""

from __future__ import annotations

from collections.abc import Sequence

from streams import errors
from streams.commands.catalogue import spec
from streams.errors import CommandError

_STREAMS_KEYWORD_FROM = {"xread": 1, "xreadgroup": 4}
"""The commands with a keyword key spec: `STREAMS`, searched from this argument on."""


def command_keys(name: str, args: Sequence[bytes]) -> list[bytes]:
    """The keys of request `args` (command name included) of command `name` (`container|sub` for
    a subcommand, as the catalogue names it), as getKeysFromCommand finds them."""
    if name in _STREAMS_KEYWORD_FROM:
        return _xread_keys(args)
    return _range_keys(name, args)


def getkeys(name: str, args: Sequence[bytes]) -> list[bytes]:
    """COMMAND GETKEYS for a request of command `name`, with Redis's errors in Redis's order:
    a command without keys, then the arity, then arguments in which no key is found (except for
    commands whose keys are optional, which answer an empty list). Finding the command is the
    caller's (`ERR Invalid command specified`)."""
    found = spec(name)
    if found.keys[0] <= 0 and "movablekeys" not in found.flags:
        raise CommandError(errors.GETKEYS_NO_KEYS)
    if not found.arity_ok(len(args)):
        raise CommandError(errors.GETKEYS_INVALID_ARITY)
    keys = _spec_keys(name, args)
    if not keys and "no_mandatory_keys" not in found.flags:
        raise CommandError(errors.GETKEYS_INVALID_ARGS)
    return keys


def _spec_keys(name: str, args: Sequence[bytes]) -> list[bytes]:
    """getKeysFromCommandWithSpecs: the keyword spec of XREAD / XREADGROUP (`STREAMS`, then a
    range with lastkey -1 and limit 2), falling back to xreadGetKeys when it does not fit."""
    start = _STREAMS_KEYWORD_FROM.get(name)
    if start is None:
        return _range_keys(name, args)
    argc = len(args)
    first = _keyword_position(args, b"streams", start)
    if first == 0:
        return []  # the keyword is missing: this spec gives no key, and it is the only one
    last = first + (argc - first) // 2 - 1
    if last >= argc or last < first or first >= argc:
        return _xread_keys(args)
    return list(args[first : last + 1])


def _keyword_position(args: Sequence[bytes], keyword: bytes, start: int) -> int:
    """The position after `keyword`, searched as getKeysUsingKeySpecs does (from `start` up to,
    but not including, the last argument), or 0 when it is not there."""
    argc = len(args)
    end = argc - 1
    step = 1 if start <= end else -1
    i = start
    while i != end:
        if i >= argc or i < 1:
            break
        if _c_lower(args[i]) == keyword:
            return i + 1
        i += step
    return 0


def _xread_keys(args: Sequence[bytes]) -> list[bytes]:
    """xreadGetKeys: skip BLOCK/COUNT/GROUP/NOACK and their values up to STREAMS, then half of
    the rest; no key at all when STREAMS is missing or the rest is empty or odd."""
    argc = len(args)
    streams_pos = -1
    i = 1
    while i < argc:
        word = _c_lower(args[i])
        if word in (b"block", b"count"):
            i += 1
        elif word == b"group":
            i += 2
        elif word == b"streams":
            streams_pos = i
            break
        elif word != b"noack":
            break
        i += 1
    num = argc - streams_pos - 1 if streams_pos != -1 else 0
    if num == 0 or num % 2 != 0:
        return []
    return list(args[streams_pos + 1 : streams_pos + 1 + num // 2])


def _range_keys(name: str, args: Sequence[bytes]) -> list[bytes]:
    """getKeysUsingLegacyRangeSpec: the catalogue's (first, last, step); a negative last counts
    from the end; a request too short for the range has no keys (arity errors come later)."""
    first, last, step = spec(name).keys
    if first <= 0:
        return []
    argc = len(args)
    if last < 0:
        last += argc
    if last >= argc:
        return []
    return list(args[first : last + 1 : step])


def _c_lower(arg: bytes) -> bytes:
    """An argument as strcasecmp compares it: a C string (up to its first NUL), any case."""
    return arg.split(b"\x00", 1)[0].lower()
