"""Entry commands over regions: per-origin trimming, observed-remove, and Redis's argument order."""

from __future__ import annotations

from streams import errors
from streams.commands.execute import run
from streams.crdt import ops
from streams.crdt.region import Region
from streams.errors import CommandError
from streams.ids import MAX_ID, MIN_ID, IdMode, StreamID
from streams.reply import NULL_ARRAY, OK, Reply, Status
from streams.resp.encode import encode
from streams.scenarios.sim import SimulatedRegions


def cmd(line: str) -> tuple[bytes, ...]:
    return tuple(word.encode() for word in line.split())


def entries(sim: SimulatedRegions, region: int, key: bytes = b"x") -> list[tuple[StreamID, int]]:
    """(id, origin) of every entry, in merged order."""
    ks = sim.regions[region].state.get(key)
    return [] if ks is None else [(sid, o) for sid, o, _f in ks.entries.range(MIN_ID, MAX_ID)]


def ids(sim: SimulatedRegions, region: int, key: bytes = b"x") -> list[str]:
    reply = sim.execute(region, (b"XRANGE", key, b"-", b"+"), None)
    assert isinstance(reply, list)
    return [entry[0].decode() for entry in reply]


def error(text: str) -> CommandError:
    return CommandError(text)


# --- duplicates across origins ---------------------------------------------------------------


def concurrent_duplicates() -> SimulatedRegions:
    """Liberal mode: both regions add 100-1 concurrently (seed 000, table 3)."""
    sim = SimulatedRegions(2, IdMode.LIBERAL)
    sim.execute(1, cmd("XADD x 100-1 f r1"), 1000)
    sim.execute(2, cmd("XADD x 100-1 f r2"), 1000)
    sim.sync()
    assert entries(sim, 1) == entries(sim, 2) == [((100, 1), 1), ((100, 1), 2)]
    return sim


def test_xadd_maxlen_with_duplicate_ids_trims_per_origin() -> None:
    sim = concurrent_duplicates()
    assert sim.execute(1, cmd("XADD x MAXLEN 2 200-1 f v"), 1000) == b"200-1"
    trim = [o.body for o in sim.logs[1] if isinstance(o.body, ops.XTrim)]
    assert trim == [ops.XTrim(b"x", ((1, (100, 1)),))]  # only region 1's 100-1
    sim.sync()
    for region in (1, 2):
        assert entries(sim, region) == [((100, 1), 2), ((200, 1), 1)]


def test_xtrim_maxlen_keeps_the_later_duplicate_in_region_order() -> None:
    sim = concurrent_duplicates()
    assert sim.execute(2, cmd("XTRIM x MAXLEN 1"), 1000) == 1
    sim.sync()
    assert entries(sim, 1) == entries(sim, 2) == [((100, 1), 2)]


def test_xdel_of_a_duplicate_id_removes_every_entry_with_that_id() -> None:
    sim = concurrent_duplicates()
    assert sim.execute(2, cmd("XDEL x 100-1"), 1000) == 2
    sim.sync()
    assert entries(sim, 1) == entries(sim, 2) == []


def test_xtrim_minid_removes_duplicates_below_the_threshold_in_every_origin() -> None:
    sim = concurrent_duplicates()
    sim.execute(1, cmd("XADD x 300-1 f v"), 1000)
    assert sim.execute(1, cmd("XTRIM x MINID 200"), 1000) == 2
    sim.sync()
    assert entries(sim, 2) == [((300, 1), 1)]


# --- observed-remove -------------------------------------------------------------------------


def two_regions_with_a_concurrent_entry() -> SimulatedRegions:
    """Strict mode: region 1's entry is synced; region 2 then adds one region 1 has not seen."""
    sim = SimulatedRegions(2, IdMode.STRICT)
    sim.execute(1, cmd("XADD x * f seen"), 2000)
    sim.sync()
    sim.execute(2, cmd("XADD x * f unseen"), 1500)  # clock behind: 2000-2, above 2000-1
    return sim


def test_del_does_not_remove_a_concurrent_entry_of_another_region() -> None:
    sim = two_regions_with_a_concurrent_entry()
    assert sim.execute(1, cmd("DEL x"), 2001) == 1
    assert sim.execute(1, cmd("EXISTS x"), None) == 0
    sim.sync()
    for region in (1, 2):
        assert ids(sim, region) == ["2000-2"]
        assert sim.execute(region, cmd("XLEN x"), None) == 1


