"""The spec's Grid resolver (section 7.1, tie-breaks 11.5): attention,
all-reduce, NCCL and the MoE token curve.

A grid is a nested dict, one level per axis (outer -> inner), leaves are
latencies. A query resolves, in order:

1. **walk** the nesting with the query's coordinates. A coordinate that is a
   key descends into it; one outside ``[min key, max key]`` raises
   *out-of-range*; otherwise the two bracketing keys are resolved
   recursively and a branch that raises is dropped:

   * both survive -> blend with ``w = (c-lo)/(hi-lo)``, in sqrt space on the
     configured transform axis (``(sqrt(a) + (sqrt(b)-sqrt(a))*w)**2``,
     with ``sqrt(v) = 0`` for ``v <= 0``), raw elsewhere;
   * one survives (a ragged table) -> its value times
     ``SOL(query) / SOL(query with this axis at the surviving key)``
     (only when both SOLs are finite and positive; else its value as is);
   * none -> out-of-range if any branch was out of range, else miss.

   A walk that never brackets is an *exact hit* (the stored value).

2. **grid hold**, when the walk raised out-of-range: every axis but the last
   snaps to the query coordinate if it is a key, else to the nearest key by
   ``|k - c|`` -- ties to the key met first in the node's *insertion order*.
   On the last axis the keys are sorted: beyond the top the last ``k_tail``
   keys, below the bottom the first ``k_tail``, inside the single nearest key
   (ties to the smaller, since the search runs over the sorted list). The
   util ``SOL(snapped..., t) / lat(t)`` of those points (positive ones only)
   is held: ``result = SOL(query) / median(utils)``.

3. otherwise a **miss**.

`lookup` returns ``(latency, path)`` with path ``exact_hit``,
``grid_interpolation`` or ``grid_util_hold`` -- the goldens' ``interp_path``.
"""

from __future__ import annotations

import bisect
import math
import statistics
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "GridMiss",
    "OutOfRange",
    "Grid",
    "EXACT_HIT",
    "GRID_INTERPOLATION",
    "GRID_UTIL_HOLD",
    "insert_first_wins",
]

EXACT_HIT = "exact_hit"
GRID_INTERPOLATION = "grid_interpolation"
GRID_UTIL_HOLD = "grid_util_hold"

_MEMO = 65536  # lookups remembered per grid


class GridMiss(Exception):
    """The grid has no answer for the query."""


class OutOfRange(GridMiss):
    """A coordinate lies outside the keys of its level (triggers the grid hold)."""


def insert_first_wins(root: dict, keys: Sequence, value) -> None:
    """Insert `value` at the nested path `keys`; a key already present keeps
    its first value (docs/spec 11.1). Dicts keep first-appearance order."""
    node = root
    for k in keys[:-1]:
        child = node.get(k)
        if child is None:
            child = node[k] = {}
        node = child
    if keys[-1] not in node:
        node[keys[-1]] = value


def _sqrt(v: float) -> float:
    return math.sqrt(v) if v > 0 else 0.0


def _usable_sol(v: float) -> bool:
    return math.isfinite(v) and v > 0


