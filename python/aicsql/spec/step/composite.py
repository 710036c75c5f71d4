"""Composite ops (docs/spec/families_mla_gptoss_fp8static.md 3.4).

`FallbackOp`
    The primary op's value; if it misses (`PerfMiss`: a table that is not
    loaded, a missing slice, an interpolation or GEMM shape miss), the sum
    ``((0.0 + f1) + f2) + ...`` of the fallback ops in list order. The
    decision is taken per query; any other error propagates.
`OverlapOp`
    Two op groups on parallel streams: ``max(a, b)`` with ``a = (0.0 + a1) +
    a2 + ...`` over group A and ``b`` likewise over group B.

Each is one named op of the step (its count 1.0 is a label: the inner ops
carry their own counts, and `Op.scaled` scales those, never the label). As the goldens list them, a composite row has no
quant label and no interp path; its lookup is the first table lookup of the
inner ops that produced the value (a failed primary lookup is not counted,
the goldens do not record it). Weights: a fallback op weighs its primary's
weights if positive, else the sum of its fallback ops'; an overlap op ``0.0``
plus group A's then group B's.
"""

from __future__ import annotations

import copy
from typing import List, Sequence

from ..kernels import PerfMiss
from .ops import Call, Op, OpValue, first_lookup

__all__ = ["FallbackOp", "OverlapOp"]


def _sum(k, ops: Sequence[Op], call: Call) -> List[OpValue]:
    return [op.evaluate(k, call) for op in ops]


def _total(values: List[OpValue]) -> float:
    total = 0.0
    for v in values:  # left to right, from 0.0
        total = total + v.total
    return total


class FallbackOp(Op):
    kind = "FallbackOp"

    def __init__(self, name: str, primary: Op, fallback: Sequence[Op]):
        super().__init__(name, 1.0)
        self.primary = primary
        self.fallback = list(fallback)
        self.s_dependent = primary.s_dependent or any(op.s_dependent for op in self.fallback)

    def weights(self) -> float:
        """The primary's weights if positive, else the fallback ops' (a plain ``sum``, from int 0)."""
        primary = self.primary.weights()
        if primary > 0:
            return primary
        return sum(op.weights() for op in self.fallback)

    def scaled(self, factor: float) -> "FallbackOp":
        op = copy.copy(self)
        op.primary = self.primary.scaled(factor)
        op.fallback = [f.scaled(factor) for f in self.fallback]
        return op

    def evaluate(self, k, call: Call) -> OpValue:
        try:
            value = self.primary.evaluate(k, call)
            return OpValue(value.total, None, value.lookup)
        except PerfMiss:
            pass
        values = _sum(k, self.fallback, call)
        return OpValue(_total(values), None, first_lookup(values))


class OverlapOp(Op):
    kind = "OverlapOp"

    def __init__(self, name: str, group_a: Sequence[Op], group_b: Sequence[Op]):
        super().__init__(name, 1.0)
        self.group_a = list(group_a)
        self.group_b = list(group_b)
        self.s_dependent = any(op.s_dependent for op in self.group_a + self.group_b)

    def weights(self) -> float:
        total = 0.0
        for op in self.group_a + self.group_b:
            total += op.weights()
        return total

    def scaled(self, factor: float) -> "OverlapOp":
        op = copy.copy(self)
        op.group_a = [a.scaled(factor) for a in self.group_a]
        op.group_b = [b.scaled(factor) for b in self.group_b]
        return op

    def evaluate(self, k, call: Call) -> OpValue:
        a = _sum(k, self.group_a, call)
        b = _sum(k, self.group_b, call)
        return OpValue(max(_total(a), _total(b)), None, first_lookup(a + b))
