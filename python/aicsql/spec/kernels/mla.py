"""The MLA tables of DeepSeek / Kimi and their lookups
(docs/spec/families_mla_gptoss_fp8static.md 7.1 - 7.3, 9 items 1, 2, 11, 12).

| table (file stem) | nesting (outer -> inner) | duplicates |
|---|---|---|
| ``context_mla_perf`` | ``[mla_dtype (fmha)][kv][num_heads][isl][batch]`` | first wins |
| ``generation_mla_perf`` | ``[kv][num_heads][batch][isl + step]`` (mla_dtype ignored) | first wins |
| ``mla_bmm_perf`` | ``[bmm_dtype][op_name][num_heads][num_tokens]`` | first wins |
| ``mla_context_module_perf`` | ``[mla_dtype][kv][gemm_type][num_heads][isl][batch]`` | **last wins** |
| ``mla_generation_module_perf`` | ``[kv][gemm_type][num_heads][batch][isl + step]`` | **last wins** |

A granular table without a ``num_heads`` column reads ``128 // tp_size``.
The module tables are loaded by plain assignment, so with the source union
the *lowest*-priority source holding a key supplies its value, while the
key keeps the position of its first appearance (a Python dict overwritten in
place does exactly that). The module tables' and ``mla_bmm``'s sources include
the cross-backend channel (`aicsql.spec.sources`). No table is SOL-clamped.

Lookups are Grid resolutions (`grid.Grid`, ES 7.1) with the SOLs of
`system.StepSystem` (7.3): context tables ``(num_heads, s + prefix, batch)``
with sqrt on seq, times ``(full^2 - prefix^2) / full^2``; generation tables a
single raw lookup ``(num_heads, batch, s)``; BMM a raw 1-axis grid over
``num_tokens`` in the requested quant's slice, or the bfloat16 one when the
requested quant is not a key (its SOL keeps the requested quant).
"""

from __future__ import annotations

import threading
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..data import Database, DataTree
from ..sol import QuantMode
from ..sources import primary_path, read_columns, table_sources
from .grid import Grid, GridMiss, insert_first_wins
from .miss import PerfMiss, lookup_call
from .system import StepSystem

__all__ = [
    "CONTEXT_MLA_FILE",
    "GENERATION_MLA_FILE",
    "MLA_BMM_FILE",
    "CONTEXT_MODULE_FILE",
    "GENERATION_MODULE_FILE",
    "ContextMLATable",
    "GenerationMLATable",
    "MLABmmTable",
    "ContextMLAModuleTable",
    "GenerationMLAModuleTable",
]

CONTEXT_MLA_FILE = "context_mla_perf.parquet"
GENERATION_MLA_FILE = "generation_mla_perf.parquet"
MLA_BMM_FILE = "mla_bmm_perf.parquet"
CONTEXT_MODULE_FILE = "mla_context_module_perf.parquet"
GENERATION_MODULE_FILE = "mla_generation_module_perf.parquet"


def _insert_last_wins(root: dict, keys: Sequence, value) -> None:
    node = root
    for k in keys[:-1]:
        child = node.get(k)
        if child is None:
            child = node[k] = {}
        node = child
    node[keys[-1]] = value


def _heads(cols: Dict[str, list], path: str) -> list:
    """``num_heads``, or ``128 // tp_size`` in files without it (the granular tables' rule)."""
    heads = cols["num_heads"]
    if all(n is not None for n in heads):
        return heads
    if any(tp is None for n, tp in zip(heads, cols["tp_size"]) if n is None):
        raise ValueError(f"{path}: rows without num_heads need tp_size (the MLA head count is 128 // tp_size)")
    return [n if n is not None else 128 // int(tp) for n, tp in zip(heads, cols["tp_size"])]


class _Table:
    """What the five tables share: sources, the not-loaded miss, grids per slice."""

    FILE = ""
    METHOD = ""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.tree = tree
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, self.FILE, shared_layer)
        self.root: Dict = {}
        self._grids: Dict[Tuple, Optional[Grid]] = {}
        self._lock = threading.Lock()

    @property
    def stem(self) -> str:
        return self.FILE[: -len(".parquet")]

    def _miss(self, args, kwargs, reason: str) -> PerfMiss:
        return PerfMiss(self.stem, lookup_call(self.METHOD, args, kwargs), reason)

    def _require_loaded(self, args, kwargs) -> None:
        if not self.sources:
            raise self._miss(args, kwargs, (
                f"Error loading silicon data for op PerfDataFilename.{self.stem.replace('_perf', '')}: File does not "
                f"exist at {primary_path(self.tree, self.db, self.FILE)}. This combination of model, system, "
                "backend, and backend version is not supported by AIC in SILICON mode."))  # fmt: skip

    def _grid(self, key: Tuple, axes: Tuple[str, ...], sol: Callable, sqrt_axis: Optional[int], args, kwargs) -> Grid:
        """The grid of the slice `key` (the spec's require_data_slice: a missing
        or empty node is a miss naming the keys walked so far)."""
        with self._lock:
            if key in self._grids:
                grid = self._grids[key]
            else:
                node = self.root
                for k in key:
                    node = node.get(k) if isinstance(node, dict) else None
                    if not node:
                        break
                grid = self._grids[key] = Grid(node, axes, sol, sqrt_axis=sqrt_axis) if node else None
        if grid is None:
            walked: List = []
            node = self.root
            for k in key:
                walked.append(k)
                node = node.get(k) if isinstance(node, dict) else None
                if not node:
                    break
            raise self._miss(args, kwargs, "Missing silicon data for the requested lookup; requested slice "
                             f"{tuple(walked)!r} is not available.")  # fmt: skip
        return grid

    def _lookup(self, grid: Grid, coords: Tuple, args, kwargs) -> Tuple[float, str]:
        try:
            return grid.lookup(coords)
        except GridMiss:
            query = dict(zip(grid.axes, coords))
            raise self._miss(args, kwargs, f"perf_interp: no data to anchor query {query!r}") from None

    def top_keys(self) -> List[str]:
        return list(self.root)


