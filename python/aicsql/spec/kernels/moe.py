"""The MoE table and its query (docs/spec 4.4, 5.8, 10.3, 11.7).

``[moe_dtype][distribution][topk][num_experts][hidden_size][inter_size][moe_tp][moe_ep][num_tokens]``,
source union, first-wins, no SOL clamp. Rows with ``kernel_source ==
"moe_torch_flow_min_latency"`` form a separate low-latency table, consulted
only by trtllm nvfp4 at <= 128 tokens for a gated MoE (families_nemotron
1.6: a non-gated one never reads it). Two rows are re-labelled by kernel
source before insertion (families_mla 5.2): ``w4a8_mxfp4_mxfp8`` from
``sglang_mxfp4_flashinfer_trtllm_moe`` becomes ``w4a8_mxfp4_mxfp8_trtllm``,
``w4a16_mxfp4`` from ``sglang_flashinfer_cutlass_moe`` becomes
``w4a16_mxfp4_cutlass`` (so GPT-OSS's ``w4a16_mxfp4`` never sees them).

A query takes the slice down to ``moe_ep`` -- the model's distribution if it
exists under the quant, else ``"uniform"`` (which the shipped tables call
``balanced``, so that fall-back misses) -- and resolves a raw 1-D Grid over
``num_tokens`` with SOL 5.8 for the util-hold (3 GEMMs gated, 2 not). The slice must exist, and a
slice with a single token point above the query is a miss.
"""

from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

from ..data import Database, DataTree
from ..sol import QuantMode
from .grid import Grid, GridMiss, insert_first_wins
from .miss import PerfMiss, lookup_call
from ..sources import read_columns, table_sources
from .system import StepSystem

__all__ = ["MoETable", "MOE_FILE", "LOW_LATENCY_KERNEL"]

MOE_FILE = "moe_perf.parquet"
LOW_LATENCY_KERNEL = "moe_torch_flow_min_latency"
LOW_LATENCY_MAX_TOKENS = 128
# (moe_dtype, kernel_source) -> the dtype the loader files the row under.
RELABELS = {
    ("w4a8_mxfp4_mxfp8", "sglang_mxfp4_flashinfer_trtllm_moe"): "w4a8_mxfp4_mxfp8_trtllm",
    ("w4a16_mxfp4", "sglang_flashinfer_cutlass_moe"): "w4a16_mxfp4_cutlass",
}


class MoETable:
    """A database's MoE table (source union, first-wins)."""

    def __init__(self, tree: DataTree, db: Database, shared_layer: bool, system: StepSystem):
        self.db = db
        self.system = system
        self.sources = table_sources(tree, db, MOE_FILE, shared_layer)
        self.root: Dict = {}
        self.low_latency: Dict = {}
        for f in self.sources:
            cols = read_columns(
                f,
                ["kernel_source", "moe_dtype", "distribution", "topk", "num_experts", "hidden_size", "inter_size",
                 "moe_tp_size", "moe_ep_size", "num_tokens", "latency"],
                {"kernel_source": None},
            )
            for source, dtype, dist, topk, e, h, inter, etp, eep, tokens, latency in zip(
                cols["kernel_source"], cols["moe_dtype"], cols["distribution"], cols["topk"], cols["num_experts"],
                cols["hidden_size"], cols["inter_size"], cols["moe_tp_size"], cols["moe_ep_size"], cols["num_tokens"],
                cols["latency"],
            ):
                target = self.low_latency if source == LOW_LATENCY_KERNEL else self.root
                dtype = RELABELS.get((dtype, source), dtype)
                insert_first_wins(target, (dtype, dist, topk, e, h, inter, etp, eep, tokens), latency)
        self._grids: Dict[Tuple, Grid] = {}
        self._lock = threading.Lock()

    @staticmethod
    def lookup_kwargs(tokens, h, inter, topk, e, etp, eep, q: QuantMode, distribution: str, gated: bool = True):
        """The spec's ``query_moe`` keyword arguments (as the goldens print them)."""
        return {
            "num_tokens": tokens,
            "hidden_size": h,
            "inter_size": inter,
            "topk": topk,
            "num_experts": e,
            "moe_tp_size": etp,
            "moe_ep_size": eep,
            "quant_mode": q.name,
            "workload_distribution": distribution,
            "is_context": True,
            "moe_backend": None,
            "is_gated": gated,
            "enable_eplb": False,
        }

    @staticmethod
    def _slice(root: Dict, q: QuantMode, distribution: str, topk, e, h, inter, etp, eep) -> Optional[Dict]:
        by_dist = root.get(q.name)
        if not by_dist:
            return None
        dist = distribution if distribution in by_dist else "uniform"
        node = by_dist
        for k in (dist, topk, e, h, inter, etp, eep):
            node = node.get(k)
            if node is None:
                return None
        return node

    def query(
        self,
        tokens: int,
        h: int,
        inter: int,
        topk: int,
        e: int,
        etp: int,
        eep: int,
        q: QuantMode,
        distribution: str,
        gated: bool = True,
    ) -> Tuple[float, str]:
        """(latency ms, interp path) of one MoE layer over `tokens` tokens."""
        lookup = lookup_call(
            "query_moe", (), self.lookup_kwargs(tokens, h, inter, topk, e, etp, eep, q, distribution, gated)
        )
        node = None
        which = "main"
        if (
            gated
            and self.db.backend == "trtllm"
            and q.name == "nvfp4"
            and tokens <= LOW_LATENCY_MAX_TOKENS
            and self.low_latency
        ):
            node = self._slice(self.low_latency, q, distribution, topk, e, h, inter, etp, eep)
            which = "low_latency" if node else "main"
        if not node:
            node = self._slice(self.root, q, distribution, topk, e, h, inter, etp, eep)
        if not node:
            raise PerfMiss("moe_perf", lookup, "no MoE data for this (quant, distribution, topk, experts, "
                           "hidden, inter, moe_tp, moe_ep) slice")
        if len(node) == 1 and next(iter(node)) > tokens:
            raise PerfMiss("moe_perf", lookup, "the slice has a single token point, above the query")
        system = self.system
        key = (which, q.name, distribution, topk, e, h, inter, etp, eep, gated)  # the SOL depends on gated
        with self._lock:
            grid = self._grids.get(key)
            if grid is None:
                grid = self._grids[key] = Grid(
                    node,
                    ("num_tokens",),
                    lambda coords: system.moe_sol(coords[0], h, inter, topk, e, etp, eep, q, gated),
                )
        try:
            return grid.lookup((tokens,))
        except GridMiss:
            raise PerfMiss("moe_perf", lookup, "no data to anchor the query") from None
