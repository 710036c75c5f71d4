"""The Mamba-2 kernel table and its query (docs/spec/families_nemotron.md
section 3 and 1.6: the spec's ``load_mamba2_data``,
``PerfDatabase.query_mamba2`` and ``Mamba2Kernel._query_mamba2_table``).

Sources (3.1)
    ``mamba2_perf.parquet`` (family dir ``linear_attention`` or the legacy
    layout) through the usual union of `aicsql.spec.sources` (the shared
    layer applies; the manifest lends the conv kernels to trtllm only, so the
    cross-backend channel adds nothing on the shipped tree). Only trtllm
    databases have the file. No source file at all is not an error: the
    table is then "not loaded" and every query is the SOL.

Loader (3.1)
    ``[kernel][phase][model key][batch_size][seq_len]`` with the model key
    `Mamba2Shape` ``(d_model, d_state, d_conv, nheads, head_dim, n_groups,
    chunk_size)``, every field cast with ``int()`` / ``float()``, first row
    wins. **Decode rows are never stored**: the spec's nested default-dicts
    create a row's ``[batch_size]`` entry before the duplicate check, so
    every non-context row finds it "already present" and is skipped -- the
    generation part of the table is ``[kernel]["generation"][key][batch] ->
    {}`` and its latencies are unreachable. No kernel renames, no SOL clamp.

Query (3.2), every failure being the SOL of the *query*, source ``"sol"``:
    1. table not loaded or empty;
    2. kernel not in the table (both scan kernels, always);
    3. phase not under the kernel;
    4. model key absent: the **first** key (insertion order) of the same
       ``d_model`` -- no other field compared -- else the SOL;
    5. context: ``seq_len`` None or ``<= 0`` -> SOL; else the raw 2-axis
       `Grid` over (batch, seq_len), ``k_tail = 1``, the SOL of the query's
       kernel and dims at the grid points anchoring ragged brackets and
       util-holds; any grid miss -> SOL;
    6. generation: the batch curve keeps the entries holding a latency --
       none (the loader quirk) -- so the answer is always the SOL.

    The answer is ``(latency, interp path, source)``: source ``"silicon"``
    (util-holds included) or ``"sol"`` for every fallback, whose path is
    None. A Mamba-2 lookup never misses (never raises `PerfMiss`).

    How it differs from the GDN table (`gdn`): no decode rows, the
    ``d_model`` fallback takes the first key (not the nearest in heads), no
    kernel-name aliases or renames, other SOL formulas.

SOL (1.6)
    Memory only, on the raw ``gpu.mem_bw`` (no empirical factor, no
    constant latency), integer bytes and one true division, with the
    model-level (unsharded) dims: ``d_inner = nheads * head_dim``,
    ``conv_dim = d_inner + 2 * n_groups * d_state``, ``xt = b * s`` in
    context (``b`` in generation or without a sequence length):

    * conv kernels (``causal_conv1d_fn`` / ``causal_conv1d_update``):
      ``xt*conv_dim*(d_conv + 1)*2 + xt*conv_dim*2``;
    * scan kernels (``mamba_chunk_scan_combined`` / ``selective_state_update``,
      and any other name): ``xt*(d_inner + n_groups*d_state*2 + nheads)*2 +
      xt*d_inner*2``;

    ``value = bytes / mem_bw * 1000`` ms.
"""

from __future__ import annotations

import threading
from typing import Dict, NamedTuple, Optional, Tuple

from ..data import Database, DataTree
from ..sources import read_columns, table_sources
from .grid import GRID_UTIL_HOLD, Grid, GridMiss, insert_first_wins
from .system import StepSystem

__all__ = [
    "MAMBA2_FILE",
    "Mamba2Shape",
    "Mamba2Table",
    "CONV1D_FN",
    "CONV1D_UPDATE",
    "CHUNK_SCAN",
    "STATE_UPDATE",
    "CONV_KERNELS",
    "SOL_SOURCE",
    "SILICON_SOURCE",
    "LOOKUP_METHOD",
]

MAMBA2_FILE = "mamba2_perf.parquet"
LOOKUP_METHOD = "query_mamba2"  # also what the goldens record as the row's lookup_table
SILICON_SOURCE = "silicon"
SOL_SOURCE = "sol"

# The four kernels NEMOTRONH prices (context conv, context scan, decode conv, decode scan).
CONV1D_FN = "causal_conv1d_fn"
CHUNK_SCAN = "mamba_chunk_scan_combined"
CONV1D_UPDATE = "causal_conv1d_update"
STATE_UPDATE = "selective_state_update"
CONV_KERNELS = frozenset({CONV1D_FN, CONV1D_UPDATE})

_COLUMNS = ["kernel_source", "phase", "batch_size", "seq_len", "d_model", "d_state", "d_conv", "nheads", "head_dim",
            "n_groups", "chunk_size", "latency"]  # fmt: skip


class Mamba2Shape(NamedTuple):
    """A Mamba-2 layer's model-level (unsharded) dimensions: the table's model key."""

    d_model: int
    d_state: int
    d_conv: int
    nheads: int
    head_dim: int
    n_groups: int
    chunk_size: int


def _blank(v):
    """Parquet nulls read as ``""`` (the spec's loader), so an int key of a null raises ValueError."""
    return "" if v is None else v


