"""redis-cli, unchanged, runs every seed table against real region nodes.

Each scenario of `streams/scenarios/*.toml` is replayed on its own `LocalTopology` (the seed's
number of regions and ID mode): the `cmd` of every step runs verbatim as
`redis-cli -p <port of the step's region> CMD ARGS...` (one process per command, as a user types
it), the sync rows go through the topology between them, and a step with `clock_ms` first pins the
region's clock with `redis-cli CRDT.CLOCK`.

What redis-cli prints (its human format, `--no-raw`) is parsed back into a reply value and judged
by the same runner and projection as the other seed tests: every expectation of the seed (the IDs
XADD / XRANGE / XREAD print, the group names XINFO GROUPS prints, the integers, the one expected
error) is checked against redis-cli's output, and a step that prints `(error) ...` where the seed
expects none fails. redis-cli must also exit 0 and print nothing on stderr.

A few scenarios run once more with `redis-cli -3` (HELLO 3, RESP3 maps printed as `1# k => v`).

redis-cli comes from the Debian package redis-tools: without it the module is skipped, except
under CI (the `CI` environment variable set), where a missing redis-cli fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

import pytest

from streams.errors import CommandError
from streams.scenarios import Scenario, load_all
from streams.scenarios.runner import failures, run
from topology.local import LocalTopology

REDIS_CLI = shutil.which("redis-cli")
TIMEOUT_S = 15

if REDIS_CLI is None:
    _reason = "redis-cli is not on PATH (install the Debian package redis-tools)"
    if os.environ.get("CI"):
        pytest.fail(f"{_reason}; CI is set, so this test must run", pytrace=False)
    pytest.skip(_reason, allow_module_level=True)

SCENARIOS = load_all()
RESP3_SLUGS = ("000_08_group_replication", "004_12_consecutive_xack", "004_xread_console")


# --- redis-cli's human output, parsed back ------------------------------------------------------


class CliOutputError(ValueError):
    pass


_MARKER = re.compile(r"( *)(\d+)([)#~]) ")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", '"': '"', "\\": "\\"}


@dataclass
class _Parser:
    """A reader of redis-cli's TTY format (cliFormatReplyTTY): nested arrays are numbered
    `1) `, `2) ` (right-aligned to the widest index), maps `1# key => value`, continuation lines
    indented to the column where the parent's value started."""

    lines: list[str]

    def value(self, row: int, col: int) -> tuple[object, int]:
        """Parse the value starting at `col` of line `row`; return it and the next line."""
        text = self.lines[row][col:]
        marker = _MARKER.match(text)
        if marker is None:
            value, rest = self.scalar(text)
            if rest:
                raise CliOutputError(f"trailing text {rest!r} on line {row + 1}")
            return value, row + 1
        return self.aggregate(row, col)

    def aggregate(self, row: int, col: int) -> tuple[object, int]:
        first = _MARKER.match(self.lines[row][col:])
        assert first is not None
        width = len(first.group(1)) + len(first.group(2))
        is_map = first.group(3) == "#"
        items: list[object] = []
        pairs: dict[object, object] = {}
        index = 1
        while True:
            line = self.lines[row]
            found = _MARKER.match(line[col:])
            if (
                found is None
                or len(found.group(1)) + len(found.group(2)) != width
                or int(found.group(2)) != index
                or (index > 1 and line[:col].strip())
            ):
                raise CliOutputError(f"expected element {index} at line {row + 1}: {line!r}")
            inner = col + width + 2
            if is_map:
                key, rest = self.scalar(line[inner:])
                if not rest.startswith(" =>"):
                    raise CliOutputError(f"map entry without '=>' at line {row + 1}: {line!r}")
                rest = rest[3:].lstrip(" ")
                if rest:
                    value, tail = self.scalar(rest)
                    if tail:
                        raise CliOutputError(f"trailing text {tail!r} on line {row + 1}")
                    row += 1
                else:
                    value, row = self.value(row + 1, inner)
                pairs[_hashable(key)] = value
            else:
                value, row = self.value(row, inner)
                items.append(value)
            index += 1
            if row >= len(self.lines):
                break
            nxt = _MARKER.match(self.lines[row][col:])
            if nxt is None or int(nxt.group(2)) != index or self.lines[row][:col].strip():
                break
        return (pairs if is_map else items), row

    @staticmethod
    def scalar(text: str) -> tuple[object, str]:
        """One scalar at the start of `text`: the value and what follows it on the line."""
        if text.startswith('"'):
            return _unquote(text)
        if text.startswith("(integer) "):
            number = re.match(r"\(integer\) (-?\d+)", text)
            if number is None:
                raise CliOutputError(f"bad integer {text!r}")
            return int(number.group(1)), text[number.end() :]
        for word, value in (("(nil)", None), ("(empty array)", []), ("(empty hash)", {})):
            if text.startswith(word):
                return value, text[len(word) :]
        if text.startswith("(error) "):
            return CommandError(text[len("(error) ") :]), ""
        cut = text.find(" => ")
        if cut >= 0:
            return text[:cut].encode(), text[cut:]
        return text.encode(), ""  # a status reply, printed as is


