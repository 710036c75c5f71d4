"""Finding the perf data: data roots, releases, GEMM files and system yamls.

A *data root* is a directory holding ``systems/data/`` -- the
``aiconfigurator/`` or ``aiconfigurator_core/`` folder of an unpacked wheel.
The fetch step unpacks each release beside a ``RELEASE`` marker file
(``aiconfigurator-core==0.12.0``). Where several roots carry the same
(system, backend, version) GEMM file, or the same ``systems/<system>.yaml``,
the root that ranks first serves it:

1. a tree without release metadata (a user's own data) beats published data;
2. among published releases, the higher PEP 440 version of the release wins
   (``aiconfigurator-core==0.12.0`` > ``aiconfigurator==0.10.0``); the
   release *name* plays no part;
3. ties go to the earlier mount (order of the ``data`` argument, then
   directory name order inside it).

Both layouts are recognised: legacy ``systems/data/<system>/<backend>/<version>/``
and family ``systems/data/<system>/<family>/<backend>/<version>/`` (for a
given system the first family directory in name order holding the file wins,
docs/spec 4.1 / 11.10; ``gemm_perf.parquet`` only ever lives in ``gemm``).

A *database* is ``system/backend/version``; it has a GEMM table when some
root holds its own ``gemm_perf.parquet``, or when its version directory
declares the table in a ``reuse.yaml`` without holding the file (e.g.
``gb200/trtllm/1.3.0rc23``, whose GEMM table reuses 1.3.0rc20): the shared
layer then serves it from the donors. ``latest`` only considers versions
with a file of their own.

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


class GemmFile(NamedTuple):
    """One ``gemm_perf.parquet`` and where it came from."""

    system: str
    backend: str
    version: str
    path: str
    root: DataRoot

    @property
    def version_dir(self) -> str:
        return os.path.dirname(self.path)


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
    """The mounted roots and the GEMM files / system yamls each database uses."""

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
        self.gemm_files: Dict[Tuple[str, str, str], GemmFile] = {}
        self.system_yamls: Dict[str, str] = {}
        self.manifest_path: Optional[str] = None
        for root in self.roots:  # best first: the first root to offer a file serves it
            systems_dir = os.path.join(root.dir, "systems")
            for system, backend, version, path in _gemm_files_of(os.path.join(systems_dir, "data")):
                self.gemm_files.setdefault((system, backend, version), GemmFile(system, backend, version, path, root))
            for name in _listdir(systems_dir):
                if name.endswith(".yaml") and os.path.isfile(os.path.join(systems_dir, name)):
                    self.system_yamls.setdefault(name[: -len(".yaml")], os.path.join(systems_dir, name))
            manifest = os.path.join(systems_dir, "op_kernel_source_manifest.yaml")
            if self.manifest_path is None and os.path.isfile(manifest):
                self.manifest_path = manifest
        self._yaml_cache: Dict[str, object] = {}
        self._lock = threading.Lock()

    # ---- listings -----------------------------------------------------------

    def systems(self) -> List[str]:
        return sorted({s for s, _, _ in self.gemm_files})

    def backends(self, system: str) -> List[str]:
        return sorted({b for s, b, _ in self.gemm_files if s == system})

    def versions(self, system: str, backend: str) -> List[str]:
        """Versions with a GEMM file, ascending PEP 440 (unparseable names last)."""
        return pep440.sort_versions(v for s, b, v in self.gemm_files if s == system and b == backend)

    def databases(self) -> List[Database]:
        return [Database(s, b, v) for s in self.systems() for b in self.backends(s) for v in self.versions(s, b)]

    def gemm_file(self, db: Database) -> Optional[GemmFile]:
        return self.gemm_files.get((db.system, db.backend, db.version))

    def reuse_donors(
        self,
        system: str,
        backend: str,
        version: str,
        table: str = "gemm_perf",
        family: str = "gemm",
        version_dir: Optional[str] = None,
    ) -> List[str]:
        """Donor versions a version dir's ``reuse.yaml`` declares for ``table``
        (file stem, e.g. ``gemm_perf``), in file order; donors are versions of
        the same system and backend (docs/spec 4.2).

        ``version_dir`` is the dir of the database's own file of the table;
        without one (a version that only reuses), the first ``reuse.yaml`` of
        the version that declares donors for the table counts, best root
        first, the table's family dir before the legacy version dir."""
        if version_dir is not None:
            candidates = [os.path.join(version_dir, "reuse.yaml")]
        else:
            candidates = []
            for root in self.roots:
                data = os.path.join(root.dir, "systems", "data", system)
                candidates.append(os.path.join(data, family, backend, version, "reuse.yaml"))
                candidates.append(os.path.join(data, backend, version, "reuse.yaml"))
        for path in candidates:
            if not os.path.isfile(path):
                continue
            donors = []
            for entry in (self.read_yaml(path) or {}).get("reuse") or []:
                if not isinstance(entry, dict) or entry.get("table") != table:
                    continue
                if "from_version" not in entry:
                    raise ValueError(f"{path}: a {table} reuse entry has no from_version")
                donors.append(str(entry["from_version"]))
            if donors or version_dir is not None:
                return donors
        return []

    def reuse_only_versions(self, system: str, backend: str) -> List[str]:
        """Versions without a GEMM file of their own whose ``reuse.yaml``
        declares GEMM donors, ascending PEP 440."""
        found = set()
        for root in self.roots:
            data = os.path.join(root.dir, "systems", "data", system)
            for parent in (os.path.join(data, "gemm", backend), os.path.join(data, backend)):
                for version in _listdir(parent):
                    if (system, backend, version) in self.gemm_files or version in found:
                        continue
                    if os.path.isfile(os.path.join(parent, version, "reuse.yaml")) and self.reuse_donors(
                        system, backend, version
                    ):
                        found.add(version)
        return pep440.sort_versions(found)

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
            raise ValueError(
                f"unknown system {system!r} in database {text!r}; systems with a gemm table: "
                + ", ".join(self.systems())
            )
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
                f"no gemm table for backend {backend!r} on {system} (database {text!r}); backends: "
                + ", ".join(self.backends(system))
            )
        wanted = parts[2] if len(parts) == 3 else (version or "latest")
        if wanted == "latest":
            return Database(system, backend, latest(versions))
        if wanted not in versions:
            reusing = self.reuse_only_versions(system, backend)
            if wanted not in reusing:
                listed = versions + [f"{v} (reuses)" for v in reusing]
                raise ValueError(
                    f"no gemm table for {system}/{backend}/{wanted} (database {text!r}); versions: " + ", ".join(listed)
                )
        return Database(system, backend, wanted)


