"""Hypothesis helpers shared by the differential tests."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


def weighted(*choices: tuple[int, st.SearchStrategy[T]]) -> st.SearchStrategy[T]:
    """Pick a strategy with the given weights (`one_of` is not uniform), the first simplest."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


def rarely(
    common: st.SearchStrategy[T], rare: st.SearchStrategy[T], odds: int = 5
) -> st.SearchStrategy[T]:
    """`rare` about once in `odds + 1` draws."""
    return weighted((odds, common), (1, rare))
