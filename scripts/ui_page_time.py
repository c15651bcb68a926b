"""How long the `streams ui` page of a key with 10,000 ops takes to open (docs/debugging.md).

Writes N ops on one key from three regions of an ephemeral `LocalTopology` (XADDs, and every
tenth round an XTRIM and an XDEL, the regions synced between rounds so the ops carry causal
contexts across regions), serves r1 with `streams ui` (a subprocess, as a user runs it), and
opens `/key/<key>` in Debian's chromium through Playwright: the time from the navigation to the
page's first 200 ops drawn, cold (the server replays the logs for that key) and warm (the
history kept). Prints the figures; asserts nothing (a timed assertion would fail on a busy
machine for no fault of the code).

    STREAMS_PURE=1 PYTHONPATH=.:tests python3 scripts/ui_page_time.py [--ops 10000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from ui.browser import chromium

from topology.local import LocalTopology


def write(topo: LocalTopology, total: int, key: str = "big") -> int:
    clients = [topo.client(i) for i in (1, 2, 3)]
    written = 0
    round_ = 0
    while written < total:
        for region, client in enumerate(clients, start=1):
            pipe = client.pipeline(transaction=False)
            n = min(100, total - written)
            for i in range(n):
                pipe.xadd(key, {"r": str(region), "i": str(i)})
            if round_ % 10 == 9 and n > 2:
                pipe.xtrim(key, maxlen=5000, approximate=False)
                pipe.xdel(key, "0-1")
            pipe.execute()
            written += n + (2 if round_ % 10 == 9 and n > 2 else 0)
            if written >= total:
                break
        topo.sync()
        round_ += 1
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--screenshot", help="save the page (PNG) here")
    args = parser.parse_args()
    with LocalTopology(regions=3, manual_sync=True, id_mode="strict") as topo:
        started = time.monotonic()
        ops = write(topo, args.ops)
        print(f"wrote {ops} ops on key big in {time.monotonic() - started:.1f}s", flush=True)
        command = [sys.executable, "-m", "streams.cli", "ui", "--topology"]
        command += [str(topo.topology_path), "--region", "r1", "--port", "0"]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
        try:
            assert proc.stdout is not None
            url = "http://" + proc.stdout.readline().split("http://", 1)[1].split("/", 1)[0]
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1500, "height": 900})
                for which in ("cold", "warm", "warm"):
                    began = time.monotonic()
                    page.goto(f"{url}/key/big")
                    page.wait_for_selector("[data-op] >> nth=199", state="attached")
                    took = time.monotonic() - began
                    total = page.text_content(".pager span")
                    print(f"{which}: page of key big drawn in {took:.2f}s ({total})", flush=True)
                if args.screenshot:
                    page.screenshot(path=args.screenshot)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
