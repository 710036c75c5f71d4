"""Finding the perf data: data roots, releases, the merged tree and the
database set.

A *data root* is a directory holding ``systems/data/`` -- the
``aiconfigurator/`` or ``aiconfigurator_core/`` folder of an unpacked wheel.
The fetch step unpacks each release beside a ``RELEASE`` marker file
(``aiconfigurator-core==0.12.0``). Roots are ranked, best first:

1. a tree without release metadata (a user's own data) beats published data;
2. among published releases, the higher PEP 440 version of the release wins
   (``aiconfigurator-core==0.12.0`` > ``aiconfigurator==0.10.0``); the
   release *name* plays no part;
3. ties go to the earlier mount (order of the ``data`` argument, then
   directory name order inside it).

The roots' ``systems/`` directories are read as one merged tree
(`aicsql.spec.layout.Overlay`: a file at a relative path comes from the best
root holding it), which is how the spec's goldens were computed
(docs/spec/families_hybrid_vl_databases.md 4.1). Both layouts live in it:
legacy ``data/<system>/<backend>/<version>/`` (the 0.10.0 wheel) and family
``data/<system>/<family>/<backend>/<version>/`` (0.12.0).

A *database* is ``system/backend/version`` as the spec's discovery lists it
(`aicsql.spec.catalog`, 124 on the published data): versions that only
declare reuse are databases whose tables come from the shared layer; partial
dirs, ``nccl`` / ``oneccl`` dirs and ``trtllm/1.3.0rc11`` are not.
``latest`` is the spec's (marker-only versions excluded, its own version
key). Which files make up a table is `aicsql.spec.sources`.

Where the data is: the explicit ``data`` argument, else ``$AICSQL_DATA``, else
``$XDG_CACHE_HOME/aicsql``, else ``~/.cache/aicsql`` -- the same rule as the
Rust side. ``data`` (and ``$AICSQL_DATA``) may list several directories
separated by ``os.pathsep``; each may be a data root, a release folder or a
cache holding release folders.
"""

from __future__ import annotations

import os
import threading
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import yaml

from . import pep440

__all__ = [
    "GEMM_FILE",
    "DataRoot",
    "DataTree",
    "Database",
    "data_dirs",
    "open_tree",
]

GEMM_FILE = "gemm_perf.parquet"
RELEASE_MARKER = "RELEASE"

