"""The whole `streams` command as a user meets it with a wrong address (issue 26, items 2 and 4).

Every verb that reads Kafka or a node, given 127.0.0.1:<closed port>, must fail within 5 s with
one line on stderr that names the address and what happened, exit 4 (`streams.exits`), and do
the same when its stdout is a pipe closed early (`| head -1`): no traceback, no librdkafka lines
(`%3|...|FAIL|...`, about 190 of them before). A RESP port given as the bootstrap is named as
such. Ctrl-C ends a verb at once with 130, also while librdkafka waits for a broker that accepts
connections and never answers. Usage errors exit 64 (not 2, the corrupt-record status), every
`--help` ends with the exit-status table, every Spark job has a description and help on every
option. No broker is started: the cluster-side half is tests/replay/test_cli_pipes_kafka.py.
"""

from __future__ import annotations

import argparse
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from differential.redis_server import RedisServer

from replay.cli_runs import Ran, interrupted, run
from streams import exits
from streams.pipeline import verbs as sparkcli
from streams.replay import kafka_connect
from topology.ports import free_port


@pytest.fixture(scope="module")
def closed() -> int:
    """A loopback port nothing listens on."""
    return free_port()


@pytest.fixture(scope="module")
def topology_file(tmp_path_factory: pytest.TempPathFactory, closed: int) -> Path:
    """A topology file whose region's Kafka and node are both on closed ports (a `streams up`
    that has stopped)."""
    path = tmp_path_factory.mktemp("topo") / "topology.toml"
    node_port = free_port()
    path.write_text(
        f'[[region]]\nname = "r1"\nid = 1\nbootstrap = "127.0.0.1:{closed}"\n'
        f"resp_port = {node_port}\n"
    )
    return path


def _verbs(bootstrap: str, topology: Path, tmp: Path) -> list[list[str]]:
    """Every verb that talks to Kafka or a node, as the docs show it, aimed at `bootstrap`."""
    host, port = bootstrap.rsplit(":", 1)
    return [
        ["log", "--bootstrap", bootstrap, "--topic", "r1.oplog"],
        ["log", "--topology", str(topology), "--region", "r1", "--topic", "r1.oplog"],
        ["replay", "--bootstrap", bootstrap],
        ["replay", "--bootstrap", bootstrap, "--serve", "0"],
        ["history", "--bootstrap", bootstrap, "orders"],
        ["snapshot", "--bootstrap", bootstrap, "--out", str(tmp / "r1.snap")],
        ["diff", "--bootstrap", bootstrap, "--bootstrap", bootstrap],
        ["status", "--topology", str(topology)],
        ["group", "--endpoint", f"redis://{host}:{port}", "orders", "billing"],
        ["spark", "audit", "--bootstrap", bootstrap, "--bootstrap", bootstrap],
        ["spark", "export", "--bootstrap", bootstrap, "--out", str(tmp / "out")],
        [
            *("spark", "follow", "--bootstrap", bootstrap, "--out", str(tmp / "out")),
            *("--checkpoint", str(tmp / "cp")),
        ],
        ["spark", "snapshot", "--bootstrap", bootstrap, "--region", "r1", "--out", str(tmp / "s")],
    ]


def _one_clear_line(ran: Ran, address: str) -> None:
    assert ran.code == exits.UNREACHABLE, ran
    assert ran.seconds < 5, ran
    assert "Traceback" not in ran.err and "%3|" not in ran.err, ran
    assert len(ran.err_lines) == 1, ran
    line = ran.err_lines[0]
    verb = " ".join(ran.argv[:2] if ran.argv[0] == "spark" else ran.argv[:1])
    assert line.startswith(f"streams {verb}: "), ran
    assert address in line, ran
    if ran.argv[0] != "group":  # redis-py says "Error 111 connecting to ...": clear enough
        assert "(connection refused)" in line, ran


@pytest.mark.parametrize("closed_stdout", [False, True], ids=["stdout", "stdout-closed"])
def test_every_verb_with_a_wrong_bootstrap_fails_at_once_in_one_line(
    closed: int, topology_file: Path, tmp_path: Path, closed_stdout: bool
) -> None:
    address = f"127.0.0.1:{closed}"
    for argv in _verbs(address, topology_file, tmp_path):
        ran = run(argv, tmp_path, closed_stdout=closed_stdout)  # one at a time: each is timed
        if ran.argv[0] == "status":  # its nodes are what it reads: the node's port is named
            assert ran.code == exits.UNREACHABLE and len(ran.err_lines) == 1, ran
            assert ran.seconds < 5 and "Traceback" not in ran.err, ran
            assert "no node of" in ran.err and "is `streams up` running?" in ran.err, ran
            continue
        _one_clear_line(ran, address)


def test_the_hint_names_the_topology_files_kafka_bootstraps(
    closed: int, topology_file: Path, tmp_path: Path
) -> None:
    ran = run(["log", "--bootstrap", "127.0.0.1:1", "--topic", "t"], tmp_path)
    assert "`streams up` prints each region's Kafka bootstrap" in ran.err, ran
    (tmp_path / ".streams").mkdir()
    (tmp_path / ".streams/topology.toml").write_text(topology_file.read_text())
    ran = run(["replay", "--bootstrap", "127.0.0.1:1"], tmp_path)
    assert f"lists the Kafka bootstraps r1 127.0.0.1:{closed}" in ran.err, ran


