-- The verdict of the support-matrix parity scan: one row per entry, the Rust
-- path's search frame against the Python path's, graded as upstream grades
-- its own Rust port, plus this project's bar on top.
--
-- Input: parity_search_cells and parity_search_runs, as search_agg_parity.sql
-- or search_disagg_parity.sql leave them (the same statements grade both
-- modes). Two statements: the rows keyed and paired (parity_search_pairs),
-- then the verdict.
--
-- Upstream's grading (aiconfigurator v0.11.0, tools/support_matrix/:
-- scan_rust_parity.py's pareto_entry, support_matrix.py's _compare_pareto_dfs
-- and _compare_frontier_envelope), restated:
--   1. the Python path failed or found no candidate: ERROR;
--   2. else the Rust path failed or found none: REGRESSION;
--   3. else, when the row counts differ, or the identity columns (every
--      compared column but the approximate ones) differ once both frames are
--      sorted by them: the frontier envelope decides -- max(tokens/s/user),
--      min(tpot), min(request_latency) over all rows, each within
--      |d| <= 1e-3 + 5 % of max(|rust|, |python|, 1e-3) -- STRICT_PASS if it
--      holds (upstream's strict check falls back to the envelope and then
--      reports no mismatch), DRIFT if not;
--   4. else every approximate cell of the sorted-and-paired rows within
--      |python - rust| <= 1e-3 + 1 % of |rust| (both missing counts as equal):
--      STRICT_PASS;
--   5. else within 1.0 + 100 % of |rust| (upstream's re-run with rtol = atol = 1,
--      which in this branch never consults the envelope): ENVELOPE_PASS;
--   6. else DRIFT.
-- And on top: BIT_IDENTICAL where upstream says STRICT_PASS and both frames
-- are equal cell for cell, row for row in the spec's order (ties ordered as
-- docs/spec/search.md 6 says), the extra columns included; NO_CANDIDATE where
-- upstream says ERROR because neither path finds a candidate and both give
-- the same kind of reason (every layout raised, nothing fits in GPU memory,
-- nothing meets the limits): the spec prices nothing there, so the entry is
-- not covered -- not a failure of either path, and not a pass.
--
-- Output: parity_search_runs' columns, then
--   status            BIT_IDENTICAL, NO_CANDIDATE, STRICT_PASS, ENVELOPE_PASS, DRIFT, REGRESSION, ERROR
--   upstream_status   what upstream's scan would say (STRICT_PASS for BIT_IDENTICAL)
--   rust_rows, py_rows
--   identity_equal    the identity columns agree after sorting (NULL: row counts differ)
--   first_diff_pos, first_diff_column   the first cell, in the spec's row order and
--                     column order, where the frames are not bit-identical (NULL if none):
--                     where aicsql.parity.bisect_search starts
--   worst_column, rust_value, py_value, rel_diff   what decided the grade: the envelope
--                     metric that moved most (rows or identities differ), else the
--                     approximate column with the largest relative difference, else the
--                     first differing cell; values as text (numbers in their shortest
--                     exact form), rel_diff = |d| / max(|rust|, |python|, 1e-3)
--   strict_rel_diff   the largest relative difference of an approximate cell (paired rows)
--   envelope_rel_diff the largest relative difference of an envelope metric
--   detail            the reason in words
-- 1. The rows of both frames keyed and paired (materialised: the verdict reads them three times).
CREATE OR REPLACE TABLE parity_search_pairs AS
WITH
rows_ AS (  -- one row per frame row, keyed by its identity columns as text, in column order
    SELECT side, entry, pos,
           string_agg(coalesce(txt, CAST(num AS VARCHAR), '<null>'), ' | ' ORDER BY ord) AS key
    FROM parity_search_cells
    WHERE kind = 'identity'
    GROUP BY side, entry, pos
),
ranked AS (  -- upstream sorts both frames by the identity columns (a stable sort); equal keys keep frame order
    SELECT side, entry, pos, key, row_number() OVER (PARTITION BY side, entry ORDER BY key, pos) AS rank
    FROM rows_
)
-- the k-th sorted row of each side, or of one side only (rows only one frame has: counted, never paired)
SELECT coalesce(r.entry, p.entry) AS entry, coalesce(r.rank, p.rank) AS rank, r.pos AS rust_pos, p.pos AS py_pos,
       r.key = p.key AS same_key
