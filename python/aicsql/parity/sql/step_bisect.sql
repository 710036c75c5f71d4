-- Where do the two paths part ways on one engine step?
--
-- `engine_step` (Rust) and `py_engine_step` (Python) return the same rows:
-- one per op (generation: per sampled decode step, each step's
-- `__gen_step_total__` after its ops), then `__step_total__`; under
-- aic.on_miss = 'null' a step that misses gives the op that missed
-- (row_kind 'miss') and a NULL total. This query pairs the rows on
-- (row_kind, gen_step_index, op_name) -- a full outer join, so a row only one
-- side has shows up too -- and returns the FIRST row, in step order, where
-- any priced column differs, both sides side by side, with a `diagnosis`.
-- Miss reasons are worded by each path and are not compared. No row means
-- the steps are identical.
--
-- Parameters: $model, $db, $phase (string literals), $tp, $batch, $isl, $osl
-- (integers), $moe_tp, $moe_ep, $dp, $pp, $cp (integers or NULL: inferred
-- or 1). From Python: `aicsql.parity.bisect_step(ctx, model, db, phase, tp,
-- batch, isl, osl[, moe_tp, moe_ep][, dp=, pp=, cp=])`, which drops the
-- trailing NULL arguments it is not given.
--
-- Diagnoses, checked in this order (the first that applies wins):
--   'only the Rust step has this row' / 'only the Python step has this row'
--   'different lookup'      (table or arguments of the op's first lookup)
--   'different interp path' / 'different count' / 'different quant' /
--   'different latency' / 'different total' / 'different weighted total' /
--   'different sample step' / 'different miss'
WITH rust AS (
  SELECT * FROM engine_step($model, $db, $phase, $tp, $batch, $isl, $osl, $moe_tp, $moe_ep, $dp, $pp, $cp)
),
py AS (
  SELECT * FROM py_engine_step($model, $db, $phase, $tp, $batch, $isl, $osl, $moe_tp, $moe_ep, $dp, $pp, $cp)
),
paired AS (
  SELECT coalesce(r.row_kind, p.row_kind)             AS row_kind,
         coalesce(r.gen_step_index, p.gen_step_index) AS gen_step_index,
         coalesce(r.op_index, p.op_index)             AS op_index,
         coalesce(r.op_name, p.op_name)               AS op_name,
         r.op_name IS NOT NULL AS in_rust,             p.op_name IS NOT NULL AS in_py,
         r.lookup_args AS lookup_rust,                 p.lookup_args AS lookup_py,
         r.interp_path AS interp_path_rust,            p.interp_path AS interp_path_py,
         r.count AS count_rust,                        p.count AS count_py,
         r.quant AS quant_rust,                        p.quant AS quant_py,
         r.latency_ms AS latency_ms_rust,              p.latency_ms AS latency_ms_py,
         r.total_ms AS total_ms_rust,                  p.total_ms AS total_ms_py,
         r.weighted_total_ms AS weighted_rust,         p.weighted_total_ms AS weighted_py,
         r.gen_s AS gen_s_rust,                        p.gen_s AS gen_s_py,
         r.gen_repeat AS gen_repeat_rust,              p.gen_repeat AS gen_repeat_py,
         r.miss AS miss_rust,                          p.miss AS miss_py,
         r.reason AS reason_rust,                      p.reason AS reason_py
  FROM rust r FULL OUTER JOIN py p
    ON r.row_kind = p.row_kind
   AND r.op_name = p.op_name
   AND r.gen_step_index IS NOT DISTINCT FROM p.gen_step_index
),
diagnosed AS (
  SELECT paired.*,
         CASE
           WHEN NOT in_py THEN 'only the Rust step has this row'
           WHEN NOT in_rust THEN 'only the Python step has this row'
           WHEN lookup_rust IS DISTINCT FROM lookup_py THEN 'different lookup'
           WHEN interp_path_rust IS DISTINCT FROM interp_path_py THEN 'different interp path'
           WHEN count_rust IS DISTINCT FROM count_py THEN 'different count'
           WHEN quant_rust IS DISTINCT FROM quant_py THEN 'different quant'
           WHEN latency_ms_rust IS DISTINCT FROM latency_ms_py THEN 'different latency'
           WHEN total_ms_rust IS DISTINCT FROM total_ms_py THEN 'different total'
           WHEN weighted_rust IS DISTINCT FROM weighted_py THEN 'different weighted total'
           WHEN (gen_s_rust IS DISTINCT FROM gen_s_py) OR (gen_repeat_rust IS DISTINCT FROM gen_repeat_py)
             THEN 'different sample step'
           WHEN miss_rust IS DISTINCT FROM miss_py THEN 'different miss'
         END AS diagnosis
  FROM paired
)
SELECT row_kind, gen_step_index, op_index, op_name, diagnosis,
       lookup_rust, lookup_py,
       interp_path_rust, interp_path_py,
       latency_ms_rust, latency_ms_py,
       total_ms_rust, total_ms_py,
       weighted_rust, weighted_py,
       reason_rust, reason_py
FROM diagnosed
WHERE diagnosis IS NOT NULL
ORDER BY coalesce(gen_step_index, 2147483647),
         CASE row_kind WHEN 'op' THEN 0 WHEN 'miss' THEN 1 WHEN 'gen_step_total' THEN 2 ELSE 3 END,
         op_index
LIMIT 1
