"""Context and generation attention tables and their queries (docs/spec 4.4,
5.3, 5.4, 7.1, 8.2, 8.3, 11.3).

Context attention
    ``[attn_dtype][kv_cache_dtype][kv_key][head_dim][window_size][num_heads][isl][batch]``
    with ``kv_key = 0`` when ``num_key_value_heads == num_heads``, else
    ``num_key_value_heads``. No SOL clamp. A query fixes the slice down to
    the window and resolves the Grid ``(num_heads, seq, batch)``, blending the
    seq axis in sqrt space; its SOL is 5.3 at prefix 0 with the slice's n_kv
    (``n`` itself when ``kv_key == 0``).

Generation attention
    ``[kv_cache_dtype][kv_key][head_dim][window_size][num_heads][batch][s]``
    with ``s = isl + step``; there is no attn_dtype level, so rows differing
    only in attn_dtype collapse first-wins. After loading, every entry is
    raised to its own SOL (5.4). A query is the mean of five raw Grid lookups
    ``(num_heads, batch, s_j)`` around s (8.3).

Encoder attention (Qwen3-VL's vision encoder; families_hybrid_vl_databases.md 3.6)
    ``[attn_dtype][head_dim][num_heads][isl][batch]``: non-causal MHA, no KV
    cache, no window, so no kv levels. No SOL clamp. A query fixes the
    (fmha, head_dim) slice and resolves the Grid ``(num_heads, seq, batch)``
    like the context table (sqrt on seq), with the non-causal SOL
    (`StepSystem.encoder_attention_sol`). Only bfloat16 FMHA has data (the
    spec refuses any other mode when it builds the op).

Rows are inserted in source priority order, file order inside a source;
the first row of a key wins (11.1).
"""

from __future__ import annotations

import threading
from typing import Dict, List, Optional, Tuple

from ..data import Database, DataTree
from ..sol import QuantMode
from .grid import Grid, GridMiss, insert_first_wins
from .miss import PerfMiss, lookup_call
from .quant import KV_QUANTS
from ..sources import read_columns, table_sources
from .system import StepSystem

__all__ = [
    "ContextAttentionTable",
    "GenerationAttentionTable",
    "EncoderAttentionTable",
    "CONTEXT_FILE",
    "GENERATION_FILE",
    "ENCODER_FILE",
]

CONTEXT_FILE = "context_attention_perf.parquet"
GENERATION_FILE = "generation_attention_perf.parquet"
ENCODER_FILE = "encoder_attention_perf.parquet"

_OPTIONAL = {"window_size": 0, "step": 0}


def _kv_key(n: int, n_kv: int) -> int:
    """The kv level's key: 0 for MHA (n_kv == n), else n_kv."""
    return 0 if n_kv == n else n_kv


