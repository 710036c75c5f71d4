"""The gated-delta-net (GDN) kernel table and its query
(docs/spec/families_qwen35_gemma4.md section 2: the spec's ``load_gdn_data``,
``PerfDatabase.query_gdn`` and ``GDNKernel._query_gdn_table``).

Sources (2.1)
    ``gdn_perf.parquet`` (family dir ``linear_attention`` or the legacy
    layout) through the usual union of `aicsql.spec.sources`, the
    cross-backend channel included: the manifest lends other frameworks'
    rows of the shared kernel sources, filtered on the row's *raw*
    ``kernel_source`` (before the rename below). No source file at all is
    not an error: the table is then "not loaded" and every query is the SOL.

Loader (2.2)
    ``[kernel][phase][shape][batch_size][seq_len]`` for ``phase ==
    "context"``, ``[kernel][phase][shape][batch_size]`` for any other phase
    (the decode rows' ``seq_len`` is not a key); ``shape = (d_model,
    num_k_heads, head_k_dim, num_v_heads, head_v_dim, d_conv)``; first wins
    across and within sources. The two decode names
    ``fused_recurrent_gated_delta_rule(_packed_decode)`` are filed under
    ``fused_sigmoid_gating_delta_rule_update``; every other name is kept. No
    dtype, no tp key, no SOL clamp.

Query (2.3)
    1. table not loaded -> SOL;
    2. the logical kernel's ``[phase]`` map; if the query's shape is not in
       it: on the database ``vllm`` / ``"0.24.0"`` exactly, the alias kernels
       of `VLLM_ALIASES` that hold the exact shape (one -> use it, two or
       more -> SOL); otherwise the same-``d_model`` key of the logical kernel
       nearest in ``num_v_heads`` (ties: first inserted), none -> SOL;
    3. context: ``seq_len`` None or ``<= 0`` -> SOL, else the raw 2-axis
       `Grid` over (batch, seq_len); generation: the raw 1-axis Grid over
       batch. ``k_tail = 1``; the SOL of 2.4 at the grid points (with the
       *query's* kernel and shape) anchors ragged brackets and util-holds;
    4. any grid miss, or a util-hold whose query SOL is not positive -> SOL.

    The answer is ``(latency, interp path, source)``: source ``"silicon"``
    (util-holds included) or ``"sol"`` for every fallback, whose path is
    None. A GDN lookup never misses (never raises `PerfMiss`).

SOL (2.4)
    Memory only, on the raw ``gpu.mem_bw`` (no empirical factor or constant),
    integer arithmetic until the division: ``(read + written) / mem_bw *
    1000`` ms with the bytes of `GDNTable.sol`.
"""

from __future__ import annotations

import threading
from typing import Dict, NamedTuple, Optional, Tuple

from ..data import Database, DataTree
from ..sources import read_columns, table_sources
from .grid import GRID_UTIL_HOLD, Grid, GridMiss, insert_first_wins
from .system import StepSystem

__all__ = [
    "GDN_FILE",
    "GDNShape",
    "GDNTable",
    "CONV1D_FN",
    "CONV1D_UPDATE",
    "CHUNK_RULE",
    "DECODE_RULE",
    "KERNEL_RENAMES",
    "VLLM_ALIASES",
    "VLLM_ALIAS_DATABASE",
    "SOL_SOURCE",
    "SILICON_SOURCE",
    "LOOKUP_METHOD",
]

GDN_FILE = "gdn_perf.parquet"
LOOKUP_METHOD = "query_gdn"  # also what the goldens record as the row's lookup_table
SILICON_SOURCE = "silicon"
SOL_SOURCE = "sol"

# The four kernels QWEN35 prices (context conv, context scan, decode conv, decode recurrence).
CONV1D_FN = "causal_conv1d_fn"
CHUNK_RULE = "chunk_gated_delta_rule"
CONV1D_UPDATE = "causal_conv1d_update"
DECODE_RULE = "fused_sigmoid_gating_delta_rule_update"

# 2.2 step 1: the loader files both decode names under the logical decode kernel.
KERNEL_RENAMES = {
    "fused_recurrent_gated_delta_rule": DECODE_RULE,
    "fused_recurrent_gated_delta_rule_packed_decode": DECODE_RULE,
}

# 2.3 step 3: alias kernels tried for a logical kernel lacking the exact shape,
# only on this exact (backend, version) -- a string comparison (gb300 vllm
# 0.27.0 does not get it). The generation entry is dead: the loader already
# renamed those rows.
VLLM_ALIAS_DATABASE = ("vllm", "0.24.0")
VLLM_ALIASES: Dict[Tuple[str, str], Tuple[str, ...]] = {
    ("context", CHUNK_RULE): (
        "chunk_gated_delta_rule_flashinfer",
        "chunk_gated_delta_rule_triton",
        "chunk_gated_delta_rule_cutedsl",
    ),
    ("generation", DECODE_RULE): ("fused_recurrent_gated_delta_rule_packed_decode",),
}

_COLUMNS = ["kernel_source", "phase", "batch_size", "seq_len", "d_model", "num_k_heads", "head_k_dim",
            "num_v_heads", "head_v_dim", "d_conv", "latency"]  # fmt: skip


class GDNShape(NamedTuple):
    """A GDN layer's (unsharded) model shape: the table's model key."""

    d_model: int
    num_k_heads: int
    head_k_dim: int
    num_v_heads: int
    head_v_dim: int
    d_conv: int


def _blank(v):
    """Parquet nulls read as ``""`` (the spec's loader), so an int key of a null raises ValueError."""
    return "" if v is None else v