FROM (SELECT * FROM ranked WHERE side = 'rust') r
FULL JOIN (SELECT * FROM ranked WHERE side = 'py') p ON p.entry = r.entry AND p.rank = r.rank;

-- 2. The verdict.
WITH
counts AS (
    SELECT entry, count(rust_pos) AS rust_rows, count(py_pos) AS py_rows
    FROM parity_search_pairs
    GROUP BY entry
),
paired AS (  -- compared only when the row counts agree
    SELECT * FROM parity_search_pairs WHERE rust_pos IS NOT NULL AND py_pos IS NOT NULL
),
identity_check AS (
    SELECT entry, bool_and(same_key) AS identity_equal, min(CASE WHEN NOT same_key THEN rank END) AS first_bad_rank
    FROM paired
    GROUP BY entry
),
identity_first AS (  -- the first identity cell that differs in the first pair of rows that differ
    SELECT pr.entry,
           first_value(cr.col ORDER BY cr.ord) AS col,
           first_value(coalesce(cr.txt, CAST(cr.num AS VARCHAR)) ORDER BY cr.ord) AS rust_value,
           first_value(coalesce(cp.txt, CAST(cp.num AS VARCHAR)) ORDER BY cr.ord) AS py_value
    FROM identity_check i
    JOIN paired pr ON pr.entry = i.entry AND pr.rank = i.first_bad_rank
    JOIN (SELECT * FROM parity_search_cells WHERE side = 'rust' AND kind = 'identity') cr
      ON cr.entry = pr.entry AND cr.pos = pr.rust_pos
    JOIN (SELECT * FROM parity_search_cells WHERE side = 'py' AND kind = 'identity') cp
      ON cp.entry = pr.entry AND cp.pos = pr.py_pos AND cp.ord = cr.ord
    WHERE (cr.num IS DISTINCT FROM cp.num) OR (cr.txt IS DISTINCT FROM cp.txt)  -- (parenthesised: IS DISTINCT FROM binds looser than OR)
    GROUP BY pr.entry
),
approx_cells AS (  -- every approximate cell of the paired rows
    SELECT pr.entry, pr.rank, cr.ord, cr.col, cr.num AS r, cp.num AS p,
           (cr.num IS NULL OR isnan(cr.num)) AND (cp.num IS NULL OR isnan(cp.num)) AS both_missing,
           abs(cp.num - cr.num) AS d
    FROM paired pr
    JOIN (SELECT * FROM parity_search_cells WHERE side = 'rust' AND kind = 'approx') cr
      ON cr.entry = pr.entry AND cr.pos = pr.rust_pos
    JOIN (SELECT * FROM parity_search_cells WHERE side = 'py' AND kind = 'approx') cp
      ON cp.entry = pr.entry AND cp.pos = pr.py_pos AND cp.ord = cr.ord
),
approx_rel AS (
    SELECT *,
           CASE WHEN both_missing THEN 0.0
                WHEN d IS NULL OR isnan(d) THEN CAST('inf' AS DOUBLE)  -- one side missing
                ELSE d / greatest(abs(p), abs(r), 1e-3) END AS rel
    FROM approx_cells
),
approx_check AS (
    SELECT entry,
           bool_and(both_missing OR coalesce(d <= 1e-3 + 0.01 * abs(r), false)) AS strict_ok,
           bool_and(both_missing OR coalesce(d <= 1.0 + 1.0 * abs(r), false)) AS loose_ok,
           max(rel) AS worst_rel,
           first_value(col ORDER BY rel DESC, rank, ord) AS worst_col,
           first_value(CAST(r AS VARCHAR) ORDER BY rel DESC, rank, ord) AS worst_rust,
           first_value(CAST(p AS VARCHAR) ORDER BY rel DESC, rank, ord) AS worst_py
    FROM approx_rel
    GROUP BY entry
),
envelope_side AS (  -- the frontier envelope of each frame, NaN dropped
    SELECT side, entry,
           max(CASE WHEN col = 'tokens_per_s_per_user' AND NOT isnan(num) THEN num END) AS user_max,
           min(CASE WHEN col = 'tpot_ms' AND NOT isnan(num) THEN num END) AS tpot_min,
           min(CASE WHEN col = 'request_latency_ms' AND NOT isnan(num) THEN num END) AS latency_min
    FROM parity_search_cells
    WHERE col IN ('tokens_per_s_per_user', 'tpot_ms', 'request_latency_ms')
    GROUP BY side, entry
),
envelope_metrics AS (
    SELECT r.entry, 1 AS ord, 'max(tokens_per_s_per_user)' AS metric, r.user_max AS rv, p.user_max AS pv
    FROM (SELECT * FROM envelope_side WHERE side = 'rust') r JOIN (SELECT * FROM envelope_side WHERE side = 'py') p ON p.entry = r.entry
    UNION ALL
    SELECT r.entry, 2, 'min(tpot_ms)', r.tpot_min, p.tpot_min
    FROM (SELECT * FROM envelope_side WHERE side = 'rust') r JOIN (SELECT * FROM envelope_side WHERE side = 'py') p ON p.entry = r.entry
    UNION ALL
    SELECT r.entry, 3, 'min(request_latency_ms)', r.latency_min, p.latency_min
    FROM (SELECT * FROM envelope_side WHERE side = 'rust') r JOIN (SELECT * FROM envelope_side WHERE side = 'py') p ON p.entry = r.entry
),
envelope_check AS (  -- a metric one frame lacks is skipped, as upstream skips it
    SELECT entry,
           bool_and(rv IS NULL OR pv IS NULL
                    OR abs(pv - rv) <= 1e-3 + 0.05 * greatest(abs(pv), abs(rv), 1e-3)) AS envelope_ok,
           max(abs(pv - rv) / greatest(abs(pv), abs(rv), 1e-3)) AS envelope_rel,
           first_value(metric ORDER BY abs(pv - rv) / greatest(abs(pv), abs(rv), 1e-3) DESC NULLS LAST, ord) AS metric,
           first_value(CAST(rv AS VARCHAR) ORDER BY abs(pv - rv) / greatest(abs(pv), abs(rv), 1e-3) DESC NULLS LAST, ord) AS rv,
           first_value(CAST(pv AS VARCHAR) ORDER BY abs(pv - rv) / greatest(abs(pv), abs(rv), 1e-3) DESC NULLS LAST, ord) AS pv
    FROM envelope_metrics
    GROUP BY entry
),
exact_diff AS (  -- every cell where the frames are not identical, compared row for row in the spec's order
    SELECT coalesce(r.entry, p.entry) AS entry, coalesce(r.pos, p.pos) AS pos, coalesce(r.ord, p.ord) AS ord,
           coalesce(r.col, p.col) AS col,
           coalesce(r.txt, CAST(r.num AS VARCHAR)) AS rv, coalesce(p.txt, CAST(p.num AS VARCHAR)) AS pv,
           abs(r.num - p.num) / greatest(abs(r.num), abs(p.num), 1e-3) AS rel
    FROM (SELECT * FROM parity_search_cells WHERE side = 'rust') r
    FULL JOIN (SELECT * FROM parity_search_cells WHERE side = 'py') p
      ON p.entry = r.entry AND p.pos = r.pos AND p.ord = r.ord
    WHERE r.entry IS NULL OR p.entry IS NULL OR (r.num IS DISTINCT FROM p.num) OR (r.txt IS DISTINCT FROM p.txt)
),
exact_check AS (
    SELECT entry,
           min(pos) AS first_pos,
           first_value(col ORDER BY pos, ord) AS first_col,
           first_value(rv ORDER BY pos, ord) AS first_rust,
           first_value(pv ORDER BY pos, ord) AS first_py,
           first_value(rel ORDER BY pos, ord) AS first_rel
    FROM exact_diff
    GROUP BY entry
),
graded AS (
    SELECT u.*,
           coalesce(c.rust_rows, 0) AS n_rust, coalesce(c.py_rows, 0) AS n_py,
           u.py_error IS NULL AND coalesce(c.py_rows, 0) > 0 AS py_ok,
           u.rust_error IS NULL AND coalesce(c.rust_rows, 0) > 0 AS rust_ok,
           coalesce(c.rust_rows, 0) = coalesce(c.py_rows, 0) AS same_rows,
           i.identity_equal, f.col AS id_col, f.rust_value AS id_rust, f.py_value AS id_py, i.first_bad_rank,
           a.strict_ok, a.loose_ok, a.worst_rel, a.worst_col, a.worst_rust, a.worst_py,
           e.envelope_ok, e.envelope_rel, e.metric AS env_metric, e.rv AS env_rust, e.pv AS env_py,
           x.entry IS NULL AS exact, x.first_pos, x.first_col, x.first_rust, x.first_py, x.first_rel,
           -- why a search found nothing, in its own words (search_args.rs, sweep.py): the kind of reason
           CASE WHEN strpos(u.rust_error, ': no candidate for ') = 0 THEN NULL
                WHEN strpos(u.rust_error, 'priced a point: ') > 0 OR strpos(u.rust_error, ' worker priced: ') > 0 THEN 'raised'
                WHEN strpos(u.rust_error, 'GPU memory at any parallel config') > 0 THEN 'memory'
                WHEN strpos(u.rust_error, 'meets the TTFT limit') > 0 THEN 'limits'
           END AS rust_refusal,
           CASE WHEN strpos(u.py_error, 'RuntimeError: sweep_') > 0 THEN 'raised'
                WHEN strpos(u.py_error, 'InsufficientMemoryError: sweep_') > 0 THEN 'memory'
                WHEN strpos(u.py_error, 'NoFeasibleConfigError: sweep_') > 0
                  OR strpos(u.py_error, ': no disaggregated deployment meets the TTFT') > 0 THEN 'limits'
           END AS py_refusal
    FROM parity_search_runs u
    LEFT JOIN counts c ON c.entry = u.entry
    LEFT JOIN identity_check i ON i.entry = u.entry
    LEFT JOIN identity_first f ON f.entry = u.entry
    LEFT JOIN approx_check a ON a.entry = u.entry
    LEFT JOIN envelope_check e ON e.entry = u.entry
    LEFT JOIN exact_check x ON x.entry = u.entry
),
upstream AS (
    SELECT *,
           CASE
             WHEN NOT py_ok THEN 'ERROR'
             WHEN NOT rust_ok THEN 'REGRESSION'
             WHEN NOT same_rows OR NOT identity_equal THEN
               CASE WHEN coalesce(envelope_ok, true) THEN 'STRICT_PASS' ELSE 'DRIFT' END
             WHEN strict_ok THEN 'STRICT_PASS'
             WHEN loose_ok THEN 'ENVELOPE_PASS'
             ELSE 'DRIFT'
           END AS upstream_status,
           NOT py_ok OR NOT rust_ok AS failed,
           n_rust = 0 AND n_py = 0 AND rust_refusal = py_refusal AS neither,
           py_ok AND rust_ok AND (NOT same_rows OR NOT identity_equal) AS by_envelope
    FROM graded
)
SELECT u.* EXCLUDE (n_rust, n_py, py_ok, rust_ok, same_rows, identity_equal, id_col, id_rust, id_py, first_bad_rank,
                    strict_ok, loose_ok, worst_rel, worst_col, worst_rust, worst_py,
                    envelope_ok, envelope_rel, env_metric, env_rust, env_py,
                    exact, first_pos, first_col, first_rust, first_py, first_rel,
                    rust_refusal, py_refusal, upstream_status, failed, neither, by_envelope),
       CASE WHEN upstream_status = 'STRICT_PASS' AND exact THEN 'BIT_IDENTICAL'
            WHEN coalesce(neither, false) THEN 'NO_CANDIDATE'
            ELSE upstream_status END AS status,
       upstream_status,
       n_rust AS rust_rows,
       n_py AS py_rows,
       CASE WHEN NOT failed AND same_rows THEN identity_equal END AS identity_equal,
       CASE WHEN NOT failed AND NOT exact THEN first_pos END AS first_diff_pos,
       CASE WHEN NOT failed AND NOT exact THEN first_col END AS first_diff_column,
       CASE WHEN failed OR exact THEN NULL
            WHEN by_envelope THEN env_metric
            WHEN worst_rel > 0 THEN worst_col
            ELSE first_col END AS worst_column,
       CASE WHEN failed OR exact THEN NULL
            WHEN by_envelope THEN env_rust
            WHEN worst_rel > 0 THEN worst_rust
            ELSE first_rust END AS rust_value,
       CASE WHEN failed OR exact THEN NULL
            WHEN by_envelope THEN env_py
            WHEN worst_rel > 0 THEN worst_py
            ELSE first_py END AS py_value,
       CASE WHEN failed THEN CAST(NULL AS DOUBLE)
            WHEN exact THEN 0.0
            WHEN by_envelope THEN envelope_rel
            WHEN worst_rel > 0 THEN worst_rel
            ELSE first_rel END AS rel_diff,
       CASE WHEN NOT failed AND same_rows AND identity_equal THEN worst_rel END AS strict_rel_diff,
       CASE WHEN NOT failed THEN envelope_rel END AS envelope_rel_diff,
       CASE
         WHEN coalesce(neither, false) THEN concat('no candidate on either path (',
                                            CASE py_refusal WHEN 'raised' THEN 'every layout raised'
                                                            WHEN 'memory' THEN 'the model fits in no layout'
                                                            ELSE 'no config meets the limits' END,
                                            '): ', py_error)
         WHEN py_error IS NOT NULL THEN concat('the Python path failed: ', py_error)
         WHEN n_py = 0 THEN 'the Python path found no candidate'
         WHEN rust_error IS NOT NULL THEN concat('the Rust path failed: ', rust_error)
         WHEN n_rust = 0 THEN 'the Rust path found no candidate'
         WHEN NOT same_rows THEN concat('row counts differ (python ', CAST(n_py AS VARCHAR), ', rust ', CAST(n_rust AS VARCHAR),
                                        '); frontier envelope ', CASE WHEN coalesce(envelope_ok, true) THEN 'within' ELSE 'beyond' END, ' 5 %')
         WHEN NOT identity_equal THEN concat('different configurations (sorted row ', CAST(first_bad_rank - 1 AS VARCHAR), ', ', id_col,
                                             ': rust ', coalesce(id_rust, 'NULL'), ', python ', coalesce(id_py, 'NULL'),
                                             '); frontier envelope ', CASE WHEN coalesce(envelope_ok, true) THEN 'within' ELSE 'beyond' END, ' 5 %')
         WHEN NOT strict_ok AND loose_ok THEN concat(worst_col, ' beyond 1e-3 + 1 %, within 1 + 100 %')
         WHEN NOT strict_ok THEN concat(worst_col, ' beyond 1 + 100 %')
         WHEN NOT exact THEN concat('within upstream tolerance; not bit-identical from row ', CAST(first_pos AS VARCHAR), ', ', first_col)
       END AS detail
FROM upstream u
ORDER BY u.entry