class ContextMLATable(_Table):
    """``context_mla_perf``: granular context MLA (first wins)."""

    FILE = CONTEXT_MLA_FILE
    METHOD = "query_context_mla"

    def __init__(self, tree, db, shared_layer, system):
        super().__init__(tree, db, shared_layer, system)
        for f in self.sources:
            cols = read_columns(f, ["mla_dtype", "kv_cache_dtype", "num_heads", "tp_size", "isl", "batch_size",
                                    "latency"], {"num_heads": None, "tp_size": None})  # fmt: skip
            for fmha, kv, n, isl, b, latency in zip(cols["mla_dtype"], cols["kv_cache_dtype"], _heads(cols, f.path),
                                                    cols["isl"], cols["batch_size"], cols["latency"]):  # fmt: skip
                insert_first_wins(self.root, (fmha, kv, n, isl, b), latency)

    def fmha_modes_for_kv(self, kv: str) -> List[str]:
        return [fmha for fmha, by_kv in self.root.items() if kv in by_kv]

    @staticmethod
    def lookup_args(b, s, prefix, n, q_kv: QuantMode, q_f: QuantMode):
        return [], {"b": b, "s": s, "prefix": prefix, "num_heads": n, "kvcache_quant_mode": q_kv.name,
                    "fmha_quant_mode": q_f.name}  # fmt: skip

    def query(self, b: int, s: int, prefix: int, n: int, q_kv: QuantMode, q_f: QuantMode) -> Tuple[float, str]:
        args, kwargs = self.lookup_args(b, s, prefix, n, q_kv, q_f)
        self._require_loaded(args, kwargs)
        system = self.system
        grid = self._grid((q_f.name, q_kv.name), ("num_heads", "seq_len", "batch"),
                          lambda c: system.context_mla_sol(c[2], c[1], 0, c[0], q_kv, q_f), 1, args, kwargs)  # fmt: skip
        full = s + prefix
        value, path = self._lookup(grid, (n, full, b), args, kwargs)
        return value * ((full * full - prefix * prefix) / (full * full)), path


class GenerationMLATable(_Table):
    """``generation_mla_perf``: granular decode MLA (first wins, no mla_dtype level)."""

    FILE = GENERATION_MLA_FILE
    METHOD = "query_generation_mla"

    def __init__(self, tree, db, shared_layer, system):
        super().__init__(tree, db, shared_layer, system)
        for f in self.sources:
            cols = read_columns(f, ["kv_cache_dtype", "num_heads", "tp_size", "batch_size", "isl", "step", "latency"],
                                {"num_heads": None, "tp_size": None})  # fmt: skip
            for kv, n, b, isl, step, latency in zip(cols["kv_cache_dtype"], _heads(cols, f.path), cols["batch_size"],
                                                    cols["isl"], cols["step"], cols["latency"]):  # fmt: skip
                insert_first_wins(self.root, (kv, n, b, isl + step), latency)

    @staticmethod
    def lookup_args(b, s, n, q_kv: QuantMode):
        return [b, s, n, q_kv.name], {}

    def query(self, b: int, s: int, n: int, q_kv: QuantMode) -> Tuple[float, str]:
        args, kwargs = self.lookup_args(b, s, n, q_kv)
        self._require_loaded(args, kwargs)
        system = self.system
        grid = self._grid((q_kv.name,), ("num_heads", "batch", "seq_len"),
                          lambda c: system.generation_mla_sol(c[1], c[2], c[0], q_kv), None, args, kwargs)  # fmt: skip
        return self._lookup(grid, (n, b, s), args, kwargs)


