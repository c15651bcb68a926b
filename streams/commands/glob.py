"""Redis's glob-style pattern matching (util.c `stringmatchlen`), as KEYS and SCAN MATCH use it.

`*` any run of bytes, `?` one byte, `[abc]` `[^abc]` `[a-z]` classes, `\\x` a literal x. Redis's
quirks are kept: an unclosed `[` class runs to the end of the pattern, a range written backwards
(`[z-a]`) is swapped, `[a-]` is a range up to `]`, a trailing backslash is a literal one, bytes
compare as C's signed chars in ranges, and an empty string matches only the empty pattern.

The pattern is parsed once into one-byte tokens and stars, then matched with the classic
two-pointer algorithm (backtracking only to the last star). Every token but a star consumes
exactly one byte, so this gives Redis's answers without its recursion (a pattern of thousands
of stars cannot exhaust the stack), in O(len(pattern) * len(string)) at worst.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

_STAR = None
"""A `*` token (runs of stars collapse into one)."""


@dataclass(frozen=True, slots=True)
class _Class:
    """A `[...]` class: single bytes, inclusive signed ranges, negation."""

    singles: frozenset[int]
    ranges: tuple[tuple[int, int], ...]
    negate: bool

    def __call__(self, byte: int) -> bool:
        signed = byte - 256 if byte >= 128 else byte
        hit = byte in self.singles or any(lo <= signed <= hi for lo, hi in self.ranges)
        return hit != self.negate


@dataclass(frozen=True, slots=True)
class _Literal:
    byte: int

    def __call__(self, byte: int) -> bool:
        return byte == self.byte


def _any(byte: int) -> bool:
    return True


Token = Callable[[int], bool] | None


def _signed(byte: int) -> int:
    return byte - 256 if byte >= 128 else byte


def compile_pattern(pattern: bytes) -> tuple[Token, ...]:
    """Tokens as Redis's matcher walks the pattern (independent of the string matched)."""
    tokens: list[Token] = []
    n = len(pattern)
    i = 0

    def at(k: int) -> int:
        return pattern[k] if k < n else 0  # the C string's terminating NUL

    while i < n:
        c = pattern[i]
        if c == 0x2A:  # '*'
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
            i += 1
        elif c == 0x3F:  # '?'
            tokens.append(_any)
            i += 1
        elif c == 0x5B:  # '['
            i += 1
            negate = at(i) == 0x5E  # '^'
            if negate:
                i += 1
            singles: set[int] = set()
            ranges: list[tuple[int, int]] = []
            while True:
                left = n - i
                if at(i) == 0x5C and left >= 2:  # '\\' escapes the next byte
                    i += 1
                    singles.add(pattern[i])
                elif at(i) == 0x5D:  # ']'
                    break
                elif left <= 0:
                    i -= 1  # Redis steps back so the increment below lands on the end
                    break
                elif left >= 3 and pattern[i + 1] == 0x2D:  # 'a-z'
                    lo, hi = _signed(pattern[i]), _signed(pattern[i + 2])
                    ranges.append((min(lo, hi), max(lo, hi)))
                    i += 2
                else:
                    singles.add(pattern[i])
                i += 1
            i += 1
            tokens.append(_Class(frozenset(singles), tuple(ranges), negate))
        elif c == 0x5C and n - i >= 2:  # '\\x'
            tokens.append(_Literal(pattern[i + 1]))
            i += 2
        else:
            tokens.append(_Literal(c))
            i += 1
    return tuple(tokens)


class Pattern:
    """A compiled glob: `Pattern(b"user:*").match(b"user:1")`."""

    __slots__ = ("source", "_tokens", "_all")

    def __init__(self, pattern: bytes) -> None:
        self.source = pattern
        self._tokens = compile_pattern(pattern)
        self._all = pattern == b"*"

    def match(self, string: bytes) -> bool:
        if self._all:
            return True  # KEYS and SCAN skip matching for the lone '*' (empty keys included)
        if not string:
            return not self.source  # Redis's loop never starts: only "" matches ""
        tokens = self._tokens
        t = s = 0
        star_t = -1
        star_s = 0
        nt, ns = len(tokens), len(string)
        while s < ns:
            if t < nt:
                token = tokens[t]
                if token is None:  # a star: first try it as empty, remember where
                    star_t, star_s = t, s
                    t += 1
                    continue
                if token(string[s]):
                    t += 1
                    s += 1
                    continue
            if star_t < 0:
                return False
            star_s += 1  # let the last star swallow one more byte
            s = star_s
            t = star_t + 1
        while t < nt and tokens[t] is None:
            t += 1
        return t == nt


def match(pattern: bytes, string: bytes) -> bool:
    return Pattern(pattern).match(string)
