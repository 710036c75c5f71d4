"""Which files make up a perf table of a database: the spec's file resolution
and source union (docs/spec/families_hybrid_vl_databases.md 4.3, engine_step.md
4.2, families_mla_gptoss_fp8static.md 7.1), on the merged tree
(`aicsql.spec.layout`). Every table the Python path reads -- GEMM included --
takes its sources from `table_sources`.

resolve(version, file)
    The first family dir ``<data_dir>/<family>/<backend>/<version>/`` (listing
    order; known backend dirs are not families) that is not partial and holds
    the file (or the same stem with ``.txt``); otherwise the legacy-shaped path
    ``<data_dir>/<backend>/<version>/<file>``, existing or not, **without** a
    partial check (see `LEGACY_PARTIAL_DIRS_ARE_DONORS`).

The union, in priority order (rows concatenated, each table's loader then
keeps the first -- or, for the MLA module tables, the last -- row of a key):

1. the requested version's file (``primary``); refused when its dir is
   partial (only a legacy-layout primary can be: the resolver already skips
   partial family dirs);
2. ``declared``: donors named for this table by a ``reuse.yaml`` of any dir of
   the requested version, file order, once per ``from_version`` -- they may be
   newer;
3. ``older``: the same backend's strictly older versions (PEP 440; every
   version name seen in the tree, partial dirs included; names that do not
   parse are skipped), nearest first;
4. ``cross``: for each other framework that ``op_kernel_source_manifest.yaml``
   lists together with the requested backend as consumers of a kernel source
   of tier ``shared`` / ``shared_fallback`` (frameworks in name order), every
   version of that framework holding the file, newest first (no version
   bound); only rows whose ``kernel_source`` is in that framework's filter.

Channels 2-4 are skipped with the shared layer off, for ``nccl`` / ``oneccl``
tables, and when the primary path lies under the ``comm`` family dir (a
legacy-shaped primary -- a missing one included -- is not recognised as comm,
so it takes part in the union, as in the spec).
"""

from __future__ import annotations

import os
import threading
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Tuple

from . import pep440
from .catalog import KNOWN_BACKEND_DIRS, parse_reuse_yaml
from .data import Database, DataTree
from .layout import join

__all__ = [
    "LEGACY_PARTIAL_DIRS_ARE_DONORS",
    "TableFile",
    "library_file",
    "primary_path",
    "read_columns",
    "resolve",
    "table_sources",
]

# The open question of docs/spec/families_hybrid_vl_databases.md 7.1 (and 4.3
# item 2), decided as the v0.11.0 code decides it: the resolver's legacy
# fallback has no partial check, so a legacy version dir marked partial
# (INCOMPLETE.txt, e.g. gb300/vllm/0.14.0) is admitted as an *older donor* of
# newer versions, although it is neither a database nor a primary. This flag
# is that rule; `_donor_admitted` is the only place it is applied.
LEGACY_PARTIAL_DIRS_ARE_DONORS = True

_NO_UNION_FILES = frozenset({"nccl_perf.parquet", "oneccl_perf.parquet"})
_COMM_FAMILY = "comm"


class TableFile(NamedTuple):
    """One admitted source of a table."""

    system: str
    backend: str  # the backend whose version dir holds it (another one for `cross`)
    version: str
    name: str  # file basename, e.g. context_attention_perf.parquet
    path: str  # on disk
    channel: str  # primary | declared | older | cross
    kernel_sources: Optional[FrozenSet[str]] = None  # cross: the rows to keep; None: all rows

    @property
    def version_dir(self) -> str:
        return os.path.dirname(self.path)


def _with_txt(tree: DataTree, rel: str) -> str:
    """The spec's ``.parquet`` -> ``.txt`` fall-back for a file that does not exist."""
    if not tree.overlay.isfile(rel) and rel.endswith(".parquet"):
        legacy = rel[: -len(".parquet")] + ".txt"
        if tree.overlay.isfile(legacy):
            return legacy
    return rel


def resolve(tree: DataTree, data_dir: str, backend: str, version: str, name: str) -> str:
    """The relative path of `name` for (backend, version): the spec's resolver (module doc)."""
    o = tree.overlay
    for entry in o.listdir(data_dir):
        if entry.startswith(".") or entry in KNOWN_BACKEND_DIRS:
            continue
        version_dir = join(data_dir, entry, backend, version)
        if not o.isdir(version_dir) or tree.catalog.is_partial_lenient(version_dir):
            continue
        candidate = _with_txt(tree, join(version_dir, name))
        if o.isfile(candidate):
            return candidate
    return _with_txt(tree, join(data_dir, backend, version, name))  # no partial check here


