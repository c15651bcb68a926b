"""Replay positions as operators write them, and the errors that mean "cannot be resolved".

- `--at r1=120,r2=98`: per-origin op seq, as CRDT.VECTOR prints it (a region named by its name
  or its numeric id); origins not named are cut at 0.
- `--offsets TOPIC=OFFSET,...`: the next offset to read per topic (records before it count);
  topics not named are read to their end.
- `--time ISO8601`: each topic up to its last record with a Kafka timestamp at or before then.
"""

from __future__ import annotations

from datetime import UTC, datetime


class PositionError(ValueError):
    """A position that cannot be parsed or resolved (exit code 3)."""


def parse_pairs(text: str, what: str) -> list[tuple[str, int]]:
    pairs: list[tuple[str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise PositionError(f"{what}: {item!r} is not NAME=NUMBER")
        try:
            number = int(value)
        except ValueError:
            raise PositionError(f"{what}: {value!r} in {item!r} is not a number") from None
        if number < 0:
            raise PositionError(f"{what}: {item!r} is negative")
        pairs.append((name, number))
    if not pairs:
        raise PositionError(f"{what}: empty position")
    return pairs


def resolve_at(text: str, ids: dict[str, int]) -> dict[int, int]:
    """`r1=120,r2=98` -> {origin id: seq}; `ids` maps region names to ids (from the logs)."""
    cut: dict[int, int] = {}
    for name, seq in parse_pairs(text, "--at"):
        if name in ids:
            cut[ids[name]] = seq
        elif name.isdigit():
            cut[int(name)] = seq
        else:
            known = ", ".join(sorted(ids)) or "none"
            raise PositionError(f"--at: unknown region {name!r} (regions in these logs: {known})")
    return cut


def parse_offsets(text: str) -> dict[str, int]:
    return dict(parse_pairs(text, "--offsets"))


def parse_time(text: str) -> int:
    """ISO 8601 (a naive time is UTC) -> epoch milliseconds."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise PositionError(f"--time: {text!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)
