"""The `streams` command."""

from __future__ import annotations

import argparse
import sys

from streams.ids import IdMode
from streams.scenarios import Scenario, SyncStep, load_all
from streams.scenarios.runner import run
from streams.scenarios.sim import SimulatedRegions


def _demo(args: argparse.Namespace) -> int:
    """Run every seed scenario table and print actual results next to the expected ones."""
    if not args.sim:
        print(
            "streams demo: the embedded-broker topology is not built yet (issue 3); "
            "run `streams demo --sim` for the seed tables on simulated regions.",
            file=sys.stderr,
        )
        return 2
    failed = 0
    scenarios = [s for s in load_all() if not args.only or args.only in s.slug]
    for scenario in scenarios:
        failed += _print_scenario(scenario)
    total = len(scenarios)
    print(f"\n{total - failed} of {total} seed tables hold ({failed} failed)")
    return 1 if failed else 0


def _print_scenario(scenario: Scenario) -> int:
    sim = SimulatedRegions(scenario.regions, IdMode.parse(scenario.id_mode))
    outcomes = run(scenario, sim)
    bad = [o for o in outcomes if not o.ok]
    print(f"\n== {scenario.slug}: {scenario.name}  [{scenario.id_mode}, "
          f"{scenario.regions} regions] {'OK' if not bad else 'FAILED'}")
    print(f"   {scenario.source}")
    for o in outcomes:
        step = o.step
        if isinstance(step, SyncStep):
            who = "all" if step.regions is None else ",".join(f"r{r}" for r in step.regions)
            print(f"   {step.t:<4} -- sync ({who}) --")
            continue
        cmd = " ".join(a.decode("utf-8", "replace") for a in step.args)
        if step.field:
            cmd += f"  [{step.field}]"
        line = f"   {step.t:<4} r{step.region}  {cmd}"
        if o.expected:
            mark = "ok" if o.ok else "MISMATCH"
            line = f"{line:<60} -> {o.actual}  (seed: {o.expected}) {mark}"
        elif not o.ok:
            line = f"{line:<60} -> {o.actual}  FAILED"
        print(line)
    return 1 if bad else 0


def _not_built(what: str) -> int:
    print(f"streams {what}: not built yet (the Kafka runtime is issue 3).", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="streams", description="Active-active Redis Streams, event-sourced on Kafka."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run every seed scenario table and show the results")
    demo.add_argument(
        "--sim", action="store_true",
        help="run on simulated in-process regions (pure core, no brokers)",
    )
    demo.add_argument("--only", default="", help="run only scenarios whose name contains this")
    for name in ("up", "status", "log", "replay", "diff", "snapshot", "spark"):
        sub.add_parser(name, help="not built yet (later issues)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return _not_built(args.command)


if __name__ == "__main__":
    sys.exit(main())
