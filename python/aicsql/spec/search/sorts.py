"""The frame operations' orderings, restated on plain lists (docs/spec/search.md 6.1, 6.2).

* `argsort_quick` -- numpy 1.26's generic introsort argsort
  (``npysort/quicksort.cpp``, ``aquicksort_``): median-of-three quicksort
  while a range is longer than ``SMALL_QUICKSORT + 1`` entries (``hi - lo >
  15``), the larger part pushed, a depth budget of ``2 * floor(log2(n))``
  tested for the initial and every popped range (heap sort when negative),
  insertion sort below. Not stable: this is what decides the order of tied
  rows in every single-key sort of the search.
* `sort_indexer` -- pandas' ``nargsort`` (``DataFrame.sort_values`` with one
  key, ``kind="quicksort"``): NaNs last in their original order; a
  descending sort reverses the values, argsorts them ascending, maps back
  and reverses the permutation.
* `stable_indexer` -- pandas' ``lexsort_indexer`` (several keys): a stable
  lexicographic sort, each key ascending or descending.
* `group_keys` -- ``groupby(key)`` with the default ``sort=True``: the
  distinct keys in sorted order (strings by code point), each group's
  rows in frame order.

All indexers are lists of positions into the input list.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

__all__ = ["SMALL_QUICKSORT", "argsort_quick", "sort_indexer", "stable_indexer", "group_keys", "take"]

SMALL_QUICKSORT = 15  # numpy's npysort_common.h


def _isnan(x) -> bool:
    return isinstance(x, float) and x != x


def _less(a, b) -> bool:
    """numpy's ``Tag::less`` for floats: ``a < b``, or ``b`` is NaN and ``a`` is not."""
    return a < b or (b != b and a == a)


def _msb(n: int) -> int:
    """``npy_get_msb``: floor(log2(n)) for n >= 1, 0 for n = 0."""
    depth = 0
    n >>= 1
    while n:
        depth += 1
        n >>= 1
    return depth


def _heapsort(v: Sequence, t: List[int], lo: int, m: int) -> None:
    """``aheapsort_`` over ``t[lo .. lo + m - 1]`` (1-based heap positions)."""
    less = _less

    def get(i: int) -> int:
        return t[lo + i - 1]

    def put(i: int, x: int) -> None:
        t[lo + i - 1] = x

    n = m
    for l in range(n >> 1, 0, -1):
        tmp = get(l)
        i, j = l, l << 1
        while j <= n:
            if j < n and less(v[get(j)], v[get(j + 1)]):
                j += 1
            if less(v[tmp], v[get(j)]):
                put(i, get(j))
                i = j
                j += j
            else:
                break
        put(i, tmp)
    while n > 1:
        tmp = get(n)
        put(n, get(1))
        n -= 1
        i, j = 1, 2
        while j <= n:
            if j < n and less(v[get(j)], v[get(j + 1)]):
                j += 1
            if less(v[tmp], v[get(j)]):
                put(i, get(j))
                i = j
                j += j
            else:
                break
        put(i, tmp)


def argsort_quick(v: Sequence) -> List[int]:
    """``numpy.argsort(v, kind="quicksort")`` of numpy 1.26's generic
    (non-SIMD) introsort, restated step by step (search.md 6.1)."""
    n = len(v)
    t = list(range(n))
    if n < 2:
        return t
    less = _less
    lo, hi = 0, n - 1
    budget = _msb(n) * 2
    stack: List[Tuple[int, int, int]] = []
    while True:
        if budget < 0:
            _heapsort(v, t, lo, hi - lo + 1)
        else:
            while hi - lo > SMALL_QUICKSORT:
                mid = lo + ((hi - lo) >> 1)
                if less(v[t[mid]], v[t[lo]]):
                    t[mid], t[lo] = t[lo], t[mid]
                if less(v[t[hi]], v[t[mid]]):
                    t[hi], t[mid] = t[mid], t[hi]
                if less(v[t[mid]], v[t[lo]]):
                    t[mid], t[lo] = t[lo], t[mid]
                p = v[t[mid]]
                i, j = lo, hi - 1
                t[mid], t[j] = t[j], t[mid]
                while True:
                    i += 1
                    while less(v[t[i]], p):
                        i += 1
                    j -= 1
                    while less(p, v[t[j]]):
                        j -= 1
                    if i >= j:
                        break
                    t[i], t[j] = t[j], t[i]
                k = hi - 1
                t[i], t[k] = t[k], t[i]
                budget -= 1
                if i - lo < hi - i:
                    stack.append((i + 1, hi, budget))
                    hi = i - 1
                else:
                    stack.append((lo, i - 1, budget))
                    lo = i + 1
            # insertion sort of t[lo..hi]
            for i in range(lo + 1, hi + 1):
                vi = t[i]
                vp = v[vi]
                j = i
                while j > lo and less(vp, v[t[j - 1]]):
                    t[j] = t[j - 1]
                    j -= 1
                t[j] = vi
        if not stack:
            return t
        lo, hi, budget = stack.pop()


def sort_indexer(values: Sequence, ascending: bool = True) -> List[int]:
    """pandas ``nargsort(values, kind="quicksort", ascending, na_position="last")``."""
    nan_idx = [i for i, x in enumerate(values) if x is None or _isnan(x)]
    if nan_idx:
        nan = set(nan_idx)
        idx = [i for i in range(len(values)) if i not in nan]
    else:
        idx = list(range(len(values)))
    non_nans = [values[i] for i in idx]
    if not ascending:
        non_nans.reverse()
        idx.reverse()
    indexer = [idx[k] for k in argsort_quick(non_nans)]
    if not ascending:
        indexer.reverse()
    return indexer + nan_idx


def stable_indexer(rows: Sequence[dict], keys: Sequence[Tuple[str, bool]]) -> List[int]:
    """pandas ``lexsort_indexer`` for ``sort_values(by=[k...], ascending=[a...])``
    with several keys: stable, lexicographic (values without NaN)."""
    order = list(range(len(rows)))
    # Successive stable sorts from the last key to the first = one lexicographic sort.
    for name, ascending in reversed(list(keys)):
        order.sort(key=lambda i: rows[i][name], reverse=not ascending)
    return order


def group_keys(rows: Sequence[dict], key: str) -> List[Tuple[object, List[int]]]:
    """``groupby(key)`` (``sort=True``): (key value, positions in frame order), keys sorted."""
    groups: Dict[object, List[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r[key], []).append(i)
    return [(k, groups[k]) for k in sorted(groups)]


def take(rows: Sequence, indexer: Sequence[int]) -> list:
    return [rows[i] for i in indexer]
