"""The picking of ``cli default`` (``pick_default``, ``get_pareto_front``,
``get_best_configs_under_tpot_constraint``; docs/spec/search.md 4, 5) on
plain lists. Every function takes the frame as a list of row dicts and
returns *positions* into it, so a caller can mark the candidate rows."""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

from .sorts import group_keys, sort_indexer, stable_indexer

__all__ = ["CLUSTER", "cluster_rate", "with_cluster", "pareto_front", "best_configs"]

CLUSTER = "tokens/s/gpu_cluster"


def cluster_rate(row: dict, total_gpus: int) -> float:
    """``tokens/s/gpu * (T // n) * n / T``, left to right, unrounded (pick:249-255)."""
    x = row["tokens/s/gpu"]
    if total_gpus <= 0:
        return x
    n = row["num_total_gpus"]
    if n == 0:
        return math.nan
    return x * (total_gpus // n) * n / total_gpus


def with_cluster(rows: Sequence[dict], total_gpus: int) -> List[dict]:
    """The frame with the ``tokens/s/gpu_cluster`` column appended."""
    return [dict(r, **{CLUSTER: cluster_rate(r, total_gpus)}) for r in rows]


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def pareto_front(rows: Sequence[dict], x: str = "tokens/s/user", y: str = CLUSTER,
                 maximize_x: bool = True) -> List[int]:  # fmt: skip
    """``get_pareto_front`` maximising y (pareto:336-389): rows with a
    non-finite x or y dropped, sorted by x (quicksort), the dominance walk
    (on -x when x is minimised: a request-latency target's front), the
    survivors sorted by x again. Positions into ``rows``."""
    valid = [i for i, r in enumerate(rows) if _finite(r[x]) and _finite(r[y])]
    order = [valid[k] for k in sort_indexer([rows[i][x] for i in valid])]
    sign = 1 if maximize_x else -1
    costs = [(sign * rows[i][x], rows[i][y]) for i in order]
    alive = [True] * len(order)
    alive_list = list(range(len(order)))
    for i, (cx, cy) in enumerate(costs):
        if not alive[i]:
            continue
        kept = []
        for j in alive_list:
            jx, jy = costs[j]
            if jx > cx or jy > cy or j == i:
                kept.append(j)
            else:
                alive[j] = False
        alive_list = kept
    front = [order[i] for i in range(len(order)) if alive[i]]
    return [front[k] for k in sort_indexer([rows[i][x] for i in front])]


def best_configs(rows: Sequence[dict], total_gpus: int, target_tpot: float, top_n: int, group_by: str,
                 constraint: str = "tpot", secondary: Tuple[str, bool] = ("tokens/s/user", False)) -> List[int]:
    """``_get_best_configs_under_constraint`` (pareto:519-626) as its TPOT
    wrapper calls it (``constraint`` tpot, ``secondary`` tokens/s/user
    descending) or its request-latency one (request_latency, request_latency
    ascending; ``target_tpot`` is then the latency target): under
    ``constraint <= target`` (else every row, flagged), per ``group_by`` the
    first row with the largest cluster rate, sorted by [cluster rate desc,
    secondary] (stable; flagged: by the constraint, quicksort),
    ``head(top_n)``. Positions into ``rows``."""
    if not rows or target_tpot is None or top_n < 1:
        return []
    cands = [i for i, r in enumerate(rows) if r[constraint] <= target_tpot]
    exceeded = not cands
    if exceeded:
        cands = list(range(len(rows)))
    values = {}
    for i in cands:
        v = cluster_rate(rows[i], total_gpus)
        values[i] = math.nan if (isinstance(v, float) and math.isinf(v)) else v
    cands = [i for i in cands if _finite(rows[i][constraint]) and not _isnan(values[i])]
    if not cands:
        return []
    sub = [rows[i] for i in cands]
    picked = []
    for _key, positions in group_keys(sub, group_by):
        best = None
        for k in positions:
            v = values[cands[k]]
            if best is None or v > values[cands[best]]:
                best = k
        picked.append(cands[best])
    if exceeded:
        order = sort_indexer([rows[i][constraint] for i in picked])
    else:
        column, ascending = secondary
        keyed = [{"c": values[i], "u": rows[i][column]} for i in picked]
        order = stable_indexer(keyed, [("c", False), ("u", ascending)])
    return [picked[k] for k in order][:top_n]


def _isnan(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)
