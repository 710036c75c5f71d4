-- How far the estimates are from measured hardware: every end-to-end measurement upstream keeps
-- (aic.meta.silicon_refs, 35 points) priced as the spec's own accuracy report prices it
-- (tools/accuracy_tracking/run_silicon.py; docs/spec/options.md 6):
--   * cli_estimate's defaults plus the point's quant overrides (gemm_quant_mode, moe_quant_mode) and
--     its parallel layout (agg; or prefill and decode workers): unset widths are 1, as the spec's; an
--     unset MoE width, or 0 (a dense model's measured 0 means "none", as the spec reads it), is None;
--   * the measured backend version when the data has a database for it, else the newest database of
--     that system and backend (predicted_with_version says which);
--   * relative errors (predicted - measured) / measured.
-- A point the spec cannot price (a missing table, out of memory) has status 'no estimate' and the reason.
-- Output: one row per measurement, in the file's order.
WITH dbs AS (
    SELECT DISTINCT db, system, backend, version, latest FROM aic.meta.databases
),
refs AS (
    SELECT r.*,
           coalesce(measured.db, newest.db) AS db,
           coalesce(measured.version, newest.version) AS predicted_with_version,
           named_struct('gemm_quant', r.gemm_quant_mode, 'moe_quant', r.moe_quant_mode) AS options
    FROM (SELECT row_number() OVER () AS n, * FROM aic.meta.silicon_refs) r
    LEFT JOIN dbs measured
           ON measured.system = r.system AND measured.backend = r.backend AND measured.version = r.backend_version
    LEFT JOIN dbs newest ON newest.system = r.system AND newest.backend = r.backend AND newest.latest
),
priced AS (
    SELECT n, id, mode, model, system, backend, backend_version, predicted_with_version, silicon_ttft_ms, silicon_tpot_ms,
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
       CASE WHEN predicted_ttft_ms IS NULL THEN 'no estimate' ELSE 'OK' END AS status,
       mode, model, system, backend, backend_version, predicted_with_version,
       predicted_ttft_ms, predicted_tpot_ms, silicon_ttft_ms, silicon_tpot_ms,
       (predicted_ttft_ms - silicon_ttft_ms) / greatest(abs(silicon_ttft_ms), 1e-9) AS ttft_rel_err,
       (predicted_tpot_ms - silicon_tpot_ms) / greatest(abs(silicon_tpot_ms), 1e-9) AS tpot_rel_err,
       reason
FROM predicted
ORDER BY n;
