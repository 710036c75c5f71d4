"""The spec's database set: which (system, backend, version) exist, which
version directories count, and what ``latest`` means
(docs/spec/families_hybrid_vl_databases.md 4.2, 4.4, appendices A-C).

Everything is read through the merged tree (`aicsql.spec.layout.Overlay`).

Version directories (4.2 step 2)
    For a backend of the spec (trtllm, sglang, vllm), the candidate version
    dirs of a system are the subdirs of ``<data_dir>/<backend>/`` (legacy
    layout) and of ``<data_dir>/<family>/<backend>/`` for every first-level
    dir that is not a known backend dir (trtllm, sglang, vllm, nccl, oneccl);
    names starting with '.' or '_' are skipped. So ``nccl/``, ``oneccl/`` and
    ``comm/nccl/`` dirs are never databases, while ``comm/<backend>/<v>``
    dirs are.

A dir's state (`DirState`, 4.2 step 3)
    *partial*: its ``collection_meta.yaml`` marks **any** table
    ``status: partial`` (the top-level ``status`` is not read); only without a
    ``collection_meta.yaml``, an ``INCOMPLETE.txt`` marks it partial.
    *declares reuse*: a non-empty ``reuse.yaml`` list (validated strictly), or,
    without a ``reuse.yaml``, a ``SHARED_LAYER_REUSE.txt`` marker.
    *has perf files*: any regular file other than the four marker files.

A version is a database when one of its dirs is declared: not partial, and
holding perf files or declaring reuse. A malformed ``reuse.yaml`` or
``collection_meta.yaml`` anywhere under a system drops that whole system from
the set, as the spec's discovery does (`Catalog.dropped` names the reason).

``latest`` (4.4): among the databases of (system, backend) that are not
marker-only, the maximum of the spec's own version key (`latest_key`, not PEP
440).
"""

from __future__ import annotations

import re
import threading
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import yaml

from .layout import Overlay, join

__all__ = [
    "BACKENDS",
    "KNOWN_BACKEND_DIRS",
    "MARKER_FILES",
    "Catalog",
    "DirState",
    "latest_key",
    "parse_reuse_yaml",
]

BACKENDS = ("trtllm", "sglang", "vllm")  # the spec's BackendName members
KNOWN_BACKEND_DIRS = frozenset({"trtllm", "sglang", "vllm", "nccl", "oneccl"})

REUSE_YAML = "reuse.yaml"
SHARED_LAYER_REUSE = "SHARED_LAYER_REUSE.txt"
COLLECTION_META = "collection_meta.yaml"
INCOMPLETE = "INCOMPLETE.txt"
MARKER_FILES = frozenset({REUSE_YAML, SHARED_LAYER_REUSE, COLLECTION_META, INCOMPLETE})

_REUSE_KEYS = ("table", "from_version", "reason", "approved_by")


class DirState(NamedTuple):
    """The markers of one version directory (4.2 step 3)."""

    reuse: Tuple[dict, ...]  # the validated reuse.yaml entries (file order)
    declares_reuse: bool
    partial: bool
    has_perf: bool

    @property
    def declared(self) -> bool:
        return not self.partial and (self.has_perf or self.declares_reuse)