class ContextAttentionTable:
    """A database's context-attention table (source union, first-wins)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, CONTEXT_FILE, shared_layer)
        self.root: Dict = {}
        for f in self.sources:
            cols = read_columns(
                f,
                ["attn_dtype", "kv_cache_dtype", "num_key_value_heads", "head_dim", "window_size", "num_heads", "isl",
                 "batch_size", "latency"],
                _OPTIONAL,
            )
            for attn, kv, n_kv, d, w, n, isl, b, latency in zip(
                cols["attn_dtype"], cols["kv_cache_dtype"], cols["num_key_value_heads"], cols["head_dim"],
                cols["window_size"], cols["num_heads"], cols["isl"], cols["batch_size"], cols["latency"],
            ):
                insert_first_wins(self.root, (attn, kv, _kv_key(n, n_kv), d, w, n, isl, b), latency)
        self._grids: Dict[Tuple, Optional[Grid]] = {}
        self._lock = threading.Lock()

    def fmha_modes_for_kv(self, kv: str) -> List[str]:
        """The attn_dtype values having rows under kv cache dtype `kv` (the FMHA guard, docs/spec 3.2)."""
        return [attn for attn, by_kv in self.root.items() if kv in by_kv]

    def _grid(self, q_f: QuantMode, q_kv: QuantMode, kv_key: int, d: int, w: int) -> Optional[Grid]:
        key = (q_f.name, q_kv.name, kv_key, d, w)
        with self._lock:
            if key in self._grids:
                return self._grids[key]
        node = self.root
        for k in key:
            node = node.get(k) if isinstance(node, dict) else None
            if node is None:
                break
        grid = None
        if node:
            system = self.system

            def sol(coords, kv_key=kv_key):
                n, s, b = coords
                return system.context_attention_sol(b, s, 0, n, kv_key if kv_key else n, d, w, q_kv, q_f)

            grid = Grid(node, ("num_heads", "seq_len", "batch"), sol, sqrt_axis=1)
        with self._lock:
            self._grids[key] = grid
        return grid

    @staticmethod
    def lookup_args(b, s, prefix, n, n_kv, q_kv: QuantMode, q_f: QuantMode, d: int, w: int):
        """The query as the spec's ``query_context_attention`` call (method args, kwargs)."""
        return [b, s, prefix, n, n_kv, q_kv.name, q_f.name], {"window_size": w, "head_size": d}

    def query(
        self, b: int, s: int, prefix: int, n: int, n_kv: int, q_kv: QuantMode, q_f: QuantMode, d: int, w: int = 0
    ) -> Tuple[float, str]:
        """(latency ms, interp path) of the FMHA itself (docs/spec 8.2 step 1)."""
        full = s + prefix
        grid = self._grid(q_f, q_kv, _kv_key(n, n_kv), d, w)
        try:
            if grid is None:
                raise GridMiss("no data for this (fmha, kv, n_kv, head_dim, window) slice")
            value, path = grid.lookup((n, full, b))
        except GridMiss as e:
            args, kwargs = self.lookup_args(b, s, prefix, n, n_kv, q_kv, q_f, d, w)
            raise PerfMiss(
                "context_attention_perf",
                lookup_call("query_context_attention", args, kwargs),
                str(e) or "no data to anchor the query",
            ) from None
        return value * ((full**2 - prefix**2) / full**2), path