def latest(versions: List[str]) -> str:
    """The newest PEP 440 version among names (the last parseable one in PEP 440 order)."""
    parseable = [v for v in versions if pep440.parse(v) is not None]
    if parseable:
        return max(parseable, key=lambda v: (pep440.parse(v)._key, v))
    return max(versions)


def _gemm_files_of(data_dir: str):
    """(system, backend, version, path) for every GEMM file under one root's systems/data."""
    for system in _listdir(data_dir):
        system_dir = os.path.join(data_dir, system)
        if not os.path.isdir(system_dir):
            continue
        seen = set()
        legacy = []
        family = []
        for first in _listdir(system_dir):
            first_dir = os.path.join(system_dir, first)
            if not os.path.isdir(first_dir):
                continue
            for second in _listdir(first_dir):
                second_dir = os.path.join(first_dir, second)
                if os.path.isfile(os.path.join(second_dir, GEMM_FILE)):
                    # legacy: <system>/<backend>/<version>/gemm_perf.parquet
                    legacy.append((first, second, os.path.join(second_dir, GEMM_FILE)))
                elif os.path.isdir(second_dir):
                    # family: <system>/<family>/<backend>/<version>/gemm_perf.parquet
                    for third in _listdir(second_dir):
                        path = os.path.join(second_dir, third, GEMM_FILE)
                        if os.path.isfile(path):
                            family.append((second, third, path))
        for backend, version, path in family + legacy:
            if (backend, version) not in seen:  # first family dir (name order) wins
                seen.add((backend, version))
                yield system, backend, version, path


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
