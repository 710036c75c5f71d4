"""Where a perf table's rows come from: file discovery and the source union
(docs/spec 4.1, 4.2, 11.10), for every table the engine step reads.

This generalises ``aicsql.spec.gemm.gemm_sources`` (which stays the GEMM
path's own, unchanged) from ``gemm_perf.parquet`` to any table file:

* the mounted data roots and their ranking are the GEMM path's
  (``DataTree.roots``, best first): the best root offering a file serves it;
* inside one root both layouts are recognised -- family
  ``<system>/<family>/<backend>/<version>/<file>`` (the first family dir in
  name order holding the file wins) before legacy
  ``<system>/<backend>/<version>/<file>``; NCCL lives under the pseudo
  backend ``nccl`` (``comm/nccl/<nccl_version>/`` or ``nccl/<nccl_version>/``);
* the union, with the shared layer on, is: the requested version's file, then
  the donors its ``reuse.yaml`` declares (file order), then the same
  backend's strictly older versions (PEP 440, unparseable names skipped,
  nearest first) -- skipping version dirs ``collection_meta.yaml`` marks
  ``status: partial``. Comm tables (custom all-reduce, NCCL) never take part:
  primary file only.

The cross-backend channel (docs/spec 4.2 item 4) adds nothing for the published
data (no manifest entry lists two frameworks for these tables); should one
appear, loading refuses rather than silently differing from the spec.
"""

from __future__ import annotations

import os
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from .. import pep440
from ..data import Database, DataTree

__all__ = ["TableFile", "TableIndex", "table_index", "table_sources", "NO_UNION_TABLES"]

# Tables that never take part in the union (docs/spec 4.2: "Comm-family tables
# (custom all-reduce) and NCCL never take part in the union").
NO_UNION_TABLES = frozenset({"custom_allreduce_perf.parquet", "nccl_perf.parquet"})


class TableFile(NamedTuple):
    """One table file of one (system, backend, version)."""

    system: str
    backend: str
    version: str
    name: str  # file basename, e.g. context_attention_perf.parquet
    path: str

    @property
    def version_dir(self) -> str:
        return os.path.dirname(self.path)


def _listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _is_table(name: str) -> bool:
    return name.endswith(".parquet") or name.endswith(".csv")


class TableIndex:
    """Every table file of every system in the mounted roots, best root first."""

    def __init__(self, tree: DataTree):
        self.tree = tree
        self.files: Dict[Tuple[str, str, str, str], TableFile] = {}
        for root in tree.roots:  # best first: the first root to offer a file serves it
            data_dir = os.path.join(root.dir, "systems", "data")
            for f in self._files_of(data_dir):
                self.files.setdefault((f.system, f.backend, f.version, f.name), f)

    @staticmethod
    def _files_of(data_dir: str):
        for system in _listdir(data_dir):
            system_dir = os.path.join(data_dir, system)
            if not os.path.isdir(system_dir):
                continue
            family: List[TableFile] = []
            legacy: List[TableFile] = []
            for first in _listdir(system_dir):
                first_dir = os.path.join(system_dir, first)
                if not os.path.isdir(first_dir):
                    continue
                for second in _listdir(first_dir):
                    second_dir = os.path.join(first_dir, second)
                    if not os.path.isdir(second_dir):
                        continue
                    for third in _listdir(second_dir):
                        third_path = os.path.join(second_dir, third)
                        if os.path.isfile(third_path):
                            if _is_table(third):  # legacy: <backend>/<version>/<file>
                                legacy.append(TableFile(system, first, second, third, third_path))
                        elif os.path.isdir(third_path):  # family: <family>/<backend>/<version>/<file>
                            for name in _listdir(third_path):
                                path = os.path.join(third_path, name)
                                if _is_table(name) and os.path.isfile(path):
                                    family.append(TableFile(system, second, third, name, path))
            seen = set()
            for f in family + legacy:  # family dirs (name order) first, then legacy
                key = (f.backend, f.version, f.name)
                if key not in seen:
                    seen.add(key)
                    yield f

    def file(self, system: str, backend: str, version: str, name: str) -> Optional[TableFile]:
        return self.files.get((system, backend, version, name))

    def versions(self, system: str, backend: str, name: str) -> List[str]:
        """Versions of (system, backend) holding the table file."""
        return [v for (s, b, v, n) in self.files if s == system and b == backend and n == name]


_INDEXES: Dict[int, TableIndex] = {}
_INDEXES_LOCK = threading.Lock()


def table_index(tree: DataTree) -> TableIndex:
    """The table index of a data tree, built once per tree."""
    with _INDEXES_LOCK:
        index = _INDEXES.get(id(tree))
        if index is None or index.tree is not tree:
            index = _INDEXES[id(tree)] = TableIndex(tree)
        return index


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0]