class Mamba2Table:
    """A database's Mamba-2 table (source union, first-wins, context rows only)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, MAMBA2_FILE, shared_layer)
        # "Loaded" = some source file exists; an empty table answers like a missing one.
        self.loaded = bool(self.sources)
        self.root: Dict = {}
        for f in self.sources:
            cols = read_columns(f, _COLUMNS)
            for row in zip(*(cols[c] for c in _COLUMNS)):
                kernel, phase, b, s, d_model, d_state, d_conv, nheads, head_dim, n_groups, chunk, latency = (
                    _blank(v) for v in row
                )
                try:
                    key = Mamba2Shape(int(d_model), int(d_state), int(d_conv), int(nheads), int(head_dim),
                                      int(n_groups), int(chunk))  # fmt: skip
                    b, s, value = int(b), int(s), float(latency)
                except ValueError:
                    raise ValueError(f"{f.path}: a mamba2_perf row with a null or non-numeric key or latency") \
                        from None  # fmt: skip
                by_batch = self.root.setdefault(kernel, {}).setdefault(phase, {}).setdefault(key, {})
                if phase == "context":
                    insert_first_wins(by_batch, (b, s), value)
                else:
                    # The loader quirk (module doc): the batch entry exists, empty, and keeps no latency.
                    by_batch.setdefault(b, {})
        self._grids: Dict[Tuple, Grid] = {}
        self._lock = threading.Lock()

    # ---- 1.6 ------------------------------------------------------------------------

    def sol(self, phase: str, kernel: str, b, s, shape: Mamba2Shape) -> float:
        """The kernel's memory SOL (ms) at batch `b`, sequence `s` (None in generation)."""
        d_inner = shape.nheads * shape.head_dim
        conv_dim = d_inner + 2 * shape.n_groups * shape.d_state
        xt = b * s if phase == "context" and s else b
        if kernel in CONV_KERNELS:
            nbytes = xt * conv_dim * (shape.d_conv + 1) * 2 + xt * conv_dim * 2
        else:
            nbytes = xt * (d_inner + shape.n_groups * shape.d_state * 2 + shape.nheads) * 2 + xt * d_inner * 2
        return nbytes / self.system.mem_bw * 1000

    # ---- 3.2 ------------------------------------------------------------------------

    @staticmethod
    def lookup_kwargs(phase: str, kernel: str, b, s, shape: Mamba2Shape) -> dict:
        """The spec's ``query_mamba2`` keyword arguments, in the goldens' key order."""
        return {
            "phase": phase,
            "kernel_source": kernel,
            "batch_size": b,
            "seq_len": s,
            "d_model": shape.d_model,
            "d_state": shape.d_state,
            "d_conv": shape.d_conv,
            "nheads": shape.nheads,
            "head_dim": shape.head_dim,
            "n_groups": shape.n_groups,
            "chunk_size": shape.chunk_size,
        }

    def _curves(self, phase: str, kernel: str, shape: Mamba2Shape) -> Optional[Dict]:
        """The batch -> {seq -> latency} map that answers `shape` (3.2 steps 2-4), or None for the SOL."""
        by_key = self.root.get(kernel, {}).get(phase, {})
        if shape in by_key:
            return by_key[shape]
        for key in by_key:  # the first key of the same d_model, whatever its other dims
            if key.d_model == shape.d_model:
                return by_key[key]
        return None

    def query(self, phase: str, kernel: str, b, s, shape: Mamba2Shape) -> Tuple[float, Optional[str], str]:
        """(latency ms, interp path, source) of one Mamba-2 kernel call; never misses (module doc)."""
        shape = Mamba2Shape(*shape)

        def fallback() -> Tuple[float, Optional[str], str]:
            return self.sol(phase, kernel, b, s, shape), None, SOL_SOURCE

        if not self.loaded:
            return fallback()
        curves = self._curves(phase, kernel, shape)
        if not curves:  # None, or an empty branch (the grid would raise)
            return fallback()
        if phase != "context":
            # The batch curve keeps the entries holding a latency: the loader stored none.
            curve = {batch: v for batch, v in curves.items() if isinstance(v, float)}
            if not curve:
                return fallback()
            grid_key = (phase, kernel, shape, None, id(curves))
            coords: Tuple = (b,)
        else:
            if s is None or s <= 0:
                return fallback()
            curve = curves
            grid_key = (phase, kernel, shape, id(curves))
            coords = (b, s)
        with self._lock:
            grid = self._grids.get(grid_key)
            if grid is None:
                if phase == "context":
                    grid = Grid(curve, ("batch", "seq_len"),
                                lambda c: self.sol(phase, kernel, c[0], c[1], shape))  # fmt: skip
                else:  # pragma: no cover - unreachable with the spec's loader (module doc)
                    grid = Grid(curve, ("batch",), lambda c: self.sol(phase, kernel, c[0], None, shape))
                self._grids[grid_key] = grid
        try:
            latency, path = grid.lookup(coords)
        except GridMiss:
            return fallback()
        if path == GRID_UTIL_HOLD and not self.sol(phase, kernel, b, s, shape) > 0:
            return fallback()  # the spec's util-hold refuses a non-positive SOL at the query
        return latency, path, SILICON_SOURCE
