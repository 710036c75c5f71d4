"""Custom all-reduce and NCCL tables and queries (docs/spec 4.4, 5.6, 5.7, 7.1, 8.4, 11.2).

Custom all-reduce
    The requested version's own file when it lies under the ``comm`` family
    dir (the spec excludes that dir from the source union); a legacy-layout
    or missing primary is not recognised as comm, so older versions then
    serve it as for any table (docs/spec/families_hybrid_vl_databases.md 4.3;
    e.g. gb200/trtllm/1.3.0rc23, which holds no all-reduce file, is priced
    with 1.3.0rc20's). Rows whose ``kernel_source`` or ``backend``
    (``implementation`` in older files) ends in ``_eager`` are dropped,
    except on b60; the dtype column is ignored -- every row is filed under
    ``half`` -- so rows of several dtypes compete first-wins:
    ``[half][num_gpus]["AUTO"][message_size]``. ``message_size`` is an
    element count. A query is a raw 1-D Grid over it, SOL 5.6 at the
    effective tp ``min(tp, num_gpus_per_node)``, scaled when tp spans nodes.

NCCL
    ``comm/nccl/<misc.nccl_version>/nccl_perf.parquet``:
    ``[nccl_dtype][op_name][num_gpus][message_size]``, a raw 1-D Grid over
    the message size with SOL 5.7 on the slice ``min(g, max g)``; one GPU
    is free (0.0, no lookup). Beyond the largest measured count ``M`` the
    latency is scaled by ``(g - 1) / g * M / (M - 1) * (bw(M) / bw(g))``
    (the spec's ``NCCL._query_nccl_table``, in its evaluation order). Read
    by the all-reduce on systems with 72 GPUs per node (tp > 4), by the
    context-parallel KV all-gathers and by the MoE dispatch at attention
    dp > 1 or cp > 1 (all-gather / reduce-scatter; the Qwen3-30B-A3B sglang
    search golden and ``serving_family_dp_goldens`` reach it).
"""

from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

from ..data import Database, DataTree
from ..sol import QuantMode
from .grid import Grid, GridMiss, insert_first_wins
from .miss import PerfMiss, lookup_call
from ..sources import library_file, read_columns, table_sources
from .quant import COMM_QUANTS
from .system import StepSystem

__all__ = ["CustomAllReduceTable", "NcclTable", "ALLREDUCE_FILE", "NCCL_FILE"]

ALLREDUCE_FILE = "custom_allreduce_perf.parquet"
NCCL_FILE = "nccl_perf.parquet"

_HALF = COMM_QUANTS["half"]


