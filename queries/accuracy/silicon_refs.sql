-- How far the estimates are from measured hardware: every end-to-end measurement upstream keeps
-- (aic.meta.silicon_refs, 35 points) priced as the spec's own accuracy report prices it
-- (tools/accuracy_tracking/run_silicon.py; docs/spec/options.md 6):
--   * cli_estimate's defaults plus the point's quant overrides (gemm_quant_mode, moe_quant_mode) and
--     its parallel layout (agg; or prefill and decode workers): unset widths are 1, as the spec's; an
--     unset MoE width, or 0 (a dense model's measured 0 means "none", as the spec reads it), is None;
--   * the measured backend version when the data has a database for it, else the newest database of
--     that system and backend;
--   * relative errors (predicted - measured) / measured.
-- Three statements:
--   1. the table silicon_accuracy: every point with its workload, the database it was priced on, the
--      prediction, the errors, `status` ('OK', or the class of the error the spec raises: a table
--      miss is PerfDataNotAvailableError, out of GPU memory RuntimeError, a deployment the spec
--      refuses ValueError) and `reason` (the miss or refusal in words);
--   2. the spec's report, one row per point ORDER BY id, its columns exactly;
--   3. a summary per backend and system: points, points priced, mean and worst absolute error.
-- `aicsql plot accuracy --file queries/accuracy/silicon_refs.sql --sql 'SELECT * FROM silicon_accuracy'`
-- draws predicted against measured.
CREATE OR REPLACE TABLE silicon_accuracy AS
WITH dbs AS (
    SELECT DISTINCT db, system, backend, version, latest FROM aic.meta.databases
),
refs AS (
    SELECT r.*,
           coalesce(measured.db, newest.db) AS db,
           coalesce(measured.version, newest.version) AS priced_with_version,
           named_struct('gemm_quant', r.gemm_quant_mode, 'moe_quant', r.moe_quant_mode) AS options
    FROM aic.meta.silicon_refs r
    LEFT JOIN dbs measured
           ON measured.system = r.system AND measured.backend = r.backend AND measured.version = r.backend_version
    LEFT JOIN dbs newest ON newest.system = r.system AND newest.backend = r.backend AND newest.latest
),
priced AS (
    SELECT id, mode, model, system, backend, backend_version, db, priced_with_version,
           silicon_ttft_ms, silicon_tpot_ms,
           CASE WHEN mode = 'agg' THEN
               estimate_agg(model, db, concat('tp', coalesce(tp_size, 1), 'pp', coalesce(pp_size, 1), 'dp', coalesce(attention_dp_size, 1),
                                   'etp', coalesce(CAST(nullif(moe_tp_size, 0) AS VARCHAR), 'None'),
                                   'ep', coalesce(CAST(nullif(moe_ep_size, 0) AS VARCHAR), 'None')),
                            batch_size, isl, osl, 0, NULL, NULL, NULL, options)
           END AS agg,
           CASE WHEN mode = 'disagg' THEN
               estimate_disagg(model, db,
                               concat('tp', coalesce(prefill_tp_size, 1), 'pp', coalesce(prefill_pp_size, 1), 'dp', coalesce(prefill_attention_dp_size, 1),
                                      'etp', coalesce(CAST(nullif(prefill_moe_tp_size, 0) AS VARCHAR), 'None'),
                                      'ep', coalesce(CAST(nullif(prefill_moe_ep_size, 0) AS VARCHAR), 'None')),
                               prefill_batch_size, prefill_num_workers,
                               concat('tp', coalesce(decode_tp_size, 1), 'pp', coalesce(decode_pp_size, 1), 'dp', coalesce(decode_attention_dp_size, 1),
                                      'etp', coalesce(CAST(nullif(decode_moe_tp_size, 0) AS VARCHAR), 'None'),
                                      'ep', coalesce(CAST(nullif(decode_moe_ep_size, 0) AS VARCHAR), 'None')),
                               decode_batch_size, decode_num_workers, isl, osl, options)
           END AS disagg
    FROM refs
),
predicted AS (
    SELECT *,
           coalesce(agg['ttft_ms'], disagg['ttft_ms']) AS predicted_ttft_ms,
           coalesce(agg['tpot_ms'], disagg['tpot_ms']) AS predicted_tpot_ms,
           coalesce(agg['reason'], disagg['reason']) AS reason
    FROM priced
)
SELECT id,
       CASE WHEN predicted_ttft_ms IS NOT NULL THEN 'OK'
            WHEN reason LIKE 'perf data not available%' THEN 'PerfDataNotAvailableError'
            WHEN reason LIKE 'OOM:%' THEN 'RuntimeError'
            ELSE 'ValueError' END AS status,
       mode, model, system, backend, backend_version, db, priced_with_version,
       predicted_ttft_ms, predicted_tpot_ms, silicon_ttft_ms, silicon_tpot_ms,
       (predicted_ttft_ms - silicon_ttft_ms) / greatest(abs(silicon_ttft_ms), 1e-9) AS ttft_rel_err,
       (predicted_tpot_ms - silicon_tpot_ms) / greatest(abs(silicon_tpot_ms), 1e-9) AS tpot_rel_err,
       reason
FROM predicted;

-- The spec's report (run_silicon.py's columns; the version is the one a prediction was made with).
SELECT id, status, predicted_ttft_ms, predicted_tpot_ms, silicon_ttft_ms, silicon_tpot_ms,
       ttft_rel_err, tpot_rel_err,
       CASE WHEN status = 'OK' THEN priced_with_version END AS predicted_with_version
FROM silicon_accuracy
ORDER BY id;

-- Per backend and system: how many points, how many priced, mean and worst |relative error|.
SELECT backend, system,
       count(*) AS points,
       count(*) FILTER (WHERE status = 'OK') AS priced,
       avg(abs(ttft_rel_err)) AS mean_abs_ttft_err,
       max(abs(ttft_rel_err)) AS worst_abs_ttft_err,
       avg(abs(tpot_rel_err)) AS mean_abs_tpot_err,
       max(abs(tpot_rel_err)) AS worst_abs_tpot_err
FROM silicon_accuracy
GROUP BY backend, system
ORDER BY backend, system;
