"""What the request parser hands over besides plain argument lists.

Kept out of the compiled parser (`scripts/build_native.py` compiles `streams.resp.parser`) so the
class stays an ordinary Python subclass of `list`: the server and the dispatcher treat a
`Dropped` request as the argument list it is, and only the dispatcher looks at its type.
"""

from __future__ import annotations


class Dropped(list[bytes]):
    """A request one of whose arguments was longer than the server keeps (`Limits.max_arg`):
    the parser read that argument's bytes and threw them away as they came (an empty argument
    stands in its place), so a 70 MB value that the op log could never carry costs neither
    memory nor one long join; the dispatcher refuses the request to its own client.

    `longest` is the length of the longest argument dropped, `kept` the limit it was over."""

    __slots__ = ("longest", "kept")

    def __init__(self, args: list[bytes], longest: int, kept: int) -> None:
        super().__init__(args)
        self.longest = longest
        self.kept = kept