class NcclTable:
    """The system's NCCL table (misc.nccl_version), primary file only."""

    def __init__(self, tree: DataTree, system_name: str, system: StepSystem):
        self.system = system
        self.root: Dict = {}
        path = None
        if system.nccl_version is not None:
            path = library_file(tree, system_name, "nccl", system.nccl_version, NCCL_FILE)
        self.source = path
        if path is not None:
            cols = read_columns(path, ["nccl_dtype", "op_name", "num_gpus", "message_size", "latency"])
            for dtype, op, g, size, latency in zip(
                cols["nccl_dtype"], cols["op_name"], cols["num_gpus"], cols["message_size"], cols["latency"]
            ):
                insert_first_wins(self.root, (dtype, op, g, size), latency)
        self._grids: Dict[Tuple, Optional[Grid]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def lookup_args(q: QuantMode, op: str, g: int, size):
        return [q.name, g, op, size], {}

    def query(self, q: QuantMode, op: str, g: int, size) -> Tuple[float, Optional[str]]:
        """(latency ms, interp path) of one `op` of `size` elements over g
        GPUs; g = 1 is free and does no lookup (path None)."""
        if g == 1:
            return 0.0, None
        lookup = lookup_call("query_nccl", [q.name, g, op, size])
        by_g = (self.root.get(q.name) or {}).get(op) or {}
        if not by_g:
            raise PerfMiss("nccl_perf", lookup, "no NCCL data for this dtype and op")
        max_g = max(by_g)
        g_eff = min(g, max_g)
        system = self.system
        key = (q.name, op, g_eff)
        with self._lock:
            grid = self._grids.get(key)
            if grid is None:
                grid = self._grids[key] = Grid(
                    by_g[g_eff], ("message_size",), lambda coords: system.nccl_sol(q, g_eff, op, coords[0])
                ) if g_eff in by_g else None
        if grid is None:
            raise PerfMiss("nccl_perf", lookup, f"no NCCL data for {g_eff} GPUs")
        try:
            latency, path = grid.lookup((size,))
        except GridMiss:
            raise PerfMiss("nccl_perf", lookup, "no data to anchor the query") from None
        if g > max_g:  # the spec's correction beyond the largest measured count
            scale = system.bw(max_g) / system.bw(g)
            latency = latency * ((g - 1) / g * max_g / (max_g - 1) * scale)
        return latency, path


class CustomAllReduceTable:
    """A database's custom all-reduce table (own file only)."""

    def __init__(
        self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem, nccl: Optional[NcclTable] = None
    ):
        self.db = db
        self.system = system
        self.nccl = nccl
        self.sources = table_sources(tree, db, ALLREDUCE_FILE, shared_layer)
        self.root: Dict = {}
        keep_eager = db.system == "b60"
        for f in self.sources:
            cols = read_columns(
                f,
                ["kernel_source", "backend", "implementation", "num_gpus", "message_size", "latency"],
                {"kernel_source": None, "backend": None, "implementation": None},
            )
            impls = [b if b is not None else i for b, i in zip(cols["backend"], cols["implementation"])]
            for source, impl, g, size, latency in zip(
                cols["kernel_source"], impls, cols["num_gpus"], cols["message_size"], cols["latency"]
            ):
                if not keep_eager and (str(source or "").endswith("_eager") or str(impl or "").endswith("_eager")):
                    continue
                insert_first_wins(self.root, ("half", g, "AUTO", size), latency)
        self._grids: Dict[int, Grid] = {}
        self._lock = threading.Lock()

    @staticmethod
    def lookup_args(tp: int, size: int):
        return ["half", tp, size], {}

    def _grid(self, tp_eff: int) -> Optional[Grid]:
        with self._lock:
            grid = self._grids.get(tp_eff)
            if grid is None:
                node = ((self.root.get("half") or {}).get(tp_eff) or {}).get("AUTO")
                if node:
                    system = self.system
                    grid = self._grids[tp_eff] = Grid(
                        node, ("message_bytes",), lambda coords: system.custom_allreduce_sol(tp_eff, coords[0])
                    )
            return grid

    def query(self, tp: int, size: int) -> Tuple[float, Optional[str]]:
        """(latency ms, interp path) of one all-reduce of `size` elements over tp
        GPUs (docs/spec 8.4); tp = 1 is free and does no lookup (path None)."""
        if tp == 1:
            return 0.0, None
        system = self.system
        g = system.num_gpus_per_node
        if g == 72 and tp > 4:
            if self.nccl is None:
                lookup = lookup_call("query_nccl", ["half", tp, "all_reduce", size])
                raise PerfMiss("nccl_perf", lookup, "no NCCL table for misc.nccl_version")
            return self.nccl.query(_HALF, "all_reduce", tp, size)
        tp_eff = min(tp, g)
        lookup = lookup_call("query_custom_allreduce", *self.lookup_args(tp, size))
        grid = self._grid(tp_eff)
        if grid is None:
            raise PerfMiss("custom_allreduce_perf", lookup, f"no all-reduce data for {tp_eff} GPUs")
        try:
            latency, path = grid.lookup((size,))
        except GridMiss:
            raise PerfMiss("custom_allreduce_perf", lookup, "no data to anchor the query") from None
        if tp > g:
            latency = latency * ((tp - 1) / tp * g / (g - 1) * system.bw(g) / system.bw(tp))
        return latency, path
