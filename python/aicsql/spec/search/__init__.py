"""aicsql.spec.search -- the deployment search of ``cli default`` on the
Python path (docs/spec/search.md): the search space, ``sweep_agg`` and
``sweep_disagg`` over the serving estimates of `aicsql.spec.serving`, the
Pareto front, the best configs and the chosen mode, with the spec's frame
operations (numpy's rounding, numpy's introsort for single-key sorts,
stable multi-key sorts, ``groupby`` order) restated on plain lists.

* `space` -- experiments' candidate lists, ``enumerate_parallel_config``, fixed sweep lists;
* `sorts` -- the introsort argsort, pandas' sort indexers, groupby order;
* `sweep` -- ``sweep_agg``, ``sweep_disagg`` (worker rows, matching, rate matching);
* `pick`  -- ``tokens/s/gpu_cluster``, Pareto front, best configs;
* `api`   -- `run_search` (the spec's frames), `search_agg`, `search_disagg`,
  `search_default` (pyarrow Tables) and their ``*_table`` bridge forms.
"""

from .api import (
    AGG_TABLE_SCHEMA,
    DEFAULT_TABLE_SCHEMA,
    DISAGG_TABLE_SCHEMA,
    ModeResult,
    SearchResult,
    run_search,
    search_agg,
    search_agg_table,
    search_default,
    search_default_table,
    search_recommend_table,
    run_experiments,
    run_recommend,
    search_disagg,
    search_disagg_table,
)
from .sweep import COLUMNS_AGG, COLUMNS_DISAGG

__all__ = [
    "AGG_TABLE_SCHEMA",
    "COLUMNS_AGG",
    "COLUMNS_DISAGG",
    "DEFAULT_TABLE_SCHEMA",
    "DISAGG_TABLE_SCHEMA",
    "ModeResult",
    "SearchResult",
    "run_search",
    "search_agg",
    "search_agg_table",
    "search_default",
    "search_default_table",
    "search_recommend_table",
    "run_experiments",
    "run_recommend",
    "search_disagg",
    "search_disagg_table",
]
