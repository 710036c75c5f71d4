-- Where do the two paths part ways on one GEMM query?
--
-- Both trace functions list the steps a latency is reached by, in the same
-- order and with the same columns: the own-site step, or every site-transfer
-- candidate in rank order (blended ones first), then a `result` or `miss`
-- row. This query pairs the two traces step by step (full outer join on
-- `step`, so a step only one side has shows up too) and returns the FIRST
-- step where any column differs, both sides side by side, with a
-- `diagnosis`. No row means the traces are identical.
--
-- Parameters: $db, $quant (string literals), $m, $n, $k (integers). The
-- aicsql shell has no placeholders: replace them by hand, or call
-- `aicsql.parity.bisect(ctx, db, quant, m, n, k)` from Python, which
-- substitutes them (and can swap in other trace functions, e.g. a variant
-- of the Python path under test). Both traces read the session settings
-- (`SET aic.shared_layer = ...`).
--
-- Diagnoses, checked in this order (the first that applies wins):
--   'only the Rust trace has this step' / 'only the Python trace has this step'
--   'different stage'                        (e.g. own-site vs transfer, result vs miss)
--   'tie: same distance, different site order'
--                                            the two paths rank equal-distance sites
--                                            differently: the spec keeps site order
--                                            (first appearance in the table), docs/spec 11.4
--   'different ranking'                      different sites, different distances, and each
--                                            side's site is a candidate on the other side too
--   'different candidate set'                a site one side considers is not in the other's trace
--   'different distance' / 'different coverage' / 'different rank' / 'different selection' /
--   'different weight' / 'different site latency' / 'different site SOL' / 'different util' /
--   'different result' / 'different reason text'
WITH rust AS (
  SELECT * FROM gemm_trace($db, $quant, $m, $n, $k)
),
py AS (
  SELECT * FROM py_gemm_trace($db, $quant, $m, $n, $k)
),
rust_sites AS (
  SELECT DISTINCT site_n, site_k FROM rust WHERE site_n IS NOT NULL
),
py_sites AS (
  SELECT DISTINCT site_n, site_k FROM py WHERE site_n IS NOT NULL
),
paired AS (
  SELECT coalesce(r.step, p.step)            AS step,
         r.step IS NOT NULL                  AS in_rust,
         p.step IS NOT NULL                  AS in_py,
         r.stage AS stage_rust,              p.stage AS stage_py,
         r.site_n AS site_n_rust,            r.site_k AS site_k_rust,
         p.site_n AS site_n_py,              p.site_k AS site_k_py,
         r.distance AS distance_rust,        p.distance AS distance_py,
         r.covers_m AS covers_m_rust,        p.covers_m AS covers_m_py,
         r.rank AS rank_rust,                p.rank AS rank_py,
         r.selected AS selected_rust,        p.selected AS selected_py,
         r.weight AS weight_rust,            p.weight AS weight_py,
         r.site_latency_ms AS site_latency_ms_rust, p.site_latency_ms AS site_latency_ms_py,
         r.site_sol_ms AS site_sol_ms_rust,  p.site_sol_ms AS site_sol_ms_py,
         r.util AS util_rust,                p.util AS util_py,
         r.result_ms AS result_ms_rust,      p.result_ms AS result_ms_py,
         r.reason AS reason_rust,            p.reason AS reason_py
  FROM rust r FULL OUTER JOIN py p ON r.step = p.step
),
flagged AS (
  SELECT paired.*,
         ((site_n_rust IS DISTINCT FROM site_n_py) OR (site_k_rust IS DISTINCT FROM site_k_py))
                                                                        AS site_differs,
         -- Is each side's site a candidate on the other path at all?
         (site_n_rust IS NULL OR in_py_trace.site_n IS NOT NULL)
           AND (site_n_py IS NULL OR in_rust_trace.site_n IS NOT NULL) AS sites_in_both
  FROM paired
  LEFT JOIN py_sites in_py_trace
         ON in_py_trace.site_n = paired.site_n_rust AND in_py_trace.site_k = paired.site_k_rust
  LEFT JOIN rust_sites in_rust_trace
         ON in_rust_trace.site_n = paired.site_n_py AND in_rust_trace.site_k = paired.site_k_py
),
diagnosed AS (
  SELECT flagged.*,
         CASE
           WHEN NOT in_py THEN 'only the Rust trace has this step'
           WHEN NOT in_rust THEN 'only the Python trace has this step'
           WHEN stage_rust IS DISTINCT FROM stage_py THEN 'different stage'
           WHEN site_differs AND (distance_rust = distance_py)
             THEN 'tie: same distance, different site order'
           WHEN site_differs AND sites_in_both THEN 'different ranking'
           WHEN site_differs THEN 'different candidate set'
           WHEN distance_rust IS DISTINCT FROM distance_py THEN 'different distance'
           WHEN covers_m_rust IS DISTINCT FROM covers_m_py THEN 'different coverage'
           WHEN rank_rust IS DISTINCT FROM rank_py THEN 'different rank'
           WHEN selected_rust IS DISTINCT FROM selected_py THEN 'different selection'
           WHEN weight_rust IS DISTINCT FROM weight_py THEN 'different weight'
           WHEN site_latency_ms_rust IS DISTINCT FROM site_latency_ms_py THEN 'different site latency'
           WHEN site_sol_ms_rust IS DISTINCT FROM site_sol_ms_py THEN 'different site SOL'
           WHEN util_rust IS DISTINCT FROM util_py THEN 'different util'
           WHEN result_ms_rust IS DISTINCT FROM result_ms_py THEN 'different result'
           WHEN reason_rust IS DISTINCT FROM reason_py THEN 'different reason text'
         END AS diagnosis
  FROM flagged
)
SELECT step, diagnosis,
       stage_rust, stage_py,
       site_n_rust, site_k_rust, site_n_py, site_k_py,
       distance_rust, distance_py,
       rank_rust, rank_py,
       selected_rust, selected_py,
       weight_rust, weight_py,
       site_latency_ms_rust, site_latency_ms_py,
       util_rust, util_py,
       result_ms_rust, result_ms_py,
       reason_rust, reason_py
FROM diagnosed
WHERE diagnosis IS NOT NULL
ORDER BY step
LIMIT 1
