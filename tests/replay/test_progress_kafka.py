"""Progress of the long verbs on real brokers: `diff`, `replay`, `snapshot` and `history` report
counts and rate on stderr with `--progress`, and nothing when stderr is not a terminal (pytest
captures it) or with `--quiet`; stdout is the same either way.

The reporting interval is set to 0 so a small history shows lines (the unit tests,
tests/unit/test_progress.py, check the once-a-second pacing with a fake clock)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams import progress
from streams.cli import main
from topology.local import LocalTopology

LINE = re.compile(r"^(diff|replay): .*\d[\d,]* records( folded)?, [\d,]+ records( folded)?/s", re.M)


def test_long_verbs_report_progress_on_stderr_only_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
    with LocalTopology(regions=2, manual_sync=True) as topo:
        c1 = topo.client(1)
        for i in range(20):
            c1.xadd("s", {"n": str(i)})
        topo.client(2).xadd("t", {"n": "x"})
        topo.sync()
        b1, b2 = topo.bootstrap[1], topo.bootstrap[2]
        verbs = {
            "diff": ["diff", "--bootstrap", b1, "--bootstrap", b2],
            "replay": ["replay", "--bootstrap", b1, "--digest"],
            "snapshot": ["snapshot", "--bootstrap", b1, "--out", str(tmp_path / "r1.snap")],
            "history": ["history", "--bootstrap", b1, "s"],
        }
        for verb, argv in verbs.items():
            assert main([*argv, "--progress"]) == 0, verb
            shown = capsys.readouterr()
            assert LINE.search(shown.err), (verb, shown.err)
            assert main(argv) == 0, verb
            default = capsys.readouterr()
            assert not LINE.search(default.err), (verb, default.err)
            assert main([*argv, "--quiet"]) == 0, verb
            quiet = capsys.readouterr()
            assert not LINE.search(quiet.err), (verb, quiet.err)
            if verb != "history":  # history's header carries its run time
                assert shown.out == default.out == quiet.out, verb
