-- The frontier of aiconfigurator's `cli default` for Llama-3.1-8B on four
-- h200_sxm GPUs (vllm 0.19.0, isl 256, osl 256, prefix 128, TTFT 1500 ms,
-- TPOT 50 ms), agg and disagg, for `aicsql plot pareto`.
--
--   aicsql plot pareto --sql "$(cat queries/plot/pareto.sql)" --out pareto.svg
SELECT 'agg' AS mode, tokens_per_s_per_user, tokens_per_s_per_gpu_cluster, pareto, best_rank, parallel,
       50.0 AS tpot_limit_ms
FROM search_agg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50)
UNION ALL
SELECT 'disagg' AS mode, tokens_per_s_per_user, tokens_per_s_per_gpu_cluster, pareto, best_rank,
       concat(prefill_parallel, ' x', CAST(prefill_workers AS VARCHAR), ' + ', decode_parallel, ' x',
              CAST(decode_workers AS VARCHAR)) AS parallel,
       50.0 AS tpot_limit_ms
FROM search_disagg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 4, 256, 256, 128, 1500, 50)
ORDER BY mode, tokens_per_s_per_user;