def _is_partial(tree: DataTree, f: TableFile) -> bool:
    """Whether collection_meta.yaml marks the version dir (or this table) `status: partial`."""
    path = os.path.join(f.version_dir, "collection_meta.yaml")
    if not os.path.isfile(path):
        return False
    doc = tree.read_yaml(path) or {}
    if doc.get("status") == "partial":
        return True
    table = (doc.get("tables") or {}).get(_stem(f.name)) or {}
    return isinstance(table, dict) and table.get("status") == "partial"


# The family directory of each table the engine step reads (docs/spec 4.1): a
# family-layout reuse.yaml speaks for its own family's tables.
FAMILIES = {
    "gemm_perf.parquet": "gemm",
    "context_attention_perf.parquet": "attention",
    "generation_attention_perf.parquet": "attention",
    "moe_perf.parquet": "moe",
    "custom_allreduce_perf.parquet": "comm",
    "nccl_perf.parquet": "comm",
}


def _reuse_donors(
    tree: DataTree, index: TableIndex, db: Database, name: str, own: Optional[TableFile]
) -> List[TableFile]:
    """Donors declared for this table in the requested version's reuse.yaml
    (the own file's dir, or for a version without the file the reuse.yaml
    that declares it), in file order; donors without the file are skipped."""
    versions = tree.reuse_donors(
        db.system,
        db.backend,
        db.version,
        table=_stem(name),
        family=FAMILIES.get(name, ""),
        version_dir=own.version_dir if own is not None else None,
    )
    donors = [index.file(db.system, db.backend, v, name) for v in versions]
    return [d for d in donors if d is not None]


def _check_cross_backend(tree: DataTree, db: Database, name: str) -> None:
    for group in tree.manifest().get("groups") or []:
        if not isinstance(group, dict) or group.get("op_file") != name:
            continue
        frameworks = group.get("frameworks") or []
        if db.backend in frameworks and len(frameworks) > 1:
            raise NotImplementedError(
                f"op_kernel_source_manifest.yaml shares {name} kernel_source {group.get('kernel_source')!r} "
                f"between {frameworks}; the cross-backend shared-layer channel is not implemented in aicsql.spec"
            )


def table_sources(tree: DataTree, db: Database, name: str, shared_layer: bool = True) -> List[TableFile]:
    """The files of a database's table `name`, in priority order (docs/spec 4.2).

    Empty when no admitted version holds the file. Without the requested
    version's own file the union is what the older versions offer (the
    row-concatenation of the sources that exist)."""
    index = table_index(tree)
    own = index.file(db.system, db.backend, db.version, name)
    sources: List[TableFile] = [own] if own is not None else []
    if not shared_layer or name in NO_UNION_TABLES:
        return sources
    for donor in _reuse_donors(tree, index, db, name, own):
        if donor not in sources and not _is_partial(tree, donor):
            sources.append(donor)
    requested = pep440.parse(db.version)
    if requested is not None:
        older = []
        for version in index.versions(db.system, db.backend, name):
            parsed = pep440.parse(version)
            if parsed is None or not parsed < requested:
                continue  # unparseable names are skipped; newer versions are never used
            older.append((parsed, version))
        older.sort(key=lambda pair: pair[0], reverse=True)  # nearest first
        for _, version in older:
            f = index.file(db.system, db.backend, version, name)
            if f not in sources and not _is_partial(tree, f):
                sources.append(f)
    _check_cross_backend(tree, db, name)
    return sources


# ---- reading ---------------------------------------------------------------------------

_FILES: Dict[str, "object"] = {}
_FILES_LOCK = threading.Lock()


def read_columns(path: str, columns: List[str], defaults: Optional[Dict[str, object]] = None) -> Dict[str, list]:
    """The named columns of a table file as Python lists (file row order).

    A column listed in `defaults` may be absent from the file; it then reads
    as that default on every row (e.g. ``window_size`` -> 0, docs/spec 4.4). The
    parquet table is read once per process."""
    import pyarrow.parquet as pq

    with _FILES_LOCK:
        table = _FILES.get(path)
    if table is None:
        if not path.endswith(".parquet"):
            raise ValueError(f"{path}: only parquet perf tables are supported")
        table = pq.read_table(path)
        with _FILES_LOCK:
            table = _FILES.setdefault(path, table)
    defaults = defaults or {}
    out: Dict[str, list] = {}
    for name in columns:
        if name in table.column_names:
            out[name] = table.column(name).to_pylist()
        elif name in defaults:
            out[name] = [defaults[name]] * table.num_rows
        else:
            raise ValueError(f"{path}: column {name!r} is missing")
    return out
