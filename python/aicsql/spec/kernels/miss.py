"""The one exception of the kernels: the spec has no answer for a lookup.

It is the counterpart of the spec's ``PerfDataNotAvailableError``: a slice is
absent, or the Grid / ScatteredSites resolver finds nothing to anchor the
query. The step layer names the op in front of it; ``on_miss = 'null'``
turns it into NULL. Bad *input* is never a miss (that is a ValueError).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Sequence

__all__ = ["PerfMiss", "format_lookup"]


def format_lookup(method: str, args: Sequence[Any] = (), kwargs: Dict[str, Any] = None) -> str:
    """``query_x(a, b, k=v)`` -- how a lookup is named in messages."""
    parts = [json.dumps(a) for a in args]
    parts += [f"{k}={json.dumps(v)}" for k, v in (kwargs or {}).items()]
    return f"{method}({', '.join(parts)})"


class PerfMiss(Exception):
    """No perf data for a lookup: `table` (file stem), `lookup` (the call), `reason`."""

    def __init__(self, table: str, lookup: str, reason: str):
        super().__init__(f"perf data not available in {table}: {lookup}: {reason}")
        self.table = table
        self.lookup = lookup
        self.reason = reason
