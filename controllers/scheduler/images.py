"""The images the cluster's nodes hold: the size of every image name any node reports, kept as nodes change.

A start-delay score needs the size of each of a project's images, including on the nodes that lack it; the size is
whatever any node reported. `ImageIndex` keeps name → size for every name held by at least one node, updated
from each node's change (`replace`, `release`), so a decision only looks its project's few images up.

Guarantees:

* **Work per node change, none per decision.** `replace` compares the node's new names with its old ones and does
  nothing more when they are equal; otherwise it counts the names in and out (O(names of that node)).
* **One string per name.** Names are interned, so the many nodes holding one image share its name's string; a
  node keeps only the set of its names, the sizes live here once.
* **Exact counts.** A name is known while at least one node holds it. Its size is the one reported by the last
  node whose names changed to include it (0: none reported); an image retagged with new content brings a new
  digest name, so its new size arrives with it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping


class ImageIndex:
    """Image name → size for the names the cluster's nodes hold (see the module docstring)."""

    __slots__ = ("_holders", "sizes")

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}
        """Name → bytes (0: no node reported a size); read it as a Mapping, change it only through this class."""
        self._holders: dict[str, int] = {}  # name → how many nodes hold it

    def __len__(self) -> int:
        return len(self._holders)

    def replace(self, old: frozenset[str], new: Mapping[str, int]) -> frozenset[str]:
        """A node that held `old` now holds `new` (name → size): the index follows; returns the node's new names
        (interned; `old` itself when nothing changed)."""
        if len(old) == len(new) and all(name in old for name in new):
            return old
        names = frozenset(dict.fromkeys(map(sys.intern, new)))  # from a sized dict: a table half the size
        self.release(old - names)
        holders, sizes = self._holders, self.sizes
        for name in names:
            size = new[name]
            if name not in old:
                holders[name] = holders.get(name, 0) + 1
            if size > 0 or name not in sizes:
                sizes[name] = size
        return names

    def release(self, names: frozenset[str]) -> None:
        """The node that held `names` no longer does (it changed or was deleted)."""
        holders = self._holders
        for name in names:
            left = holders.get(name, 0) - 1
            if left > 0:
                holders[name] = left
            else:
                holders.pop(name, None)
                self.sizes.pop(name, None)


__all__ = ["ImageIndex"]