def _data_dir(tree: DataTree, system: str) -> str:
    data_dir = tree.catalog.data_dir(system)
    if data_dir is None:
        raise ValueError(f"systems/{system}.yaml names no data directory that exists in the mounted data")
    return data_dir


def primary_path(tree: DataTree, db: Database, name: str) -> str:
    """The requested version's path of a table on disk, existing or not (what
    the spec's "File does not exist at ..." message names)."""
    key = ("primary", db, name)
    path = tree.path_memo.get(key)
    if path is None:
        rel = resolve(tree, _data_dir(tree, db.system), db.backend, db.version, name)
        path = tree.overlay.real(rel) or os.path.join(tree.roots[0].dir, "systems", *rel.split("/"))
        tree.path_memo[key] = path
    return path


def library_file(tree: DataTree, system: str, library: str, version: str, name: str) -> Optional[str]:
    """A communication library's table (``nccl`` / ``oneccl`` at the
    system's ``misc.<library>_version``): the resolver's path, on disk, or
    None. These tables never take part in the union."""
    rel = resolve(tree, _data_dir(tree, system), library, version, name)
    return tree.overlay.real(rel) if tree.overlay.isfile(rel) else None


def _dir_partial(tree: DataTree, version_dir: str) -> bool:
    """The request-scoped partial test: a malformed marker counts as not partial."""
    try:
        return tree.catalog.state(version_dir).partial
    except ValueError:
        return False


def _donor_admitted(tree: DataTree, rel: str) -> bool:
    """Whether a resolved donor path (channels 2-4) is admitted: it must exist;
    a partial dir can only be a legacy one here (the resolver skips partial
    family dirs), and is admitted per `LEGACY_PARTIAL_DIRS_ARE_DONORS`."""
    if not tree.overlay.isfile(rel):
        return False
    return LEGACY_PARTIAL_DIRS_ARE_DONORS or not _dir_partial(tree, os.path.dirname(rel))


def _declared_donors(tree: DataTree, db: Database, name: str) -> List[str]:
    """``from_version`` of every reuse.yaml entry for this table in any dir of
    the requested version (listing order, file order, first occurrence)."""
    o = tree.overlay
    donors: List[str] = []
    for version_dir in tree.catalog.version_dirs_of(db.system, db.backend, db.version):
        rel = join(version_dir, "reuse.yaml")
        if not o.isfile(rel):
            continue
        try:
            entries = parse_reuse_yaml(tree.read_yaml(o.real(rel)), o.real(rel))
        except Exception:  # noqa: BLE001 - the spec warns and treats a malformed file as declaring nothing
            continue
        for entry in entries:
            if f"{entry['table']}.parquet" == name and entry["from_version"] not in donors:
                donors.append(entry["from_version"])
    return donors


def _cross_filters(tree: DataTree, backend: str, name: str) -> Dict[str, FrozenSet[str]]:
    """framework -> the kernel sources its rows may lend to `backend` (module doc, channel 4)."""
    filters: Dict[str, set] = {}
    for entry in tree.manifest().get("groups") or []:
        if not isinstance(entry, dict) or not entry.get("op_file"):
            continue
        op_file = str(entry["op_file"])
        if op_file.endswith(".txt"):
            op_file = op_file[: -len(".txt")] + ".parquet"
        if op_file != name:
            continue
        frameworks = {str(f).lower() for f in entry.get("frameworks") or []}
        kernel_source = entry.get("kernel_source")
        if backend not in frameworks or not kernel_source or entry.get("tier") not in ("shared", "shared_fallback"):
            continue
        for framework in frameworks:
            filters.setdefault(framework, set()).add(kernel_source)
    return {f: frozenset(ks) for f, ks in filters.items() if f != backend}


def _newest_first(versions) -> List[str]:
    """PEP 440 versions newest first, then names that do not parse, in reverse name order."""
    parsed = sorted(((pep440.parse(v), v) for v in versions if pep440.parse(v) is not None),
                    key=lambda p: (p[0]._key, p[1]), reverse=True)  # fmt: skip
    return [v for _, v in parsed] + sorted((v for v in versions if pep440.parse(v) is None), reverse=True)


