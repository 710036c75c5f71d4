"""The mounted data roots seen as one ``systems/`` directory: the spec's merged
tree (docs/spec/families_hybrid_vl_databases.md 4.1).

The goldens were computed on one ``systems/`` root holding both published
wheels side by side, the newer release's file replacing the older one's where
both have the same relative path. `Overlay` is that tree without copying it:
every mounted root's ``systems/`` is walked once, and a relative path
(``data/h200_sxm/gemm/vllm/0.19.0/gemm_perf.parquet``) names the entry of the
best-ranked root that has it (``DataTree.roots`` order: local trees, then newer
releases, then earlier mounts). A directory exists when any root has it, and
lists the union of its entries.

Listings are returned in name order. The spec lists directories in OS order,
which decides only which family directory serves a file held by several
(docs/spec 11.10: each table file lives in exactly one family directory of the
published data, so the order is not observable there).

Paths are '/'-joined strings relative to ``systems/``; `real` maps one to the
file or directory on disk.
"""

from __future__ import annotations

import os
import threading
from typing import Dict, List, NamedTuple, Optional, Sequence

__all__ = ["Entry", "Overlay", "join"]


def join(*parts: str) -> str:
    """A relative overlay path from its components (empty components dropped)."""
    return "/".join(p for p in parts if p)


class Entry(NamedTuple):
    """One name of an overlay directory: file or directory, and where it lives."""

    is_dir: bool
    real: str  # the path on disk (the best root's)


class Overlay:
    """The union of several ``systems/`` directories, best first (see module doc)."""

    def __init__(self, systems_dirs: Sequence[str]):
        self.systems_dirs = list(systems_dirs)
        self._dirs: Optional[Dict[str, Dict[str, Entry]]] = None
        self._lock = threading.Lock()

    def _index(self) -> Dict[str, Dict[str, Entry]]:
        with self._lock:
            if self._dirs is None:
                dirs: Dict[str, Dict[str, Entry]] = {"": {}}
                for top in self.systems_dirs:  # best first: the first root to offer a name keeps it
                    if not os.path.isdir(top):
                        continue
                    for here, subdirs, files in os.walk(top):
                        rel = os.path.relpath(here, top).replace(os.sep, "/")
                        rel = "" if rel == "." else rel
                        listing = dirs.setdefault(rel, {})
                        for name in subdirs:
                            listing.setdefault(name, Entry(True, os.path.join(here, name)))
                            dirs.setdefault(join(rel, name), {})
                        for name in files:
                            listing.setdefault(name, Entry(False, os.path.join(here, name)))
                self._dirs = dirs
            return self._dirs

    def entry(self, rel: str) -> Optional[Entry]:
        parent, _, name = rel.rpartition("/")
        listing = self._index().get(parent)
        return None if listing is None else listing.get(name)

    def listdir(self, rel: str) -> List[str]:
        """Names in the directory `rel`, in name order ([] if it is not a directory)."""
        return sorted(self._index().get(rel) or ())

    def isdir(self, rel: str) -> bool:
        if rel == "":
            return True
        e = self.entry(rel)
        return e is not None and e.is_dir

    def isfile(self, rel: str) -> bool:
        e = self.entry(rel)
        return e is not None and not e.is_dir

    def real(self, rel: str) -> Optional[str]:
        """The file or directory on disk that `rel` names, or None."""
        e = self.entry(rel)
        return None if e is None else e.real
