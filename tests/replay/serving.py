"""`streams replay --serve` as the operator runs it: the real CLI in a subprocess, and a redis-py
client once it answers; stopped (SIGTERM, then SIGKILL) whatever the test did."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from topology.ports import free_port


@contextmanager
def serving(replay_args: list[str], workdir: Path) -> Iterator[redis.Redis]:
    """`streams replay <replay_args> --serve PORT` run in `workdir` (its output in serve.log)."""
    port = free_port()
    cmd = [
        *(sys.executable, "-c", "import sys; from streams.cli import main; sys.exit(main())"),
        *("replay", *replay_args, "--serve", str(port)),
    ]
    log = open(workdir / "serve.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    client = redis.Redis(port=port, socket_timeout=60)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"the server did not come up: {(workdir / 'serve.log').read_text()}"
                    ) from None
                time.sleep(0.1)
        yield client
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
