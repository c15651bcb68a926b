"""`streams.progress`: a line about once a second with counts and rate, only when wanted (a
terminal, or --progress; never with --quiet), and the Spark session's progress and loopback
settings. The verbs' own progress on real brokers is tests/replay/test_progress_kafka.py."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from streams import progress
from streams.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    progress.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_line_about_once_a_second_with_count_and_rate() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("replay", out=out, clock=clock)
    for _ in range(500):  # within the first second: nothing
        clock.now += 0.001
        p.tick()
    assert out.getvalue() == ""
    for _ in range(1000):
        clock.now += 0.001
        p.tick()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("replay: 1,000 records, 1,000 records/s"), lines
    p.finish()
    assert out.getvalue().splitlines()[-1].startswith("replay: 1,500 records"), out.getvalue()


def test_a_short_run_prints_nothing_and_disabled_prints_never() -> None:
    out, clock = io.StringIO(), Clock()
    with Progress("diff", out=out, clock=clock) as p:
        p.tick(10)
    assert out.getvalue() == ""
    off = Progress("diff", enabled=False, out=out, clock=clock)
    clock.now += 10
    off.tick(5)
    off.finish()
    assert out.getvalue() == "" and off.done == 5


def test_stages_have_their_own_label_count_and_total() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("diff", out=out, clock=clock)
    p.stage("reading r1", unit="records")
    p.tick(100)
    p.stage("comparing", unit="records folded", total=400)
    clock.now += 2
    p.tick(200)
    assert out.getvalue() == (
        "diff: comparing: 200 of ~400 records folded, 100 records folded/s, ETA 2s, 2s\n"
    )


def test_on_a_terminal_the_line_is_rewritten_in_place() -> None:
    out, clock = Terminal(), Clock()
    p = Progress("snapshot", out=out, clock=clock)
    for _ in range(3):
        clock.now += 1.5
        p.tick()
    p.finish()
    text = out.getvalue()
    assert text.count("\r") == 4 and text.count("\n") == 1 and text.endswith("\n")


def test_wanted_by_terminal_unless_told() -> None:
    pipe, tty = io.StringIO(), Terminal()
    assert progress.wanted(_parse(), pipe) is False
    assert progress.wanted(_parse(), tty) is True
    assert progress.wanted(_parse("--progress"), pipe) is True
    assert progress.wanted(_parse("--quiet"), tty) is False
    with pytest.raises(SystemExit):
        _parse("--quiet", "--progress")


def test_a_closed_stderr_stops_the_reports_quietly() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("replay", out=out, clock=clock)
    out.close()
    clock.now += 2
    p.tick()
    p.finish()
    assert p.enabled is False


def test_spark_binds_to_loopback_unless_configured_otherwise() -> None:
    from streams.pipeline.session import LOOPBACK_CONF, loopback_conf, parse_conf

    assert loopback_conf("local[2]", {}, {}) == LOOPBACK_CONF
    assert loopback_conf("local[*]", {}, {"SPARK_LOCAL_IP": "10.0.0.5"}) == {}
    assert loopback_conf("local[*]", {"spark.driver.host": "h"}, {}) == {}
    submit = {"PYSPARK_SUBMIT_ARGS": "--conf spark.driver.bindAddress=0.0.0.0 pyspark-shell"}
    assert loopback_conf("local[*]", {}, submit) == {}
    assert loopback_conf("spark://master:7077", {}, {}) == {}
    assert parse_conf(["spark.driver.host=10.1.2.3", "a=b=c"]) == {
        "spark.driver.host": "10.1.2.3",
        "a": "b=c",
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_conf(["spark.driver.host"])


def test_every_long_verb_takes_progress_and_quiet() -> None:
    """replay, snapshot, history, diff and the Spark jobs: `--progress` / `--quiet` parse."""
    from streams.cli import main

    for argv in (
        ["replay", "--help"],
        ["snapshot", "--help"],
        ["history", "--help"],
        ["diff", "--help"],
        ["spark", "export", "--help"],
    ):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main(argv)
        assert "--progress" in out.getvalue() and "--quiet" in out.getvalue(), argv
