"""A bounded set that forgets its oldest members: what a consumer remembers of recent entries."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class BoundedSet(Generic[K]):
    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        self._items: OrderedDict[K, None] = OrderedDict()

    def add(self, item: K) -> None:
        if self.size == 0:
            return
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)