class Grid:
    """A Grid resolver over one nested-dict slice.

    ``sol(coords)`` is the SOL latency at a full coordinate tuple (outer ->
    inner); ``sqrt_axis`` the index of the axis blended in sqrt space (None:
    all raw); ``k_tail`` the number of end points the grid hold uses.
    """

    def __init__(
        self,
        root: dict,
        axes: Sequence[str],
        sol: Callable[[Tuple], float],
        sqrt_axis: Optional[int] = None,
        k_tail: int = 1,
    ):
        self.root = root
        self.axes = tuple(axes)
        self.depth = len(self.axes)
        self.sol = sol
        self.sqrt_axis = sqrt_axis
        self.k_tail = k_tail
        self._sorted: Dict[int, List] = {}
        self._memo: Dict[Tuple, Tuple[float, str]] = {}
        self._lock = threading.Lock()

    # ---- helpers -------------------------------------------------------------------

    def _keys(self, node: dict) -> List:
        """A node's keys, sorted (memoised: nodes never change after loading)."""
        keys = self._sorted.get(id(node))
        if keys is None:
            keys = sorted(node)
            with self._lock:
                self._sorted[id(node)] = keys
        return keys

    def _blend(self, level: int, a: float, b: float, w: float) -> float:
        if level == self.sqrt_axis:
            ra, rb = _sqrt(a), _sqrt(b)
            v = ra + (rb - ra) * w
            return v * v
        return a + (b - a) * w

    # ---- 1. the walk ---------------------------------------------------------------

    def _walk(self, node: dict, level: int, coords: Tuple) -> Tuple[float, bool]:
        """(value, interpolated?) of the sub-grid `node` at coords[level:]."""
        c = coords[level]
        last = level == self.depth - 1
        if c in node:
            if last:
                return node[c], False
            return self._walk(node[c], level + 1, coords)
        keys = self._keys(node)
        if not keys:
            raise GridMiss()
        if c < keys[0] or c > keys[-1]:
            raise OutOfRange()
        i = bisect.bisect_left(keys, c)
        lo, hi = keys[i - 1], keys[i]
        values: Dict = {}
        out_of_range = False
        for k in (lo, hi):
            if last:
                values[k] = node[k]
                continue
            try:
                values[k] = self._walk(node[k], level + 1, coords)[0]
            except OutOfRange:
                out_of_range = True
            except GridMiss:
                pass
        if len(values) == 2:
            w = (c - lo) / (hi - lo)
            return self._blend(level, values[lo], values[hi], w), True
        if len(values) == 1:
            (k, value), = values.items()
            sol_query = self.sol(coords)
            sol_snapped = self.sol(coords[:level] + (k,) + coords[level + 1 :])
            if _usable_sol(sol_query) and _usable_sol(sol_snapped):
                value = value * (sol_query / sol_snapped)
            return value, True
        if out_of_range:
            raise OutOfRange()
        raise GridMiss()

    # ---- 2. the grid hold --------------------------------------------------------------

    def _hold(self, coords: Tuple) -> float:
        node = self.root
        snapped = []
        for level in range(self.depth - 1):
            c = coords[level]
            if c in node:
                k = c
            elif node:
                k = min(node, key=lambda key: abs(key - c))  # ties: first in insertion order
            else:
                raise GridMiss()
            snapped.append(k)
            node = node[k]
        c = coords[-1]
        keys = self._keys(node)
        if not keys:
            raise GridMiss()
        if c > keys[-1]:
            chosen = keys[-self.k_tail :]
        elif c < keys[0]:
            chosen = keys[: self.k_tail]
        else:
            chosen = [min(keys, key=lambda key: abs(key - c))]  # ties: the smaller key
        utils = []
        for t in chosen:
            latency = node[t]
            if not latency > 0:
                continue
            util = self.sol(tuple(snapped) + (t,)) / latency
            if util > 0 and math.isfinite(util):
                utils.append(util)
        if not utils:
            raise GridMiss()
        return self.sol(coords) / statistics.median(utils)

    # ---- a query --------------------------------------------------------------------

    def lookup(self, coords: Sequence) -> Tuple[float, str]:
        """(latency, interp path) at `coords` (outer -> inner), or GridMiss."""
        coords = tuple(coords)
        hit = self._memo.get(coords)
        if hit is not None:
            return hit
        try:
            value, interpolated = self._walk(self.root, 0, coords)
            result = (value, GRID_INTERPOLATION if interpolated else EXACT_HIT)
        except OutOfRange:
            result = (self._hold(coords), GRID_UTIL_HOLD)
        with self._lock:
            if len(self._memo) >= _MEMO:
                self._memo.clear()
            self._memo[coords] = result
        return result
