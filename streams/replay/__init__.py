"""Replay-from-offset debugging: rebuild any region's state as of any position of the op logs.

- `fold`: the pure fold (records in, a region's state out, gated exactly like the live node).
- `positions`: `--at`, `--offsets`, `--time` parsing and the cut they stand for.
- `reader`: reads op-log topics from Kafka at explicit offsets and feeds a fold.
- `describe`: the state as text and JSON lines (versioned record schema).
- `diff`: compare two replays; bisect to the first diverging op.
- `history`: every op on one key in apply order, with what it changed.
- `serve`: a replayed state served read-only over RESP (`replay --serve`), movable by REPLAY.SEEK.
- `cli`: the `streams log / replay / snapshot / diff / history` verbs.
"""