def parse_reuse_yaml(doc, where: str) -> Tuple[dict, ...]:
    """The entries of a ``reuse.yaml`` document, validated as the spec does: a
    mapping with a ``reuse`` list of mappings, each with non-empty string
    ``table``, ``from_version``, ``reason``, ``approved_by``."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a YAML mapping at the top level, got {type(doc).__name__}")
    if "reuse" not in doc:
        raise ValueError(f"{where}: missing required top-level 'reuse' key")
    entries = doc["reuse"]
    if not isinstance(entries, list):
        raise ValueError(f"{where}: 'reuse' must be a list, got {type(entries).__name__}")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: reuse[{i}] must be a mapping, got {type(entry).__name__}")
        for key in _REUSE_KEYS:
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}: reuse[{i}].{key} must be a non-empty string")
        out.append({key: entry[key] for key in _REUSE_KEYS})
    return tuple(out)


def _meta_has_partial_table(meta) -> bool:
    tables = meta.get("tables") if isinstance(meta, dict) else None
    if not isinstance(tables, dict):
        return False
    return any(isinstance(t, dict) and t.get("status") == "partial" for t in tables.values())


def latest_key(version: str) -> tuple:
    """The spec's sort key for ``latest`` (4.4), on the lower-cased name:
    ``(X, Y, Z, stable, rc, tail)`` from the first ``X.Y.Z`` (else ``X.Y``),
    the first three numbers otherwise, ``(0, 0, 0, -1, 0, 0)`` without
    digits. ``stable, rc`` is ``(0, N)`` for ``rc<N>``, ``(0, 0)`` for a bare
    ``rc``, else ``(1, 0)``; ``tail`` the last integer after the match."""
    s = version.lower()

    def tail(start: int) -> int:
        m = re.search(r"(\d+)(?!.*\d)", s[start:])
        return int(m.group(1)) if m else 0

    def pre() -> Tuple[int, int]:
        m = re.search(r"rc(\d+)", s)
        if m:
            return 0, int(m.group(1))
        return (0, 0) if "rc" in s else (1, 0)

    m = re.search(r"(\d+)\.(\d+)\.(\d+)", s)
    if m:
        return (int(m.group(1)), int(m.group(2)), int(m.group(3))) + pre() + (tail(m.end()),)
    m = re.search(r"v?(\d+)\.(\d+)", s)
    if m:
        return (int(m.group(1)), int(m.group(2)), 0) + pre() + (tail(m.end()),)
    numbers = [int(x) for x in re.findall(r"\d+", s)][:3]
    if numbers:
        return tuple(numbers + [0] * (3 - len(numbers))) + (0, 0, 0)
    return (0, 0, 0, -1, 0, 0)


class Catalog:
    """The database set of one merged tree (see module doc)."""

    def __init__(self, overlay: Overlay, read_yaml):
        self.overlay = overlay
        self._read_yaml = read_yaml  # (real path) -> parsed document, cached by the tree
        self._states: Dict[str, DirState] = {}
        self._databases: Optional[Dict[str, Dict[str, List[str]]]] = None
        self.dropped: Dict[str, str] = {}  # system -> why the spec's discovery drops it
        self._lock = threading.RLock()

    # ---- system yamls -------------------------------------------------------------

    def system_names(self) -> List[str]:
        """Every ``systems/*.yaml`` (the spec tries each as a system)."""
        return [n[: -len(".yaml")] for n in self.overlay.listdir("") if n.endswith(".yaml")
                and self.overlay.isfile(n)]  # fmt: skip

    def data_dir(self, system: str) -> Optional[str]:
        """The system's ``data_dir`` (relative to ``systems/``), or None when
        the yaml is missing or ``data_dir`` is not a directory. An unreadable
        yaml raises (it drops the system from the set)."""
        real = self.overlay.real(f"{system}.yaml")
        if real is None or self.overlay.isdir(f"{system}.yaml"):
            return None
        doc = self._read_yaml(real)
        if not isinstance(doc, dict):
            raise ValueError(f"{real}: expected a YAML mapping, got {type(doc).__name__}")
        rel = str(doc.get("data_dir") or "").strip("/")
        return rel if self.overlay.isdir(rel) else None

    # ---- version directories --------------------------------------------------------

    def version_dirs(self, data_dir: str, backend: str) -> Iterator[Tuple[str, str]]:
        """(version, dir) for every candidate version dir of `backend` (4.2 step 2);
        a version may have several dirs, one per family and the legacy one."""
        o = self.overlay
        for entry in o.listdir(data_dir):
            path = join(data_dir, entry)
            if entry.startswith(".") or not o.isdir(path):
                continue
            if entry == backend:
                parent = path  # legacy layout
            elif entry in KNOWN_BACKEND_DIRS:
                continue
            else:
                parent = join(path, backend)  # family layout
                if not o.isdir(parent):
                    continue
            for version in o.listdir(parent):
                if not version.startswith((".", "_")) and o.isdir(join(parent, version)):
                    yield version, join(parent, version)

    def state(self, version_dir: str) -> DirState:
        """A version dir's markers; a malformed reuse.yaml or collection_meta.yaml raises ValueError."""
        with self._lock:
            hit = self._states.get(version_dir)
        if hit is not None:
            return hit
        o = self.overlay
        reuse: Tuple[dict, ...] = ()
        if o.isfile(join(version_dir, REUSE_YAML)):
            real = o.real(join(version_dir, REUSE_YAML))
            reuse = parse_reuse_yaml(self._yaml(real), real)
            declares = bool(reuse)  # an empty reuse.yaml declares nothing, and hides the legacy marker
        else:
            declares = o.isfile(join(version_dir, SHARED_LAYER_REUSE))
        if o.isfile(join(version_dir, COLLECTION_META)):
            real = o.real(join(version_dir, COLLECTION_META))
            meta = self._yaml(real)
            if not isinstance(meta, dict):
                raise ValueError(f"{real}: expected a YAML mapping at the top level, got {type(meta).__name__}")
            partial = _meta_has_partial_table(meta)
        else:
            partial = o.isfile(join(version_dir, INCOMPLETE))
        has_perf = any(
            not name.startswith(".") and name not in MARKER_FILES and o.isfile(join(version_dir, name))
            for name in o.listdir(version_dir)
        )
        state = DirState(reuse, declares, partial, has_perf)
        with self._lock:
            self._states[version_dir] = state
        return state

    def is_partial_lenient(self, version_dir: str) -> bool:
        """The resolver's partial test (4.3): as `state`, but an unreadable
        collection_meta.yaml counts as not partial."""
        o = self.overlay
        if o.isfile(join(version_dir, COLLECTION_META)):
            try:
                return _meta_has_partial_table(self._yaml(o.real(join(version_dir, COLLECTION_META))))
            except Exception:  # noqa: BLE001 - the spec's resolver swallows any read/parse error here
                return False
        return o.isfile(join(version_dir, INCOMPLETE))

    def _yaml(self, real: str):
        try:
            return self._read_yaml(real)
        except yaml.YAMLError as e:
            raise ValueError(f"{real}: not valid YAML: {e}") from None

    # ---- the set ------------------------------------------------------------------------

    def databases(self) -> Dict[str, Dict[str, List[str]]]:
        """``{system: {backend: versions}}`` (4.2): versions in plain string order."""
        with self._lock:
            if self._databases is None:
                out: Dict[str, Dict[str, List[str]]] = {}
                for system in self.system_names():
                    try:
                        data_dir = self.data_dir(system)
                        if data_dir is None:
                            continue
                        found = {}
                        for backend in BACKENDS:
                            versions = {v for v, d in self.version_dirs(data_dir, backend) if self.state(d).declared}
                            if versions:
                                found[backend] = sorted(versions)
                    except Exception as e:  # noqa: BLE001 - the spec drops the whole system, whatever failed
                        self.dropped[system] = str(e)
                        continue
                    if found:
                        out[system] = found
                self._databases = out
            return self._databases

    def versions(self, system: str, backend: str) -> List[str]:
        return list(self.databases().get(system, {}).get(backend, []))

    def version_dirs_of(self, system: str, backend: str, version: str) -> List[str]:
        """Every candidate dir of one version (any layout), in listing order."""
        data_dir = self.data_dir(system)
        if data_dir is None:
            return []
        return [d for v, d in self.version_dirs(data_dir, backend) if v == version]

    def marker_only(self, system: str, backend: str, version: str) -> bool:
        """No perf file in any non-partial dir of the version, and a reuse marker in one (4.4)."""
        saw_marker = False
        for d in self.version_dirs_of(system, backend, version):
            state = self.state(d)
            if state.partial:
                continue
            if state.has_perf:
                return False
            saw_marker = saw_marker or state.declares_reuse
        return saw_marker

    def latest(self, system: str, backend: str, include_marker_only: bool = False) -> Optional[str]:
        """The spec's latest version of (system, backend), or None (4.4). Ties
        keep the first in the string-sorted list."""
        candidates = [
            v for v in self.versions(system, backend) if include_marker_only or not self.marker_only(system, backend, v)
        ]
        if not candidates:
            return None
        return max(candidates, key=latest_key)
