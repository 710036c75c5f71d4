"""The activation-quantisation overhead tables an fp8_static GEMM subtracts
(docs/spec/families_mla_gptoss_fp8static.md 6, 7.4, 9 item 10).

``computescale_perf`` and ``scale_matrix_perf``: ``[quant_dtype][m][k] ->
latency``, first row wins, source union, no SOL clamp. A lookup in quant
``fp8_static`` reads the ``fp8`` slice (any other mode reads itself):

1. clamp ``m`` into ``[min m, max m]`` and ``k`` into ``[k_min, k_max]``, the
   smallest / largest k key over **all** m rows;
2. resolve the raw 2-axis Grid ``(m, k)`` at the clamped point, SOL
   ``2*m*k / mem_bw`` (compute scale) or ``3*m*k / mem_bw`` (scale matrix);
3. compute scale: that value, **held flat** outside the range; scale matrix:
   outside the range multiplied by ``SOL(m, k) / SOL(m_c, k_c)``.
"""

from __future__ import annotations

import threading
from typing import Dict, Tuple

from ..data import Database, DataTree
from ..sol import QuantMode
from ..sources import primary_path, read_columns, table_sources
from .grid import Grid, GridMiss, insert_first_wins
from .miss import PerfMiss, lookup_call
from .system import StepSystem

__all__ = ["COMPUTE_SCALE_FILE", "SCALE_MATRIX_FILE", "ComputeScaleTable", "ScaleMatrixTable"]

COMPUTE_SCALE_FILE = "computescale_perf.parquet"
SCALE_MATRIX_FILE = "scale_matrix_perf.parquet"


class _ScaleTable:
    FILE = ""
    METHOD = ""
    KIND = ""  # the spec's name of the table in its messages
    ENUM = ""  # the spec's PerfDataFilename member

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.tree = tree
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, self.FILE, shared_layer)
        self.root: Dict = {}
        for f in self.sources:
            cols = read_columns(f, ["quant_dtype", "m", "k", "latency"])
            for q, m, k, latency in zip(cols["quant_dtype"], cols["m"], cols["k"], cols["latency"]):
                insert_first_wins(self.root, (q, m, k), latency)
        self._slices: Dict[str, Tuple[Grid, int, int, int, int]] = {}
        self._lock = threading.Lock()

    def sol(self, m, k) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _slice(self, q: QuantMode, lookup) -> Tuple[Grid, int, int, int, int]:
        """(grid, m_min, m_max, k_min, k_max) of the quant's slice, or the spec's miss."""
        stem = self.FILE[: -len(".parquet")]
        if not self.sources:
            raise PerfMiss(stem, lookup, (
                f"Error loading silicon data for op PerfDataFilename.{self.ENUM}: File does not exist at "
                f"{primary_path(self.tree, self.db, self.FILE)}. This combination of model, system, backend, and "
                "backend version is not supported by AIC in SILICON mode."))  # fmt: skip
        key = "fp8" if q.name == "fp8_static" else q.name
        with self._lock:
            hit = self._slices.get(key)
            if hit is None and key in self.root:
                table = self.root[key]
                ms = sorted(table)
                rows = [row for row in table.values() if row]
                hit = self._slices[key] = (
                    Grid(table, ("m", "k"), lambda c: self.sol(c[0], c[1])),
                    ms[0], ms[-1], min(min(r) for r in rows), max(max(r) for r in rows),
                )  # fmt: skip
        if hit is None:
            db = self.db
            raise PerfMiss(stem, lookup, (
                f"{self.KIND} perf data not available for requested quant mode. system='{db.system}', "
                f"backend='{db.backend}', version='{db.version}', quant_mode='{q.name}'. Supported modes: "
                f"{sorted(self.root)!r}"))  # fmt: skip
        return hit

    def lookup_args(self, m, k, q: QuantMode):
        return [m, k, q.name], {}

    def _clamped(self, m: int, k: int, q: QuantMode) -> Tuple[float, str, int, int]:
        """(value at the clamped point, interp path, m_c, k_c)."""
        lookup = lookup_call(self.METHOD, *self.lookup_args(m, k, q))
        grid, m_lo, m_hi, k_lo, k_hi = self._slice(q, lookup)
        m_c = max(m_lo, min(int(m), m_hi))
        k_c = max(k_lo, min(int(k), k_hi))
        try:
            value, path = grid.lookup((m_c, k_c))
        except GridMiss:
            raise PerfMiss(self.FILE[: -len(".parquet")], lookup,
                           f"perf_interp: no data to anchor query {{'m': {m_c}, 'k': {k_c}}}") from None  # fmt: skip
        return value, path, m_c, k_c


class ComputeScaleTable(_ScaleTable):
    """``computescale_perf``: dynamic-minus-static activation quantisation, held flat outside the grid."""

    FILE = COMPUTE_SCALE_FILE
    METHOD = "query_compute_scale"
    KIND = "Compute scale"
    ENUM = "compute_scale"

    def sol(self, m, k) -> float:
        return self.system.compute_scale_sol(m, k)

    def query(self, m: int, k: int, q: QuantMode) -> Tuple[float, str]:
        value, path, _, _ = self._clamped(m, k, q)
        return value, path


class ScaleMatrixTable(_ScaleTable):
    """``scale_matrix_perf``: the static scaling of an already-quantised input, rescaled by SOL outside the grid."""

    FILE = SCALE_MATRIX_FILE
    METHOD = "query_scale_matrix"
    KIND = "Scale matrix"
    ENUM = "scale_matrix"

    def sol(self, m, k) -> float:
        return self.system.scale_matrix_sol(m, k)

    def query(self, m: int, k: int, q: QuantMode) -> Tuple[float, str]:
        value, path, m_c, k_c = self._clamped(m, k, q)
        if m_c == int(m) and k_c == int(k):
            return value, path
        ratio = self.sol(int(m), int(k)) / self.sol(m_c, k_c)
        return value * ratio, path