class GDNTable:
    """A database's GDN table (source union with the cross-backend channel, first-wins)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, GDN_FILE, shared_layer)
        # "Loaded" = some source file exists (its rows may all be filtered out).
        self.loaded = bool(self.sources)
        self.root: Dict = {}
        for f in self.sources:
            cols = read_columns(f, _COLUMNS)
            for row in zip(*(cols[c] for c in _COLUMNS)):
                source, phase, b, s, d_model, nk, hk, nv, hv, d_conv, latency = (_blank(v) for v in row)
                kernel = KERNEL_RENAMES.get(source, source)
                try:
                    shape = GDNShape(int(d_model), int(nk), int(hk), int(nv), int(hv), int(d_conv))
                    if phase == "context":
                        keys = (kernel, phase, shape, int(b), int(s))
                    else:
                        keys = (kernel, phase, shape, int(b))
                    value = float(latency)
                except ValueError:
                    raise ValueError(f"{f.path}: a gdn_perf row with a null or non-numeric key or latency") from None
                insert_first_wins(self.root, keys, value)
        self._grids: Dict[Tuple, Grid] = {}
        self._lock = threading.Lock()

    # ---- 2.4 ------------------------------------------------------------------------

    def sol(self, phase: str, kernel: str, b, s, shape: GDNShape) -> float:
        """The kernel's memory SOL (ms) at batch `b`, sequence `s` (None in generation)."""
        d_model, nk, hk, nv, hv, d_conv = shape
        x = b * s if phase == "context" and s else b
        if kernel in (CONV1D_FN, CONV1D_UPDATE):
            channels = nk * hk + nv * hv
            read = x * channels * (d_conv + 1) * 2
            written = x * channels * 2
        elif kernel == CHUNK_RULE:
            state = nv * hk * hv
            chunk_states = (s // 64) * state * 2 * b if s else 0
            read = x * (nk * hk + nv * hv) * 2 + state * 2 * b + chunk_states
            written = x * nv * hv * 2 + state * 2 * b + chunk_states
        elif kernel == DECODE_RULE:
            state = nv * hk * hv
            read = x * (nk * hk + nv * hv) * 2 + state * 2 * b
            written = x * nv * hv * 2 + state * 2 * b
        else:
            read = x * d_model * 2
            written = x * d_model * 2
        return (read + written) / self.system.mem_bw * 1000

    # ---- 2.3 ------------------------------------------------------------------------

    @staticmethod
    def lookup_kwargs(phase: str, kernel: str, b, s, shape: GDNShape) -> dict:
        """The spec's ``query_gdn`` keyword arguments, in the goldens' key order."""
        return {
            "phase": phase,
            "kernel_source": kernel,
            "batch_size": b,
            "seq_len": s,
            "d_model": shape.d_model,
            "num_k_heads": shape.num_k_heads,
            "head_k_dim": shape.head_k_dim,
            "num_v_heads": shape.num_v_heads,
            "head_v_dim": shape.head_v_dim,
            "d_conv": shape.d_conv,
        }

    def _curves(self, phase: str, kernel: str, shape: GDNShape) -> Optional[Dict]:
        """The (batch[, seq]) -> latency map that answers `shape` (2.3 steps 2-4), or None for the SOL."""
        by_key = self.root.get(kernel, {}).get(phase, {})
        if shape in by_key:
            return by_key[shape]
        if (self.db.backend, self.db.version) == VLLM_ALIAS_DATABASE:
            exact = []
            for alias in VLLM_ALIASES.get((phase, kernel), ()):
                alias_by_key = self.root.get(alias, {}).get(phase)
                if alias_by_key and shape in alias_by_key:
                    exact.append(alias_by_key)
            if len(exact) == 1:
                return exact[0][shape]
            if exact:
                return None  # ambiguous aliases: the SOL
        # Same d_model within the logical kernel only, nearest num_v_heads
        # (num_k_heads, head dims and d_conv are not compared); ties: first inserted.
        same = [key for key in by_key if key.d_model == shape.d_model]
        if not same:
            return None
        return by_key[min(same, key=lambda key: abs(key.num_v_heads - shape.num_v_heads))]

    def query(self, phase: str, kernel: str, b, s, shape: GDNShape) -> Tuple[float, Optional[str], str]:
        """(latency ms, interp path, source) of one GDN kernel call; never misses (module doc)."""
        shape = GDNShape(*shape)

        def fallback() -> Tuple[float, Optional[str], str]:
            return self.sol(phase, kernel, b, s, shape), None, SOL_SOURCE

        if not self.loaded:
            return fallback()
        curves = self._curves(phase, kernel, shape)
        if not curves:  # None, or an empty branch (the grid would raise)
            return fallback()
        context = phase == "context"
        if context and (s is None or s <= 0):
            return fallback()
        key = (phase, kernel, shape, s if not context else None, id(curves))
        with self._lock:
            grid = self._grids.get(key)
            if grid is None:
                if context:
                    grid = Grid(curves, ("batch", "seq_len"),
                                lambda coords: self.sol(phase, kernel, coords[0], coords[1], shape))  # fmt: skip
                else:
                    grid = Grid(curves, ("batch",), lambda coords: self.sol(phase, kernel, coords[0], s, shape))
                self._grids[key] = grid
        try:
            latency, path = grid.lookup((b, s) if context else (b,))
        except GridMiss:
            return fallback()
        if path == GRID_UTIL_HOLD and not self.sol(phase, kernel, b, s, shape) > 0:
            return fallback()  # the spec's util-hold refuses a non-positive SOL at the query
        return latency, path, SILICON_SOURCE
