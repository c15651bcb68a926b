"""Every reply of the request corpus (scripts/request_corpus.py: RESP2 and RESP3, MULTI, every
COMMAND / INFO / CONFIG / CLIENT form, stream commands good and bad, CRDT admin commands,
unauthenticated requests) is byte for byte the recorded one, so a restructuring of the node's
request pipeline cannot change a reply unnoticed. A deliberate change is recorded anew (see the
script's docstring) and shows in review as a diff of the recording."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_node_answers_the_corpus_as_recorded() -> None:
    spec = importlib.util.spec_from_file_location(
        "request_corpus", ROOT / "scripts/request_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    sys.modules["request_corpus"] = corpus
    spec.loader.exec_module(corpus)
    recorded = (Path(__file__).parent / "data/request_corpus.txt").read_text().splitlines()
    answered = asyncio.run(corpus.record())
    assert len(answered) == len(recorded)
    for now, then in zip(answered, recorded, strict=True):
        assert now == then
