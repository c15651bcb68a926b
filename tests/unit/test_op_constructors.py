"""The op classes whose `__init__` is written out (`streams.crdt.ops`, `commands.base.Result`) keep
the dataclass contract: each field set from its own argument, by name and by position, defaults as
declared, equality and hashing by value, and frozen ops refusing assignment. Run on whichever
build is loaded (compiled or pure): a written-out `__init__` that misses or swaps a field, or
drops a default, fails here."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from streams.commands.base import BlockRequest, Result
from streams.crdt import ops

OP_CLASSES = [
    cls
    for cls in vars(ops).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == ops.__name__
]


_BYTES = {"key", "group", "consumer", "pid", "iid", "reply"}
_IDS = {"id", "last_id", "default", "max_deleted_id"}
_INTS = {"origin", "seq", "region", "ts_ms", "now_ms", "entries_added", "entries_read", "mode"}
_INTS |= {"delivery_time_ms", "retry_count", "duration_s", "maxsize", "block_ms"}
_FLAGS = {"noack", "increment", "clear"}
_PER_ORIGIN = {"thresholds", "start", "frontier", "ctx", "entries", "redelivered", "dropped"}


def _value(cls: type, name: str, i: int) -> Any:
    """A value of the field's type (compiled constructors check types), distinct per `i`."""
    if name in _BYTES:
        return f"{name}{i}".encode()
    if name in _IDS:
        return (i, i + 1)
    if name in _INTS:
        return 1000 + i
    if name in _FLAGS:
        return i % 2 == 0
    if name in _PER_ORIGIN:  # OriginIds, Vector and EntryRef tuples are all (int, x) pairs
        return ((i, (i, 2)),) if name != "ctx" else ((i, i + 3),)
    if name == "fields":
        return (b"f", f"v{i}".encode())
    if name == "ids":
        return ((i, 7),)
    if name == "body":
        return ops.Ack(b"k", f"g{i}".encode(), ()) if cls is ops.LocalOp else ops.Del(b"%d" % i)
    if name == "ops":
        return [ops.Del(b"%d" % i)]
    if name == "block":
        return BlockRequest((b"k",), i, ())
    raise AssertionError(f"{cls.__name__}.{name}: say what value this field takes")


def _values(cls: type, offset: int = 0) -> dict[str, Any]:
    """A distinct value per field."""
    return {f.name: _value(cls, f.name, i + offset) for i, f in enumerate(dataclasses.fields(cls))}


def test_every_op_class_is_checked_including_the_written_out_ones() -> None:
    names = {cls.__name__ for cls in OP_CLASSES}
    assert {"Op", "LocalOp", "XAdd", "Ack", "Deliver", "Claim"} <= names


@pytest.mark.parametrize("cls", [*OP_CLASSES, Result], ids=lambda c: c.__name__)
def test_constructor_sets_each_field_from_its_own_argument(cls: type) -> None:
    values = _values(cls)
    by_name = cls(**values)
    by_position = cls(*values.values())
    for name, value in values.items():
        assert getattr(by_name, name) == value, name
        assert getattr(by_position, name) == value, name
    assert by_name == by_position
    if cls is not Result:
        assert hash(by_name) == hash(by_position)
        first = next(iter(values))
        assert by_name != cls(**{**values, first: _values(cls, 100)[first]})


@pytest.mark.parametrize("cls", [*OP_CLASSES, Result], ids=lambda c: c.__name__)
def test_defaults_are_the_declared_ones(cls: type) -> None:
    required = {
        f.name: _value(cls, f.name, 0)
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    made = cls(**required)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            assert getattr(made, f.name) == f.default, f.name
        elif f.default_factory is not dataclasses.MISSING:
            assert getattr(made, f.name) == f.default_factory(), f.name


def test_a_result_without_ops_gets_a_list_of_its_own() -> None:
    first, second = Result(b"OK"), Result(b"OK")
    first.ops.append(ops.Del(b"k"))
    assert second.ops == []


@pytest.mark.parametrize("cls", OP_CLASSES, ids=lambda c: c.__name__)
def test_ops_stay_frozen(cls: type) -> None:
    made = cls(**_values(cls))
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, name, _values(cls, 100)[name])