def _build(tree: DataTree, db: Database, name: str, shared_layer: bool) -> List[TableFile]:
    o = tree.overlay
    data_dir = _data_dir(tree, db.system)
    out: List[TableFile] = []

    def admit(backend: str, version: str, rel: str, channel: str, kernel_sources=None) -> None:
        out.append(TableFile(db.system, backend, version, name, o.real(rel), channel, kernel_sources))

    primary = resolve(tree, data_dir, db.backend, db.version, name)
    if o.isfile(primary) and not _dir_partial(tree, os.path.dirname(primary)):
        admit(db.backend, db.version, primary, "primary")
    parts = primary[len(data_dir) + 1 :].split("/") if data_dir else primary.split("/")
    if not shared_layer or name in _NO_UNION_FILES or (len(parts) == 4 and parts[0] == _COMM_FAMILY):
        return out

    declared = []
    for version in _declared_donors(tree, db, name):
        rel = resolve(tree, data_dir, db.backend, version, name)
        if _donor_admitted(tree, rel):
            admit(db.backend, version, rel, "declared")
            declared.append(version)

    requested = pep440.parse(db.version)
    if requested is not None:
        siblings = {v for v, _ in tree.catalog.version_dirs(data_dir, db.backend)} - {db.version} - set(declared)
        older: List[Tuple[pep440.Version, str]] = []
        for version in siblings:
            parsed = pep440.parse(version)
            if parsed is not None and parsed < requested:
                older.append((parsed, version))
        older.sort(key=lambda p: (p[0]._key, p[1]), reverse=True)  # nearest first
        for _, version in older:
            rel = resolve(tree, data_dir, db.backend, version, name)
            if _donor_admitted(tree, rel):
                admit(db.backend, version, rel, "older")

    for framework, kernel_sources in sorted(_cross_filters(tree, db.backend, name).items()):
        versions = {v for v, _ in tree.catalog.version_dirs(data_dir, framework)}
        for version in _newest_first(versions):
            rel = resolve(tree, data_dir, framework, version, name)
            if _donor_admitted(tree, rel):
                admit(framework, version, rel, "cross", kernel_sources)
    return out


_SOURCES: Dict[Tuple[int, Database, str, bool], Tuple[DataTree, List[TableFile]]] = {}
_SOURCES_LOCK = threading.Lock()


def table_sources(tree: DataTree, db: Database, name: str, shared_layer: bool = True) -> List[TableFile]:
    """The admitted files of a database's table `name` (file basename), in
    priority order; empty when no source holds it (the table is then "not
    loaded": a lookup misses). Computed once per (tree, database, table, shared layer)."""
    key = (id(tree), db, name, bool(shared_layer))
    with _SOURCES_LOCK:
        hit = _SOURCES.get(key)
    if hit is None or hit[0] is not tree:  # a dead tree's id may be reused
        hit = (tree, _build(tree, db, name, bool(shared_layer)))
        with _SOURCES_LOCK:
            _SOURCES[key] = hit
    return list(hit[1])


# ---- reading ---------------------------------------------------------------------------

_FILES: Dict[str, "object"] = {}
_FILES_LOCK = threading.Lock()


def _read_table(path: str):
    import pyarrow.parquet as pq

    with _FILES_LOCK:
        table = _FILES.get(path)
    if table is None:
        if not path.endswith(".parquet"):
            raise ValueError(f"{path}: only parquet perf tables are supported")
        table = pq.read_table(path)
        with _FILES_LOCK:
            table = _FILES.setdefault(path, table)
    return table


def read_columns(
    source, columns: List[str], defaults: Optional[Dict[str, object]] = None
) -> Dict[str, list]:
    """The named columns of a table source (a `TableFile`, or a path) as
    Python lists, file row order. A cross-backend source keeps only the rows
    whose ``kernel_source`` is in its filter (a file without that column then
    gives no rows), filtered in pyarrow before any row reaches Python.

    A column listed in `defaults` may be absent from the file; it then reads
    as that default on every row (e.g. ``window_size`` -> 0, docs/spec 4.4).
    Each parquet file is read once per process."""
    import pyarrow as pa
    import pyarrow.compute as pc

    path = source.path if isinstance(source, TableFile) else source
    kernel_sources = source.kernel_sources if isinstance(source, TableFile) else None
    table = _read_table(path)
    if kernel_sources is not None:
        if "kernel_source" in table.column_names:
            table = table.filter(pc.is_in(table.column("kernel_source"), pa.array(sorted(kernel_sources))))
        else:
            table = table.slice(0, 0)
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
