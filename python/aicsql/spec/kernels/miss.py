"""The one exception of the kernels: the spec has no answer for a lookup.

It is the counterpart of the spec's ``PerfDataNotAvailableError``: a slice is
absent, or the Grid / ScatteredSites resolver finds nothing to anchor the
query. The step layer names the op in front of it; ``on_miss = 'null'``
turns it into NULL. Bad *input* is never a miss (that is a ValueError).
"""

from __future__ import annotations

import json
from typing import Any, Dict, NamedTuple, Sequence

__all__ = ["PerfMiss", "LookupCall", "lookup_call"]


class LookupCall(NamedTuple):
    """A table lookup as the spec's ``PerfDatabase`` call: method, args, kwargs.

    ``str()`` names it in messages (``query_x(a, b, k=v)``); the fields let
    ``py_engine_step`` show a miss's arguments as columns."""

    method: str
    args: tuple
    kwargs: Dict[str, Any]

    def __str__(self) -> str:
        parts = [json.dumps(a) for a in self.args]
        parts += [f"{k}={json.dumps(v)}" for k, v in self.kwargs.items()]
        return f"{self.method}({', '.join(parts)})"


def lookup_call(method: str, args: Sequence[Any] = (), kwargs: Dict[str, Any] = None) -> LookupCall:
    return LookupCall(method, tuple(args), dict(kwargs or {}))


class PerfMiss(Exception):
    """No perf data for a lookup: `table` (file stem), `lookup` (the call), `reason`."""

    def __init__(self, table: str, lookup: LookupCall, reason: str):
        super().__init__(f"perf data not available in {table}: {lookup}: {reason}")
        self.table = table
        self.lookup = lookup
        self.reason = reason