def test_xdel_does_not_remove_a_concurrent_entry_with_the_same_id() -> None:
    sim = SimulatedRegions(2, IdMode.LIBERAL)
    sim.execute(1, cmd("XADD x 100-1 f r1"), 1000)
    sim.execute(2, cmd("XADD x 100-1 f r2"), 1000)
    assert sim.execute(1, cmd("XDEL x 100-1"), 1000) == 1  # region 1 sees only its own
    sim.sync()
    assert entries(sim, 1) == entries(sim, 2) == [((100, 1), 2)]


def test_xtrim_does_not_remove_a_concurrent_entry_of_another_region() -> None:
    sim = SimulatedRegions(2, IdMode.STRICT)
    sim.execute(1, cmd("XADD x * f a"), 2000)
    sim.execute(1, cmd("XADD x * f b"), 2000)
    sim.execute(2, cmd("XADD x * f c"), 1500)  # lower ID, concurrent
    assert sim.execute(1, cmd("XTRIM x MAXLEN 0"), 2000) == 2
    assert sim.execute(1, cmd("XTRIM x MINID 9999"), 2000) == 0
    sim.sync()
    assert ids(sim, 1) == ids(sim, 2) == ["1500-2"]


def test_a_deleted_key_reuses_ids_and_a_late_xdel_of_the_old_entry_spares_the_new_one() -> None:
    sim = SimulatedRegions(2, IdMode.STRICT)
    sim.execute(1, cmd("XADD x * f old"), 1000)
    sim.sync()
    assert sim.execute(2, cmd("XDEL x 1000-1"), 1000) == 1  # not yet seen by region 1
    sim.execute(1, cmd("DEL x"), 1000)
    assert sim.execute(1, cmd("XADD x * f new"), 1000) == b"1000-1"  # a fresh key, as in Redis
    sim.sync()
    for region in (1, 2):
        reply = sim.execute(region, cmd("XRANGE x - +"), None)
        assert reply == [[b"1000-1", [b"f", b"new"]]]


# --- single-region details that follow Redis 7.0 ---------------------------------------------


def one(mode: IdMode = IdMode.LIBERAL) -> Region:
    return Region(1, mode)


def reply(region: Region, line: str | list[bytes]) -> Reply:
    args = line if isinstance(line, list) else list(cmd(line))
    return run(region, args, 5000).reply


def test_xadd_reports_a_bad_id_before_the_checks_after_the_options() -> None:
    r = one()
    assert reply(r, "XADD x LIMIT 10 bad f v") == error(errors.INVALID_ID)
    assert reply(r, "XADD x LIMIT 10 1-1 f v") == error(errors.LIMIT_WITHOUT_STRATEGY)
    assert reply(r, "XADD x MAXLEN 1 LIMIT 10 1-1 f v") == error(errors.LIMIT_WITHOUT_APPROX)
    assert reply(r, "XADD x bad f v extra") == error(errors.INVALID_ID)
    assert reply(r, "XADD x 1-1 f v extra") == errors.wrong_arity("xadd")


def test_xadd_refuses_0_0_before_looking_at_the_key() -> None:
    r = one()
    for line in ("XADD x NOMKSTREAM 0 f v", "XADD x NOMKSTREAM 0-0 f v", "XADD x 0 f v"):
        assert reply(r, line) == error(errors.XADD_ID_ZERO)
    assert reply(r, "XADD x 0-* f v") == b"0-1"
    # strict modes read a millisecond-only 0 as 0-<region>
    assert reply(one(IdMode.STRICT), "XADD x 0 f v") == b"0-1"


def test_xadd_nomkstream_on_a_missing_key_answers_nil_and_logs_nothing() -> None:
    r = one()
    done = run(r, list(cmd("XADD x NOMKSTREAM 1-1 f v")), 5000)
    assert done.reply is None and done.replicated == []
    assert reply(r, "EXISTS x") == 0


def test_xadd_with_trimming_logs_the_entry_then_the_trim() -> None:
    r = one()
    reply(r, "XADD x 1-1 f v")
    done = run(r, list(cmd("XADD x MAXLEN 1 2-1 f v")), 5000)
    assert [type(o.body) for o in done.replicated] == [ops.XAdd, ops.XTrim]
    assert reply(r, "XRANGE x - +") == [[b"2-1", [b"f", b"v"]]]


