-- The support-matrix scan: for every PASS entry of aic.meta.support_matrix
-- whose model the engine step prices (its architecture and quantization
-- parse: it is listed by aic.meta.model_gemms), aiconfigurator's `cli
-- default` search of the entry's mode at the entry's own arguments (its
-- `command` column holds the upstream CLI call: --total-gpus, --isl, --osl,
-- --prefix, --ttft, --tpot), reporting the best tokens/s/gpu_cluster and
-- its layout, or why there is none. One row per entry.
--
--   aicsql -f queries/search/support_matrix_scan.sql
--
-- The entries run side by side over datafusion.execution.target_partitions
-- partitions, one search per row (search_best).
WITH entries AS (
    SELECT hugging_face_id AS model,
           concat(system, '/', backend, '/', version) AS db,
           mode,
           CAST(regexp_match(command, '--total-gpus (\d+)')[1] AS BIGINT) AS total_gpus,
           CAST(regexp_match(command, '--isl (\d+)')[1] AS BIGINT) AS isl,
           CAST(regexp_match(command, '--osl (\d+)')[1] AS BIGINT) AS osl,
           CAST(coalesce(regexp_match(command, '--prefix (\d+)')[1], '0') AS BIGINT) AS prefix,
           CAST(regexp_match(command, '--ttft ([0-9.]+)')[1] AS DOUBLE) AS ttft_ms,
           CAST(regexp_match(command, '--tpot ([0-9.]+)')[1] AS DOUBLE) AS tpot_ms
    FROM aic.meta.support_matrix
    WHERE status = 'PASS'
      AND hugging_face_id IN (SELECT DISTINCT model FROM aic.meta.model_gemms)
),
searched AS (
    SELECT *, search_best(model, db, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, mode) AS s
    FROM entries
)
SELECT model, db, mode, total_gpus, isl, osl, prefix, ttft_ms, tpot_ms,
       s['best_tokens_per_s_per_gpu_cluster'] AS best_tokens_per_s_per_gpu_cluster,
       s['candidates'] AS candidates,
       coalesce(s['parallel'], concat(s['prefill_parallel'], ' x', CAST(s['prefill_workers'] AS VARCHAR), ' + ',
                                      s['decode_parallel'], ' x', CAST(s['decode_workers'] AS VARCHAR))) AS config,
       s['ttft_ms'] AS ttft, s['tpot_ms'] AS tpot, s['num_total_gpus'] AS gpus,
       s['reason'] AS reason
FROM searched
ORDER BY model, db, mode;