class GenerationAttentionTable:
    """A database's generation-attention table (source union, first-wins, SOL-raised)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, GENERATION_FILE, shared_layer)
        self.root: Dict = {}
        for f in self.sources:
            cols = read_columns(
                f,
                ["kv_cache_dtype", "num_key_value_heads", "head_dim", "window_size", "num_heads", "batch_size", "isl",
                 "step", "latency"],
                _OPTIONAL,
            )
            for kv, n_kv, d, w, n, b, isl, step, latency in zip(
                cols["kv_cache_dtype"], cols["num_key_value_heads"], cols["head_dim"], cols["window_size"],
                cols["num_heads"], cols["batch_size"], cols["isl"], cols["step"], cols["latency"],
            ):
                insert_first_wins(self.root, (kv, _kv_key(n, n_kv), d, w, n, b, isl + step), latency)
        self._raise_to_sol()
        self._grids: Dict[Tuple, Optional[Grid]] = {}
        self._lock = threading.Lock()

    def _raise_to_sol(self) -> None:
        """Every entry is raised to the generation SOL of its own coordinates."""
        system = self.system
        for kv, by_key in self.root.items():
            q_kv = KV_QUANTS.get(kv)
            if q_kv is None:
                continue  # a kv dtype the spec has no mode for can never be queried
            for kv_key, by_d in by_key.items():
                for d, by_w in by_d.items():
                    for w, by_n in by_w.items():
                        for n, by_b in by_n.items():
                            n_kv = kv_key if kv_key else n
                            for b, by_s in by_b.items():
                                for s, latency in by_s.items():
                                    sol = system.generation_attention_sol(b, s, n, n_kv, d, w, q_kv)
                                    if latency < sol:
                                        by_s[s] = sol

    def _grid(self, q_kv: QuantMode, kv_key: int, d: int, w: int) -> Optional[Grid]:
        key = (q_kv.name, kv_key, d, w)
        with self._lock:
            if key in self._grids:
                return self._grids[key]
        node = self.root
        for k in key:
            node = node.get(k) if isinstance(node, dict) else None
            if node is None:
                break
        grid = None
        if node:
            system = self.system

            def sol(coords):
                n, b, s = coords
                return system.generation_attention_sol(b, s, n, kv_key if kv_key else n, d, w, q_kv)

            grid = Grid(node, ("num_heads", "batch", "seq_len"), sol)
        with self._lock:
            self._grids[key] = grid
        return grid

    @staticmethod
    def lookup_args(b, s, n, n_kv, q_kv: QuantMode, d: int, w: int):
        return [b, s, n, n_kv, q_kv.name], {"window_size": w, "head_size": d}

    @staticmethod
    def sample_points(s: int) -> List[int]:
        """The five sequence lengths averaged for decode step s (docs/spec 8.3, 11.11)."""
        s_min = max(1, int(s * 0.9))
        s_max = max(s_min, int(s * 1.1))
        return [s_min + (s_max - s_min) * j // 4 for j in range(5)]

    def query(self, b: int, s: int, n: int, n_kv: int, q_kv: QuantMode, d: int, w: int = 0) -> Tuple[float, str]:
        """(latency ms, interp path): the mean of the five Grid lookups; the
        path is the distinct paths of the five, sorted, joined by ','."""
        grid = self._grid(q_kv, _kv_key(n, n_kv), d, w)
        values = []
        paths = set()
        try:
            if grid is None:
                raise GridMiss("no data for this (kv, n_kv, head_dim, window) slice")
            for s_j in self.sample_points(s):
                value, path = grid.lookup((n, b, s_j))
                values.append(value)
                paths.add(path)
        except GridMiss as e:
            args, kwargs = self.lookup_args(b, s, n, n_kv, q_kv, d, w)
            raise PerfMiss(
                "generation_attention_perf",
                lookup_call("query_generation_attention", args, kwargs),
                str(e) or "no data to anchor the query",
            ) from None
        total = 0.0
        for value in values:  # a plain left-to-right sum
            total += value
        return total / 5, ",".join(sorted(paths))


class EncoderAttentionTable:
    """A database's encoder-attention table (source union, first-wins, no SOL clamp)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, ENCODER_FILE, shared_layer)
        self.root: Dict = {}
        for f in self.sources:
            cols = read_columns(f, ["attn_dtype", "head_dim", "num_heads", "isl", "batch_size", "latency"])
            for attn, d, n, isl, b, latency in zip(
                cols["attn_dtype"], cols["head_dim"], cols["num_heads"], cols["isl"], cols["batch_size"],
                cols["latency"],
            ):  # fmt: skip
                insert_first_wins(self.root, (attn, d, n, isl, b), latency)
        self._grids: Dict[Tuple, Optional[Grid]] = {}
        self._lock = threading.Lock()

    def _grid(self, q_f: QuantMode, d: int) -> Optional[Grid]:
        key = (q_f.name, d)
        with self._lock:
            if key in self._grids:
                return self._grids[key]
        node = self.root.get(q_f.name)
        node = node.get(d) if node else None
        grid = None
        if node:
            system = self.system

            def sol(coords):
                n, s, b = coords
                return system.encoder_attention_sol(b, s, n, d, q_f)

            grid = Grid(node, ("num_heads", "seq_len", "batch"), sol, sqrt_axis=1)
        with self._lock:
            self._grids[key] = grid
        return grid

    @staticmethod
    def lookup_args(b, s, n, d: int, q_f: QuantMode):
        """The query as the spec's ``query_encoder_attention`` call (method args, kwargs)."""
        return [b, s, n, d, q_f.name], {}

    def query(self, b: int, s: int, n: int, d: int, q_f: QuantMode) -> Tuple[float, str]:
        """(latency ms, interp path) of ``b`` images of ``s`` patches each
        attending to themselves over ``n`` heads of size ``d``."""
        grid = self._grid(q_f, d)
        try:
            if grid is None:
                raise GridMiss("no data for this (fmha, head_dim) slice")
            return grid.lookup((n, s, b))
        except GridMiss as e:
            args, kwargs = self.lookup_args(b, s, n, d, q_f)
            raise PerfMiss(
                "encoder_attention_perf",
                lookup_call("query_encoder_attention", args, kwargs),
                str(e) or "no data to anchor the query",
            ) from None
