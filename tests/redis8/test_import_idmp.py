"""`streams import` from a Redis 8.6 source: the stream's IDMP window (XINFO STREAM's
idmp-duration / idmp-maxsize) is set on the target with XCFGSET, so it replicates with the stream;
the IIDs cannot be read from a source and are not carried. No Redis 8.6 server is at hand here:
the source's XINFO STREAM reply is given as such a server answers it (stream.tcl's fields)."""

from __future__ import annotations

import redis

from redis8.conftest import NodeThread
from streams import importer


def test_a_redis_86_sources_idmp_window_is_set_on_the_target(
    node: NodeThread, py: redis.Redis
) -> None:
    py.delete("s")
    py.xadd("s", {"f": "v"})
    counts = importer.Counts()
    info = {b"length": 1, b"idmp-duration": 42, b"idmp-maxsize": 7, b"iids-tracked": 3}
    importer._idmp_window(py, b"s", info, counts)
    got = py.xinfo_stream("s")
    assert (got["idmp-duration"], got["idmp-maxsize"], got["iids-tracked"]) == (42, 7, 0)
    assert counts.idmp_windows == 1


def test_a_redis_7_source_leaves_the_window_alone(node: NodeThread, py: redis.Redis) -> None:
    py.delete("s7")
    py.xadd("s7", {"f": "v"})
    py.execute_command("XCFGSET", "s7", "IDMP-DURATION", 9)
    counts = importer.Counts()
    importer._idmp_window(py, b"s7", {b"length": 1, b"groups": 0}, counts)
    assert py.xinfo_stream("s7")["idmp-duration"] == 9
    assert counts.idmp_windows == 0