DataArg = Union[None, str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def data_dirs(data: DataArg = None) -> List[str]:
    """The directories to mount, by the cache-dir rule (see module doc)."""
    if data is None or (isinstance(data, str) and data == ""):
        env = os.environ.get("AICSQL_DATA")
        if env:
            data = env
        elif os.environ.get("XDG_CACHE_HOME"):
            data = os.path.join(os.environ["XDG_CACHE_HOME"], "aicsql")
        else:
            data = os.path.join(os.path.expanduser("~"), ".cache", "aicsql")
    if isinstance(data, (str, os.PathLike)):
        parts = [p for p in os.fspath(data).split(os.pathsep) if p]
    else:
        parts = [os.fspath(p) for p in data]
    return [os.path.abspath(os.path.expanduser(p)) for p in parts]


class DataRoot(NamedTuple):
    """One mounted data root (the folder holding ``systems/``)."""

    dir: str
    release: str  # 'name==version', or 'local:<dir>'
    version: Optional[pep440.Version]  # the release's version; None for local trees
    mount_index: int

    @property
    def is_local(self) -> bool:
        return self.release.startswith("local:")

    def rank(self) -> tuple:
        """Sort key, best first: local trees, then newer releases, then earlier mounts."""
        if self.is_local:
            return (0, (), self.mount_index)
        # Unparseable release versions rank below every parseable one.
        key = self.version._key if self.version is not None else None
        return (1, (0,) if key is None else (1, _Desc(key)), self.mount_index)


class _Desc:
    """Wraps a sort key to sort descending."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __lt__(self, other: "_Desc") -> bool:
        return other.key < self.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key


class Database(NamedTuple):
    system: str
    backend: str
    version: str

    @property
    def name(self) -> str:
        return f"{self.system}/{self.backend}/{self.version}"


def _listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _find_roots(path: str, depth: int) -> List[str]:
    if os.path.isdir(os.path.join(path, "systems", "data")):
        return [path]
    if depth == 0:
        return []
    found: List[str] = []
    for name in _listdir(path):
        child = os.path.join(path, name)
        if not name.startswith(".") and os.path.isdir(child):
            found.extend(_find_roots(child, depth - 1))
    return found


def _release_of(root: str) -> Tuple[str, Optional[pep440.Version]]:
    """The release label of a root: the ``RELEASE`` marker in it or its parent."""
    for d in (root, os.path.dirname(root)):
        marker = os.path.join(d, RELEASE_MARKER)
        if os.path.isfile(marker):
            with open(marker, "r", encoding="utf-8") as f:
                label = f.read().strip()
            if "==" not in label:
                raise ValueError(f"{marker}: expected 'name==version', got {label!r}")
            return label, pep440.parse(label.split("==", 1)[1])
    parent = os.path.dirname(root)
    for name in _listdir(parent):
        if name.endswith(".dist-info") and "-" in name[: -len(".dist-info")]:
            dist, version = name[: -len(".dist-info")].rsplit("-", 1)
            return f"{dist.replace('_', '-')}=={version}", pep440.parse(version)
    return f"local:{root}", None


class DataTree:
    """The mounted roots, seen as one merged tree (`overlay`), and the spec's
    database set on it (`catalog`)."""

    def __init__(self, dirs: Iterable[str]):
        roots: List[DataRoot] = []
        for mount_index, d in enumerate(dirs):
            if not os.path.isdir(d):
                raise ValueError(f"data directory {d!r} is not accessible")
            found = _find_roots(d, 3)
            if not found:
                raise ValueError(
                    f"no perf data under {d!r} (expected a folder holding systems/data, "
                    "e.g. an unpacked aiconfigurator wheel; run the project's fetch step)"
                )
            for root in found:
                label, version = _release_of(root)
                roots.append(DataRoot(root, label, version, mount_index))
        # Stable sort: inside one mount, roots keep directory-name order.
        self.roots: List[DataRoot] = sorted(roots, key=DataRoot.rank)
        self.system_yamls: Dict[str, str] = {}
        self.manifest_path: Optional[str] = None
        for root in self.roots:  # best first: the first root to offer a file serves it
            systems_dir = os.path.join(root.dir, "systems")
            for name in _listdir(systems_dir):
                if name.endswith(".yaml") and os.path.isfile(os.path.join(systems_dir, name)):
                    self.system_yamls.setdefault(name[: -len(".yaml")], os.path.join(systems_dir, name))
            manifest = os.path.join(systems_dir, "op_kernel_source_manifest.yaml")
            if self.manifest_path is None and os.path.isfile(manifest):
                self.manifest_path = manifest
        self._yaml_cache: Dict[str, object] = {}
        # Resolved paths, by the resolver's arguments: the mounted tree is
        # fixed once read, and a search names the same missing file in every
        # miss message it builds (tens of thousands of times).
        self.path_memo: Dict[Tuple, str] = {}
        self._lock = threading.Lock()
        self._overlay = None
        self._catalog = None

    # ---- the merged tree and the database set -------------------------------

    @property
    def overlay(self):
        """The roots' ``systems/`` dirs as one tree (`aicsql.spec.layout.Overlay`)."""
        from .layout import Overlay

        with self._lock:
            if self._overlay is None:
                self._overlay = Overlay([os.path.join(r.dir, "systems") for r in self.roots])
            return self._overlay

    @property
    def catalog(self):
        """The spec's database set on the merged tree (`aicsql.spec.catalog.Catalog`)."""
        from .catalog import Catalog

        overlay = self.overlay
        with self._lock:
            if self._catalog is None:
                self._catalog = Catalog(overlay, self.read_yaml)
            return self._catalog

    # ---- listings (the spec's set, docs/spec/families_hybrid_vl_databases.md 4.2) ----

    def systems(self) -> List[str]:
        return sorted(self.catalog.databases())

    def backends(self, system: str) -> List[str]:
        return sorted(self.catalog.databases().get(system, {}))

    def versions(self, system: str, backend: str) -> List[str]:
        """The versions of (system, backend) that are databases, in the spec's (string) order."""
        return self.catalog.versions(system, backend)

    def databases(self) -> List[Database]:
        """The spec's databases (124 on the published data), system, backend, version order."""
        return [Database(s, b, v) for s in self.systems() for b in self.backends(s) for v in self.versions(s, b)]

    def latest(self, system: str, backend: str) -> Optional[str]:
        """The spec's ``latest`` version (marker-only versions excluded, its own version key; 4.4)."""
        return self.catalog.latest(system, backend)

    def gemm_file(self, db: Database):
        """The database's own admitted GEMM file (a `TableFile`), or None."""
        from .sources import table_sources

        own = [f for f in table_sources(self, db, GEMM_FILE, shared_layer=False) if f.channel == "primary"]
        return own[0] if own else None

    # ---- documents ----------------------------------------------------------

    def read_yaml(self, path: str):
        """A yaml document, parsed once per tree."""
        with self._lock:
            if path not in self._yaml_cache:
                with open(path, "r", encoding="utf-8") as f:
                    self._yaml_cache[path] = yaml.safe_load(f)
            return self._yaml_cache[path]

    def system_yaml(self, system: str) -> str:
        try:
            return self.system_yamls[system]
        except KeyError:
            raise ValueError(f"no systems/{system}.yaml in the mounted data") from None

    def manifest(self) -> dict:
        if self.manifest_path is None:
            return {}
        return self.read_yaml(self.manifest_path) or {}

    # ---- resolving a database argument -------------------------------------

    def resolve(self, text: str, backend: str = "", version: str = "latest") -> Database:
        """'system/backend/version' (or 'system/backend', 'system' with the rest
        from the settings) -> the database; ValueError naming what is wrong and
        listing what is available."""
        parts = text.split("/")
        if len(parts) > 3 or any(p == "" for p in parts):
            raise ValueError(
                f"database {text!r} is not of the form 'system/backend/version' "
                "(or 'system', 'system/backend' with the backend / version settings)"
            )
        system = parts[0]
        if system not in self.systems():
            raise ValueError(f"unknown system {system!r} in database {text!r}; systems: " + ", ".join(self.systems()))
        if len(parts) >= 2:
            backend = parts[1]
        elif not backend:
            raise ValueError(
                f"database {text!r} names no backend; write '{system}/<backend>/<version>' or set the backend "
                "setting (SET aic.backend)"
            )
        versions = self.versions(system, backend)
        if not versions:
            raise ValueError(
                f"no database for backend {backend!r} on {system} (database {text!r}); backends: "
                + ", ".join(self.backends(system))
            )
        wanted = parts[2] if len(parts) == 3 else (version or "latest")
        if wanted == "latest":
            newest = self.latest(system, backend)
            if newest is None:
                raise ValueError(
                    f"{system}/{backend} has no latest version (database {text!r}): every version only reuses "
                    "other versions' tables; versions: " + ", ".join(versions)
                )
            return Database(system, backend, newest)
        if wanted not in versions:
            raise ValueError(
                f"unknown database {system}/{backend}/{wanted} (database {text!r}); versions: " + ", ".join(versions)
            )
        return Database(system, backend, wanted)


_TREES: Dict[Tuple[str, ...], DataTree] = {}
_TREES_LOCK = threading.Lock()


def open_tree(data: DataArg = None) -> DataTree:
    """The data tree for `data` (see `data_dirs`), opened once per process."""
    dirs = tuple(data_dirs(data))
    with _TREES_LOCK:
        tree = _TREES.get(dirs)
        if tree is None:
            tree = _TREES[dirs] = DataTree(dirs)
        return tree