class MLABmmTable(_Table):
    """``mla_bmm_perf``: the decode BMMs before and after the MLA kernel (first wins)."""

    FILE = MLA_BMM_FILE
    METHOD = "query_mla_bmm"

    def __init__(self, tree, db, shared_layer, system):
        super().__init__(tree, db, shared_layer, system)
        for f in self.sources:
            cols = read_columns(f, ["bmm_dtype", "op_name", "num_heads", "num_tokens", "latency"])
            for q, op, n, t, latency in zip(cols["bmm_dtype"], cols["op_name"], cols["num_heads"], cols["num_tokens"],
                                            cols["latency"]):  # fmt: skip
                insert_first_wins(self.root, (q, op, n, t), latency)

    @staticmethod
    def lookup_args(tokens, n, q: QuantMode, pre: bool):
        return [tokens, n, q.name, pre], {}

    def query(self, tokens: int, n: int, q: QuantMode, pre: bool) -> Tuple[float, str]:
        args, kwargs = self.lookup_args(tokens, n, q, pre)
        self._require_loaded(args, kwargs)
        table_q = q.name if q.name in self.root else "bfloat16"
        system = self.system
        grid = self._grid((table_q, "mla_gen_pre" if pre else "mla_gen_post", n), ("num_tokens",),
                          lambda c: system.mla_bmm_sol(c[0], n, q), None, args, kwargs)  # fmt: skip
        return self._lookup(grid, (tokens,), args, kwargs)


class _ModuleTable(_Table):
    """A module table, loaded **last-wins** (module doc)."""

    COLUMNS: Tuple[str, ...] = ()

    def __init__(self, tree, db, shared_layer, system):
        super().__init__(tree, db, shared_layer, system)
        for f in self.sources:
            cols = read_columns(f, list(self.COLUMNS))
            for row in zip(*(cols[c] for c in self.COLUMNS)):
                self._insert(row)

    def _insert(self, row: Iterable) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class ContextMLAModuleTable(_ModuleTable):
    """``mla_context_module_perf``: the whole context MLA block (q/kv projections, attention, output)."""

    FILE = CONTEXT_MODULE_FILE
    METHOD = "query_context_mla_module"
    COLUMNS = ("mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads", "isl", "batch_size", "latency")

    def _insert(self, row):
        fmha, kv, gemm, n, isl, b, latency = row
        _insert_last_wins(self.root, (fmha, kv, gemm, n, isl, b), latency)

    def fmha_modes_for_kv(self, kv: str) -> List[str]:
        return [fmha for fmha, by_kv in self.root.items() if kv in by_kv]

    @staticmethod
    def lookup_args(b, s, prefix, n, q_kv: QuantMode, q_f: QuantMode, q_gemm: QuantMode):
        return [], {"b": b, "s": s, "prefix": prefix, "num_heads": n, "kvcache_quant_mode": q_kv.name,
                    "fmha_quant_mode": q_f.name, "gemm_quant_mode": q_gemm.name}  # fmt: skip

    def query(self, b, s, prefix, n, q_kv: QuantMode, q_f: QuantMode, q_gemm: QuantMode) -> Tuple[float, str]:
        args, kwargs = self.lookup_args(b, s, prefix, n, q_kv, q_f, q_gemm)
        self._require_loaded(args, kwargs)
        system = self.system
        grid = self._grid((q_f.name, q_kv.name, q_gemm.name), ("num_heads", "seq_len", "batch"),
                          lambda c: system.context_mla_sol(c[2], c[1], 0, c[0], q_kv, q_f), 1, args, kwargs)  # fmt: skip
        full = s + prefix
        value, path = self._lookup(grid, (n, full, b), args, kwargs)
        return value * ((full * full - prefix * prefix) / (full * full)), path


class GenerationMLAModuleTable(_ModuleTable):
    """``mla_generation_module_perf``: the whole decode MLA block (BMMs and attention)."""

    FILE = GENERATION_MODULE_FILE
    METHOD = "query_generation_mla_module"
    COLUMNS = ("kv_cache_dtype", "gemm_type", "num_heads", "batch_size", "isl", "step", "latency")

    def _insert(self, row):
        kv, gemm, n, b, isl, step, latency = row
        _insert_last_wins(self.root, (kv, gemm, n, b, isl + step), latency)

    def kv_modes(self) -> List[str]:
        return list(self.root)

    @staticmethod
    def lookup_args(b, s, n, q_kv: QuantMode, q_gemm: QuantMode):
        return [], {"b": b, "s": s, "num_heads": n, "kv_cache_dtype": q_kv.name, "gemm_quant_mode": q_gemm.name}

    def query(self, b: int, s: int, n: int, q_kv: QuantMode, q_gemm: QuantMode) -> Tuple[float, str]:
        args, kwargs = self.lookup_args(b, s, n, q_kv, q_gemm)
        self._require_loaded(args, kwargs)
        system = self.system
        grid = self._grid((q_kv.name, q_gemm.name), ("num_heads", "batch", "seq_len"),
                          lambda c: system.generation_mla_module_sol(c[1], c[2], c[0], q_kv, q_gemm), None, args,
                          kwargs)  # fmt: skip
        return self._lookup(grid, (n, b, s), args, kwargs)
