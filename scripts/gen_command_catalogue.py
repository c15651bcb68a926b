"""Write `streams/commands/redis7_commands.json`: redis-server's own command metadata.

    python scripts/gen_command_catalogue.py            # starts a throw-away redis-server
    python scripts/gen_command_catalogue.py --port P   # asks a running one
    python scripts/gen_command_catalogue.py --check    # exit 1 when the file is stale

Asks `COMMAND INFO` (name, arity, flags, key positions, ACL categories, tips, subcommands) and
`COMMAND DOCS` (summary, since, group, complexity) and writes one JSON object per command and
subcommand (`container|sub`), sorted by name. Key specifications and argument docs are left
out: nothing here serves them. The server must be the version the database matches
(`streams.REDIS_COMPAT_VERSION`); `tests/unit/test_command_catalogue.py` checks the file against
a live redis-server too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hiredis

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "streams" / "commands" / "redis7_commands.json"
sys.path.insert(0, str(REPO))

from streams import REDIS_COMPAT_VERSION  # noqa: E402

_MORE = object()


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)

    def call(self, *args: str) -> Any:
        parts = [a.encode() for a in args]
        self.sock.sendall(
            b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        )
        reader = hiredis.Reader(notEnoughData=_MORE)
        while True:
            reply = reader.gets()
            if reply is not _MORE:
                return reply
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("redis-server closed the connection")
            reader.feed(chunk)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(flat: list[Any]) -> dict[str, Any]:
    return {_text(k): v for k, v in zip(flat[::2], flat[1::2], strict=True)}


def catalogue(conn: Conn) -> dict[str, dict[str, Any]]:
    """name -> metadata, for every command and subcommand the server knows."""
    out: dict[str, dict[str, Any]] = {}

    def add_info(entry: list[Any]) -> None:
        name, arity, flags, first, last, step, acl, tips, _specs, subs = entry
        out[_text(name)] = {
            "arity": arity,
            "flags": [_text(f) for f in flags],
            "keys": [first, last, step],
            "acl": [_text(a) for a in acl],
            "tips": [_text(t) for t in tips],
            "subcommands": sorted(_text(s[0]) for s in subs),
        }
        for sub in subs:
            add_info(sub)

    def add_docs(name: str, docs: dict[str, Any]) -> None:
        meta = out[name]
        meta["group"] = _text(docs["group"])
        meta["since"] = _text(docs["since"])
        meta["summary"] = _text(docs["summary"])
        meta["complexity"] = _text(docs.get("complexity", b""))
        for sub_name, sub_docs in _pairs(docs.get("subcommands", [])).items():
            add_docs(sub_name, _pairs(sub_docs))

    for entry in conn.call("COMMAND", "INFO"):
        add_info(entry)
    for name, docs in _pairs(conn.call("COMMAND", "DOCS")).items():
        add_docs(name, _pairs(docs))
    return dict(sorted(out.items()))


def render(commands: dict[str, dict[str, Any]], version: str) -> str:
    header = {"redis_version": version, "generated_by": "scripts/gen_command_catalogue.py"}
    lines = [json.dumps(header)]
    lines += [json.dumps({"name": n, **meta}, sort_keys=True) for n, meta in commands.items()]
    return "\n".join(lines) + "\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_server() -> tuple[subprocess.Popen[bytes], int, tempfile.TemporaryDirectory[str]]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not on PATH (scripts/setup.sh installs it)")
    folder = tempfile.TemporaryDirectory(prefix="redis-catalogue-")
    port = _free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            folder.name,
            "--logfile",
            os.path.join(folder.name, "redis.log"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if Conn(port).call("PING") == b"PONG":
                return proc, port, folder
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not answer PING within 10 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, help="a running redis-server (else one is started)")
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    proc = folder = None
    port = args.port
    if port is None:
        proc, port, folder = _start_server()
    try:
        conn = Conn(port)
        info = _text(conn.call("INFO", "server"))
        version = next(
            line.split(":", 1)[1].strip()
            for line in info.splitlines()
            if line.startswith("redis_version:")
        )
        if version != REDIS_COMPAT_VERSION:
            print(f"redis-server is {version}, not {REDIS_COMPAT_VERSION}", file=sys.stderr)
            return 1
        text = render(catalogue(conn), version)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        if folder is not None:
            folder.cleanup()
    if args.check:
        stale = not OUT.exists() or OUT.read_text() != text
        print(f"{OUT.relative_to(REPO)} is {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(REPO)} ({text.count(chr(10)) - 1} commands)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