def test_xadd_on_a_stream_at_the_last_possible_id_is_exhausted() -> None:
    r = one()
    last = b"18446744073709551615-18446744073709551615"
    assert reply(r, "XADD x 18446744073709551615-18446744073709551615 f v") == last
    for line in ("XADD x * f v", "XADD x 18446744073709551615-* f v"):
        assert reply(r, line) == error(errors.STREAM_EXHAUSTED)


def test_xdel_on_a_missing_key_answers_0_before_parsing_the_ids() -> None:
    r = one()
    assert reply(r, "XDEL x bad") == 0
    reply(r, "XADD x 1-1 f v")
    assert reply(r, "XDEL x 1-1 bad") == error(errors.INVALID_ID)
    assert reply(r, "XLEN x") == 1  # nothing deleted by the refused command


def test_xdel_counts_an_id_named_twice_once() -> None:
    r = one()
    reply(r, "XADD x 1-1 f v")
    assert reply(r, "XDEL x 1-1 1 1-1") == 1


def test_xsetid_follows_redis_7_0_and_never_moves_the_last_id_back() -> None:
    r = one()
    reply(r, "XADD x 1-1 f v")
    reply(r, "XADD x 2-1 f v")
    reply(r, "XDEL x 2-1")
    assert reply(r, "XSETID x 1-0") == error(errors.XSETID_TOO_SMALL)
    # Redis 7.0 would accept 1-5 here (it has no max-deleted-ID check); active-active refuses
    # to move the last ID back below 2-1.
    assert reply(r, "XSETID x 1-5") == error(errors.XSETID_BELOW_LAST)
    assert reply(r, "XSETID x 3 ENTRIESADDED 0") == error(errors.XSETID_ENTRIES_ADDED)
    assert reply(r, "XSETID x 3 MAXDELETEDID 4") == error(errors.XSETID_MAXDEL)
    assert reply(r, "XSETID x 3 ENTRIESADDED -1") == error(errors.ENTRIES_ADDED_NEGATIVE)
    assert reply(r, "XSETID nokey 3") == error(errors.NO_SUCH_KEY)
    assert reply(r, "XSETID x 5") == OK
    assert reply(r, "XADD x 5-0 f v") == error(errors.XADD_ID_TOO_SMALL)
    assert reply(r, "XADD x 5-1 f v") == b"5-1"


def test_xrange_count_0_is_a_null_array_on_an_existing_key_and_empty_on_a_missing_one() -> None:
    r = one()
    assert reply(r, "XRANGE x - + COUNT 0") == []
    reply(r, "XADD x 1-1 f v")
    assert reply(r, "XRANGE x - + COUNT 0") is NULL_ARRAY
    assert reply(r, "XREVRANGE x + - COUNT -5") is NULL_ARRAY


def test_xread_serves_only_keys_with_entries_above_the_given_id() -> None:
    r = one()
    reply(r, "XADD x 1-1 f v")
    reply(r, "XADD x 2-1 f v")
    reply(r, "XADD y 1-1 f v")
    got = reply(r, "XREAD COUNT 1 STREAMS x y nokey 1-1 1-1 0")
    assert encode(got, 2) == (
        b"*1\r\n*2\r\n$1\r\nx\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    )
    assert reply(r, "XREAD STREAMS x $") is NULL_ARRAY


def test_del_and_exists_count_each_key_as_redis_does() -> None:
    r = one()
    reply(r, "XADD x 1-1 f v")
    assert reply(r, "EXISTS x x nokey") == 2
    assert reply(r, "DEL x x nokey") == 1
    assert reply(r, "TYPE x") == Status("none")


def test_a_stream_emptied_by_xdel_stops_existing_but_keeps_its_last_id() -> None:
    r = one()
    reply(r, "XADD x 5-1 f v")
    reply(r, "XDEL x 5-1")
    assert reply(r, "EXISTS x") == 0  # Redis would keep an empty stream (documented deviation)
    assert reply(r, "XADD x 5-1 f v") == error(errors.XADD_ID_TOO_SMALL)
    reply(r, "XDEL x 5-2")
    reply(r, "DEL x")
    assert reply(r, "XADD x 5-1 f v") == b"5-1"  # DEL forgets the last ID, as in Redis


def test_an_error_quoting_client_input_with_cr_lf_stays_one_resp_line() -> None:
    got = encode(reply(one(), [b"NOPE", b"a\r\nb"]), 2)
    assert got == b"-ERR unknown command 'NOPE', with args beginning with: 'a  b' \r\n"
