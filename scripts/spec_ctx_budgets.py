#!/usr/bin/env python3
"""The agg sweep's context-token budgets as the spec lists them.

Calls aiconfigurator v0.11.0's own ``sdk/sweep.py::_agg_ctx_tokens_list``
(the list ``cli default`` walks per batch size, docs/spec/search.md 2.1 and
docs/spec/options.md 3.3) for isl values around every boundary of the rule
(the 512 stride, 8192, the large stride's max_ctx / 8, isl above 4096 and
8192, odd values), with chunked prefill off and on, and writes

    {"spec": ..., "ctx_stride": 512, "cases": [{"isl": .., "enable_chunked_prefill": ..,
     "ctx_tokens": [...]}, ...]}

to the given path (tests/goldens/search/ctx_budgets.json; read by the unit
test ``the_specs_budget_lists`` of crates/serving/src/search/agg.rs).
The stride is the one ``sweep_agg`` passes (``ctx_stride=512``).

Setup: see scripts/spec_points.py. Run (a second):

    /work/specenv/bin/python scripts/spec_ctx_budgets.py tests/goldens/search/ctx_budgets.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_points import load_spec  # noqa: E402

ISLS = [1, 7, 100, 255, 256, 257, 500, 511, 512, 513, 1000, 1024, 1500, 2000, 2047, 2048, 3000, 4000,
        4095, 4096, 4097, 5000, 6000, 8000, 8191, 8192, 8193, 10000, 12000, 16000, 16384, 20000, 32000,
        32768, 65536, 100000, 131072]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--systems", default="/work/specdata/systems")
    parser.add_argument("--spec-src", default="/work/specsrc")
    args = parser.parse_args()
    load_spec(args.spec_src, args.systems)
    from aiconfigurator.sdk import sweep

    cases = [{"isl": isl, "enable_chunked_prefill": chunked,
              "ctx_tokens": [int(c) for c in sweep._agg_ctx_tokens_list(isl, 512, chunked)]}
             for isl in ISLS for chunked in (False, True)]  # fmt: skip
    with open(args.out, "w") as f:
        json.dump({"spec": "aiconfigurator v0.11.0 sdk/sweep.py _agg_ctx_tokens_list", "ctx_stride": 512,
                   "cases": cases}, f, indent=1)  # fmt: skip
        f.write("\n")
    print(f"{len(cases)} lists -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
