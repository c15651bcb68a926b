"""`streams up`, the README's main command: starts an embedded topology, prints where each region
listens and that the embedded brokers keep nothing on disk, serves, and stops on Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_streams_up_serves_says_the_brokers_keep_nothing_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.cli", "up", "--regions", "2", "--state-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("replicating continuously"):
                break
        text = "".join(lines)
        assert "replicating continuously" in text, text
        assert "nothing on disk" in text and "--topology" in text, text
        ports = [int(p) for p in re.findall(r"^r\d+\s+\d+\s+[\d.]+:(\d+)", text, re.M)]
        assert len(ports) == 2, text
        r1, r2 = (redis.Redis(port=p, socket_timeout=10) for p in ports)
        entry = r1.xadd(b"up", {b"f": b"v"})
        deadline = time.monotonic() + 30
        while r2.xlen(b"up") != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r2.xrange(b"up") == [(entry, {b"f": b"v"})]
        r1.close()
        r2.close()
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, text + rest
        assert "stopping" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