def _unquote(text: str) -> tuple[bytes, str]:
    """sdscatrepr's quoting: \\n \\r \\t \\a \\b \\" \\\\ and \\xHH escapes."""
    out = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return bytes(out), text[i + 1 :]
        if ch == "\\":
            nxt = text[i + 1]
            if nxt == "x":
                out.append(int(text[i + 2 : i + 4], 16))
                i += 4
                continue
            out += _ESCAPES[nxt].encode()
            i += 2
            continue
        out += ch.encode()
        i += 1
    raise CliOutputError(f"unterminated string {text!r}")


def _hashable(key: object) -> object:
    return tuple(key) if isinstance(key, list) else key


def parse_cli_output(printed: str) -> object:
    lines = printed.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CliOutputError("redis-cli printed nothing")
    value, row = _Parser(lines).value(0, 0)
    if row != len(lines):
        raise CliOutputError(f"unparsed lines from {row + 1}: {lines[row:]!r}")
    return value


def test_the_output_parser_reads_redis_cli_formats() -> None:
    printed = (
        '1) 1) "x"\n'
        '   2)  1) 1) "1-1"\n'
        '          2) 1) "f"\n'
        '             2) "v\\"2\\n"\n'
        '       2) 1) "2-1"\n'
        "          2) (nil)\n"
    )
    assert parse_cli_output(printed) == [[b"x", [[b"1-1", [b"f", b'v"2\n']], [b"2-1", None]]]]
    resp3 = '1# "x" => \n   1) 1) "1-1"\n      2) 1) "f"\n         2) "v"\n2# "y" => (integer) 3\n'
    assert parse_cli_output(resp3) == {b"x": [[b"1-1", [b"f", b"v"]]], b"y": 3}
    assert parse_cli_output("(integer) 0\n") == 0
    assert parse_cli_output("OK\n") == b"OK"
    assert parse_cli_output("(empty array)\n") == []
    error = parse_cli_output("(error) ERR no such key\n")
    assert isinstance(error, CommandError) and error.text == "ERR no such key"


# --- the driver ----------------------------------------------------------------------------------


@dataclass
class CliDriver:
    """A scenario `Driver` that runs every command through the redis-cli binary."""

    topology: LocalTopology
    resp3: bool = False

    def cli(self, region: int, args: tuple[bytes, ...]) -> str:
        assert REDIS_CLI is not None
        argv = [REDIS_CLI, "-p", str(self.topology.ports[region]), "--no-raw"]
        if self.resp3:
            argv.append("-3")
        done = subprocess.run(
            argv + [a.decode() for a in args], capture_output=True, timeout=TIMEOUT_S
        )
        shown = " ".join(argv[1:]) + " " + b" ".join(args).decode()
        assert done.returncode == 0, f"{shown}: exit {done.returncode}: {done.stderr!r}"
        assert not done.stderr, f"{shown}: stderr {done.stderr!r}"
        return done.stdout.decode()

    def execute(self, region: int, args: tuple[bytes, ...], clock_ms: int | None) -> object:
        if clock_ms is not None:
            pinned = self.cli(region, (b"CRDT.CLOCK", str(clock_ms).encode()))
            assert pinned == "OK\n", f"cannot pin region {region}'s clock: {pinned!r}"
        return parse_cli_output(self.cli(region, args))

    def sync(self, regions: tuple[int, ...] | None) -> None:
        self.topology.sync(None if regions is None else list(regions))


def _replay(scenario: Scenario, resp3: bool) -> None:
    with LocalTopology(
        regions=scenario.regions, manual_sync=True, id_mode=scenario.id_mode, debug_clock=True
    ) as topo:
        bad = failures(run(scenario, CliDriver(topo, resp3)))
    assert not bad, "\n".join(
        f"{o.step.t} r{getattr(o.step, 'region', '?')} {getattr(o.step, 'cmd', '')}: "
        f"redis-cli printed {o.actual}, the seed shows {o.expected}"
        for o in bad
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.slug for s in SCENARIOS])
def test_redis_cli_runs_the_seed_table(scenario: Scenario) -> None:
    _replay(scenario, resp3=False)


@pytest.mark.parametrize(
    "scenario",
    [s for s in SCENARIOS if s.slug in RESP3_SLUGS],
    ids=[s.slug for s in SCENARIOS if s.slug in RESP3_SLUGS],
)
def test_redis_cli_resp3_runs_the_seed_table(scenario: Scenario) -> None:
    _replay(scenario, resp3=True)


def test_redis_cli_prints_xrange_as_redis_does() -> None:
    """The literal text for one seed command: the transcript of seed 004's XREAD console."""
    console = next(s for s in SCENARIOS if s.slug == "004_xread_console")
    with LocalTopology(regions=1, manual_sync=True, id_mode=console.id_mode) as topo:
        driver = CliDriver(topo)
        for line in ("XADD x 110 f v", "XADD x 120 f v"):
            driver.cli(1, tuple(line.encode().split()))
        printed = driver.cli(1, (b"XRANGE", b"x", b"-", b"+"))
        assert printed == (
            '1) 1) "110-0"\n   2) 1) "f"\n      2) "v"\n2) 1) "120-0"\n   2) 1) "f"\n      2) "v"\n'
        )
        assert driver.cli(1, (b"XREAD", b"COUNT", b"2", b"STREAMS", b"x", b"120")) == "(nil)\n"
        assert driver.cli(1, (b"XLEN", b"x")) == "(integer) 2\n"
        assert driver.cli(1, (b"XADD", b"x", b"100", b"f", b"v")) == (
            "(error) ERR The ID specified in XADD is equal or smaller than the target stream "
            "top item\n"
        )
