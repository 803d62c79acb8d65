"""Caches bounded by the bytes their values hold. Each is owned by a stage object of one `Compiler`."""

from __future__ import annotations

from collections import OrderedDict


class BytesLRU:
    """A least-recently-used cache bounded by the bytes its values hold, not by their count: a token automaton is a
    [states, vocab] table, so with a 262k-token vocabulary one entry can weigh hundreds of MB. `reweigh`: values
    that grow after they are cached (an automaton's derived tables) are weighed again whenever handed out."""

    def __init__(self, max_bytes: int, reweigh: bool = False):
        self.max_bytes = max_bytes
        self.reweigh = reweigh
        self.items: OrderedDict = OrderedDict()
        self.bytes = 0

    def __contains__(self, key) -> bool:
        return key in self.items

    def clear(self) -> None:
        self.items.clear()
        self.bytes = 0

    def get(self, key, build, size):
        entry = self.items.get(key)
        if entry is not None:
            self.items.move_to_end(key)
            if self.reweigh:
                weight = size(entry[0])
                if weight != entry[1]:
                    self.items[key] = (entry[0], weight)
                    self.bytes += weight - entry[1]
                    self._evict()
            return entry[0]
        value = build()
        weight = size(value)
        if weight <= self.max_bytes:
            self.items[key] = (value, weight)
            self.bytes += weight
            self._evict()
        return value

    def _evict(self) -> None:
        while self.bytes > self.max_bytes and len(self.items) > 1:  # (the entry just used stays)
            _, (_, dropped) = self.items.popitem(last=False)
            self.bytes -= dropped