def test_a_resp_port_given_as_the_bootstrap_is_named(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{redis_server.port}"
    ran = run(["replay", "--bootstrap", address], tmp_path)
    assert ran.code == exits.UNREACHABLE and ran.seconds < 5, ran
    assert len(ran.err_lines) == 1 and "Traceback" not in ran.err, ran
    assert f"{address} (it speaks the Redis protocol); is this a node's RESP port?" in ran.err


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A port that accepts connections and never answers (a hung process)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.settimeout(30)
        yield sock


@pytest.mark.parametrize("connections", [1, 3], ids=["probing", "in-librdkafka"])
def test_ctrl_c_ends_a_verb_at_once(
    silent: socket.socket, tmp_path: Path, connections: int
) -> None:
    """Before: SIGINT waited for librdkafka's metadata call (10 s). The probe makes two
    connections to the silent port (a Kafka request, then a PING) and lets librdkafka try (the
    third); Ctrl-C in either phase ends the verb at once."""
    accepted: list[socket.socket] = []

    def ready() -> None:
        while len(accepted) < connections:
            accepted.append(silent.accept()[0])
        time.sleep(0.3)  # well inside the call that waits for an answer

    port = silent.getsockname()[1]
    try:
        ran, took = interrupted(["replay", "--bootstrap", f"127.0.0.1:{port}"], tmp_path, ready)
    finally:
        for conn in accepted:
            conn.close()
    assert ran.code == exits.INTERRUPTED, ran
    assert took < 1.5, ran
    assert ran.err == "", ran  # no traceback, and librdkafka's log stays quiet


def test_librdkafka_logs_to_python_logging_not_to_stderr(
    closed: int, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG, logger="streams.kafka")
    config = {"bootstrap.servers": f"127.0.0.1:{closed}", "group.id": "t", "log_level": 3}
    consumer = Consumer(kafka_connect.client_config(config))
    try:
        consumer.assign([TopicPartition("t", 0, 0)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not caplog.records:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert any("Connection refused" in r.getMessage() for r in caplog.records), caplog.text
    # librdkafka's own stderr lines ("%3|...") naming this client's address: none. (A client
    # another test of this process left behind may still print its own, about its own port.)
    mine = [
        line
        for line in capfd.readouterr().err.splitlines()
        if line.startswith("%") and f"127.0.0.1:{closed}" in line
    ]
    assert mine == []


def test_verbose_raises_librdkafkas_log_level() -> None:
    try:
        kafka_connect.configure(verbose=2)
        config = kafka_connect.client_config({"bootstrap.servers": "x:1"})
        assert config["log_level"] == 7 and "broker" in str(config["debug"])
        assert any(
            isinstance(h, logging.StreamHandler) and not isinstance(h, logging.NullHandler)
            for h in kafka_connect.LOG.handlers
        )
    finally:
        kafka_connect.configure(verbose=0)
        for handler in list(kafka_connect.LOG.handlers):
            if getattr(handler, "_streams_cli", False):
                kafka_connect.LOG.removeHandler(handler)
    assert "log_level" not in kafka_connect.client_config({"bootstrap.servers": "x:1"})


def test_usage_errors_exit_64_not_the_corrupt_record_status(tmp_path: Path) -> None:
    for argv in (["replay", "--no-such-option"], ["log"], ["diff"], ["spark", "export"]):
        ran = run(argv, tmp_path)
        assert ran.code == exits.USAGE != exits.CORRUPT, ran
        assert "Traceback" not in ran.err, ran


def _verb_helps() -> list[list[str]]:
    verbs = ["log", "replay", "snapshot", "diff", "history", "status", "group", "up", "demo"]
    verbs.append("import")
    jobs = ["audit", "export", "follow", "snapshot"]
    return [[v, "--help"] for v in verbs] + [["spark", j, "--help"] for j in jobs]


@pytest.mark.parametrize("argv", _verb_helps(), ids=lambda argv: " ".join(argv[:-1]))
def test_every_help_lists_the_exit_statuses(argv: list[str], tmp_path: Path) -> None:
    ran = run(argv, tmp_path)
    assert ran.code == 0, ran
    table = ran.out.split("exit status:", 1)[-1]
    assert "exit status:" in ran.out, ran
    for code in (exits.OK, exits.USAGE, exits.INTERRUPTED, exits.PIPE_CLOSED):
        assert f"{code:>5}  {exits.MEANING[code][:20]}" in table, ran


def test_every_spark_job_has_a_description_and_help_on_every_option() -> None:
    parser = exits.ArgumentParser(prog="streams")
    sparkcli.add_parser(parser.add_subparsers(dest="command"))
    spark = _subparsers(parser)["spark"]
    jobs = _subparsers(spark)
    assert set(jobs) == {"audit", "export", "follow", "snapshot"}
    for name, job in jobs.items():
        assert job.description, name
        for action in job._actions:
            assert action.help, f"spark {name} {action.option_strings or action.dest}"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")
