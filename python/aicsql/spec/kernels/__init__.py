"""aicsql.spec.kernels -- the perf tables an engine step reads, and their
resolvers, restated from the spec (docs/spec/engine_step.md sections 4, 5, 7, 8).

* `grid`      -- the Grid resolver (7.1);
* `system`    -- system constants and the SOL formulas 5.1, 5.3 - 5.9;
* `attention`, `comm`, `moe` -- the tables and their queries (`attention`
  includes the vision encoder's attention table, Qwen3-VL's image path);
* `mla` -- DeepSeek / Kimi's MLA tables (granular, BMM, module);
* `gdn` -- Qwen3.5's gated-delta-net kernel table (never misses: SOL fallback);
* `mamba2` -- Nemotron-H's Mamba-2 kernel table (never misses: SOL fallback);
* `dsa` -- DEEPSEEKV32's DSA module tables (full and skip-indexer rows) and
  the context-parallel sub-kernel tables (docs/spec/families_dsa.md);
* `quantize` -- the compute-scale / scale-matrix tables of fp8_static GEMMs;
* GEMM lookups are the GEMM path's (`aicsql.spec.gemm`), unchanged.

`Kernels` bundles one database's tables, each loaded on first use and kept
per (data tree, database, shared layer).
"""

from __future__ import annotations

import threading
from typing import Dict, Tuple

from ..data import Database, DataTree
from ..gemm import GemmTable, load_table
from .attention import ContextAttentionTable, EncoderAttentionTable, GenerationAttentionTable
from .comm import CustomAllReduceTable, NcclTable
from .dsa import DSATables, SparseKernels
from .gdn import GDNTable
from .dsv4 import DSv4Tables
from .grid import Grid, GridMiss, OutOfRange
from .mamba2 import Mamba2Table
from .miss import PerfMiss, lookup_call
from .mla import ContextMLAModuleTable, ContextMLATable, GenerationMLAModuleTable, GenerationMLATable, MLABmmTable
from .moe import MoETable
from .quantize import ComputeScaleTable, ScaleMatrixTable
from .quant import COMM_QUANTS, FMHA_QUANTS, KV_QUANTS, MOE_QUANTS, fmha_quant, kv_quant, moe_quant
from ..sources import TableFile, table_sources
from .system import StepSystem

__all__ = [
    "COMM_QUANTS",
    "ComputeScaleTable",
    "ContextAttentionTable",
    "ContextMLAModuleTable",
    "ContextMLATable",
    "CustomAllReduceTable",
    "DSATables",
    "EncoderAttentionTable",
    "FMHA_QUANTS",
    "GDNTable",
    "DSv4Tables",
    "GenerationAttentionTable",
    "GenerationMLAModuleTable",
    "GenerationMLATable",
    "Grid",
    "GridMiss",
    "KV_QUANTS",
    "Kernels",
    "MLABmmTable",
    "Mamba2Table",
    "MOE_QUANTS",
    "MoETable",
    "NcclTable",
    "OutOfRange",
    "PerfMiss",
    "ScaleMatrixTable",
    "StepSystem",
    "TableFile",
    "fmha_quant",
    "lookup_call",
    "kernels_for",
    "kv_quant",
    "moe_quant",
    "table_sources",
]


class Kernels:
    """One database's perf tables, loaded lazily (thread-safe)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool):
        self.tree = tree
        self.db = db
        self.shared_layer = shared_layer
        self.system = StepSystem(db.system, tree.read_yaml(tree.system_yaml(db.system)) or {},
                                 tree.system_yaml(db.system))
        self._tables: Dict[str, object] = {}
        self._lock = threading.RLock()

    def _get(self, name: str, build):
        with self._lock:
            table = self._tables.get(name)
            if table is None:
                table = self._tables[name] = build()
            return table

    @property
    def gemm(self) -> GemmTable:
        return self._get("gemm", lambda: load_table(self.tree, self.db, self.shared_layer))

    @property
    def context_attention(self) -> ContextAttentionTable:
        return self._get(
            "context_attention",
            lambda: ContextAttentionTable(self.tree, self.db, self.shared_layer, self.system),
        )

    @property
    def generation_attention(self) -> GenerationAttentionTable:
        return self._get(
            "generation_attention",
            lambda: GenerationAttentionTable(self.tree, self.db, self.shared_layer, self.system),
        )

    @property
    def encoder_attention(self) -> EncoderAttentionTable:
        """The vision encoder's attention table (Qwen3-VL's image path only)."""
        return self._table(EncoderAttentionTable)

    @property
    def nccl(self) -> NcclTable:
        return self._get("nccl", lambda: NcclTable(self.tree, self.db.system, self.system))

    @property
    def custom_allreduce(self) -> CustomAllReduceTable:
        def build():
            nccl = self.nccl if self.system.num_gpus_per_node == 72 else None
            return CustomAllReduceTable(self.tree, self.db, self.shared_layer, self.system, nccl)

        return self._get("custom_allreduce", build)

    @property
    def moe(self) -> MoETable:
        return self._get("moe", lambda: MoETable(self.tree, self.db, self.shared_layer, self.system))

    def _table(self, cls):
        return self._get(cls.__name__, lambda: cls(self.tree, self.db, self.shared_layer, self.system))

    @property
    def context_mla(self) -> ContextMLATable:
        return self._table(ContextMLATable)

    @property
    def generation_mla(self) -> GenerationMLATable:
        return self._table(GenerationMLATable)

    @property
    def mla_bmm(self) -> MLABmmTable:
        return self._table(MLABmmTable)

    @property
    def context_mla_module(self) -> ContextMLAModuleTable:
        return self._table(ContextMLAModuleTable)

    @property
    def generation_mla_module(self) -> GenerationMLAModuleTable:
        return self._table(GenerationMLAModuleTable)

    @property
    def gdn(self) -> GDNTable:
        return self._table(GDNTable)

    @property
    def mamba2(self) -> Mamba2Table:
        return self._table(Mamba2Table)

    @property
    def dsv4(self) -> DSv4Tables:
        """DeepSeek-V4's mHC, attention-module, calibration and CP tables (families_dsv4 3)."""
        return self._table(DSv4Tables)

    @property
    def dsa_context(self) -> DSATables:
        return self._get("dsa_context",
                         lambda: DSATables(self.tree, self.db, self.shared_layer, self.system, "context"))

    @property
    def dsa_generation(self) -> DSATables:
        return self._get("dsa_generation",
                         lambda: DSATables(self.tree, self.db, self.shared_layer, self.system, "generation"))

    def dsa_sparse(self, architecture: str, num_heads: int) -> SparseKernels:
        """The context-parallel sub-kernel tables for (architecture, per-GPU heads)."""
        return self._get(f"dsa_sparse:{architecture}:{num_heads}",
                         lambda: SparseKernels(self.tree, self.db, architecture, num_heads))

    @property
    def compute_scale(self) -> ComputeScaleTable:
        return self._table(ComputeScaleTable)

    @property
    def scale_matrix(self) -> ScaleMatrixTable:
        return self._table(ScaleMatrixTable)


_KERNELS: Dict[Tuple[int, Database, bool], Kernels] = {}
_KERNELS_LOCK = threading.Lock()


def kernels_for(tree: DataTree, db: Database, shared_layer: bool = True) -> Kernels:
    """The tables of a database, kept per (tree, database, shared layer)."""
    key = (id(tree), db, bool(shared_layer))
    with _KERNELS_LOCK:
        k = _KERNELS.get(key)
        if k is None or k.tree is not tree:
            k = _KERNELS[key] = Kernels(tree, db, bool(shared_layer))
        return k
