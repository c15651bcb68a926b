"""The shape of Redis's radix tree (rax.c) over a stream's node keys, for XINFO STREAM.

Redis keeps a stream's listpack nodes in a rax keyed by each node's master ID (128 bits, big
endian). XINFO STREAM shows the tree's element count (`radix-tree-keys`) and its internal node
count (`radix-tree-nodes`). The node count depends on the history of inserts and removals (a
removal re-compresses only the chain it touched), so the only way to show Redis's number is to
grow the same tree the same way: this is a port of the structural part of raxGenericInsert and
raxRemove (no values, no iterators), kept next to each origin log. A stream adds one key per
100 entries or so, so the cost is small.
"""

from __future__ import annotations

from bisect import bisect_left

from streams.ids import StreamID


class _Node:
    """A rax node: `data` holds the edge bytes (one per child) or, when `compr`, the bytes of a
    compressed chain leading to its only child."""

    __slots__ = ("key", "compr", "data", "children")

    def __init__(self, data: bytes = b"", compr: bool = False) -> None:
        self.key = False
        self.compr = compr
        self.data = data
        self.children: list[_Node] = []


Link = tuple[_Node, int] | None
"""Where a node hangs: (parent, child index), or None for the head."""


def rax_key(sid: StreamID) -> bytes:
    """The 16-byte big-endian key Redis files a node under."""
    return sid[0].to_bytes(8, "big") + sid[1].to_bytes(8, "big")


class Rax:
    """Counts elements and nodes exactly as Redis's rax would after the same operations."""

    __slots__ = ("head", "numele", "numnodes")

    def __init__(self) -> None:
        self.head = _Node()
        self.numele = 0
        self.numnodes = 1

    def _walk(self, s: bytes, stack: list[_Node] | None) -> tuple[int, _Node, Link, int]:
        """raxLowWalk: (chars matched, stop node, its link, split position in a compressed node)."""
        h = self.head
        link: Link = None
        i = j = 0
        n = len(s)
        while h.data and i < n:
            v = h.data
            if h.compr:
                j = 0
                while j < len(v) and i < n and v[j] == s[i]:
                    j += 1
                    i += 1
                if j != len(v):
                    break
                idx = 0
            else:
                idx = v.find(s[i])
                if idx < 0:
                    j = len(v)
                    break
                i += 1
            if stack is not None:
                stack.append(h)
            link = (h, idx)
            h = h.children[idx]
            j = 0
        return i, h, link, j

    def _relink(self, link: Link, node: _Node) -> None:
        if link is None:
            self.head = node
        else:
            link[0].children[link[1]] = node

    def insert(self, s: bytes) -> bool:
        """raxInsert of a new key (True) or of an existing one (False, nothing changes)."""
        i, h, link, j = self._walk(s, None)
        n = len(s)
        if i == n and (not h.compr or j == 0):
            if h.key:
                return False
            h.key = True
            self.numele += 1
            return True
        if h.compr and i != n:
            nxt = h.children[0]
            postfixlen = len(h.data) - j - 1
            split = _Node(h.data[j : j + 1])
            if j == 0:
                split.key = h.key
                self._relink(link, split)
            else:
                trimmed = _Node(h.data[:j], compr=j > 1)
                trimmed.key = h.key
                trimmed.children = [split]
                self._relink(link, trimmed)
                link = (trimmed, 0)
                self.numnodes += 1
            if postfixlen:
                postfix = _Node(h.data[j + 1 :], compr=postfixlen > 1)
                postfix.children = [nxt]
                self.numnodes += 1
            else:
                postfix = nxt
            split.children = [postfix]
            h = split
        elif h.compr:
            # ALGO 2: the key ends inside a compressed node (never with fixed-length keys).
            nxt = h.children[0]
            postfix = _Node(h.data[j:], compr=len(h.data) - j > 1)
            postfix.key = True
            postfix.children = [nxt]
            trimmed = _Node(h.data[:j], compr=j > 1)
            trimmed.key = h.key
            trimmed.children = [postfix]
            self._relink(link, trimmed)
            self.numnodes += 1
            self.numele += 1
            return True
        while i < n:
            child = _Node()
            if not h.data and n - i > 1:
                h.compr = True
                h.data = s[i:]
                h.children = [child]
                link = (h, 0)
                i = n
            else:
                pos = bisect_left(h.data, s[i])
                h.data = h.data[:pos] + s[i : i + 1] + h.data[pos:]
                h.children.insert(pos, child)
                link = (h, pos)
                i += 1
            self.numnodes += 1
            h = child
        h.key = True
        self.numele += 1
        return True

    def remove(self, s: bytes) -> bool:
        """raxRemove, with its upward cleanup and re-compression of the chain it touched."""
        stack: list[_Node] = []
        i, h, _link, j = self._walk(s, stack)
        if i != len(s) or (h.compr and j != 0) or not h.key:
            return False
        h.key = False
        self.numele -= 1
        trycompress = False
        if not h.data:
            child: _Node | None = None
            while h is not self.head:
                child = h
                self.numnodes -= 1
                h = stack.pop()
                if h.key or (not h.compr and len(h.data) != 1):
                    break
            if child is not None:
                _remove_child(h, child)
                if len(h.data) == 1 and not h.key:
                    trycompress = True
        elif len(h.data) == 1:
            trycompress = True
        if trycompress:
            parent: _Node | None
            while True:
                parent = stack.pop() if stack else None
                if parent is None or parent.key or (not parent.compr and len(parent.data) != 1):
                    break
                h = parent
            start = h
            nodes = 1
            while h.data:
                h = h.children[-1]
                if h.key or (not h.compr and len(h.data) != 1):
                    break
                nodes += 1
            if nodes > 1:
                new = _Node(compr=True)
                self.numnodes += 1
                chunks: list[bytes] = []
                h = start
                while h.data:
                    chunks.append(h.data)
                    h = h.children[-1]
                    self.numnodes -= 1
                    if h.key or (not h.compr and len(h.data) != 1):
                        break
                new.data = b"".join(chunks)
                new.children = [h]
                if parent is None:
                    self.head = new
                else:
                    parent.children[_index_of(parent, start)] = new
        return True


def _index_of(parent: _Node, child: _Node) -> int:
    for idx, c in enumerate(parent.children):
        if c is child:
            return idx
    raise AssertionError("rax: child not found under its parent")


def _remove_child(parent: _Node, child: _Node) -> None:
    """raxRemoveChild: a compressed parent becomes a childless plain node; else drop the edge."""
    if parent.compr:
        parent.compr = False
        parent.data = b""
        parent.children = []
        return
    idx = _index_of(parent, child)
    parent.data = parent.data[:idx] + parent.data[idx + 1 :]
    del parent.children[idx]
