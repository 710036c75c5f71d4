-- The deployment search: aiconfigurator's `cli default` as SQL.
-- Run: cargo run -- -f examples/search.sql
-- Numbers are aiconfigurator v0.11.0's, frame for frame.

-- Meta-Llama-3.1-8B on 8 GPUs, 1024 input / 256 output tokens, TTFT limit
-- 1 s, TPOT limit 20 ms: the best deployment on four databases, aggregated
-- against disaggregated (one search_best per database and mode).
SELECT db, mode,
       round(s['best_tokens_per_s_per_gpu_cluster'], 1) AS tok_s_gpu_cluster,
       coalesce(s['parallel'] || ' bs ' || CAST(s['bs'] AS VARCHAR),
                s['prefill_parallel'] || ' x' || CAST(s['prefill_workers'] AS VARCHAR) || ' + ' ||
                s['decode_parallel'] || ' x' || CAST(s['decode_workers'] AS VARCHAR)) AS config,
       round(s['ttft_ms'], 1) AS ttft_ms, round(s['tpot_ms'], 2) AS tpot_ms,
       s['candidates'] AS candidates, s['reason'] AS why_not
FROM (SELECT db, mode, search_best('meta-llama/Meta-Llama-3.1-8B', db, 8, 1024, 256, 0, 1000, 20, mode) AS s
      FROM (VALUES ('h200_sxm/vllm/0.19.0'), ('h200_sxm/sglang/0.5.10'), ('h200_sxm/trtllm/1.3.0rc10'),
                   ('b200_sxm/vllm/0.19.0')) AS d(db)
      CROSS JOIN (VALUES ('agg'), ('disagg')) AS m(mode))
ORDER BY tok_s_gpu_cluster DESC NULLS LAST;

-- Which mode the spec would choose on one database, and its best config.
SELECT mode, chosen, round(best_tokens_per_s_per_gpu_cluster, 1) AS tok_s_gpu_cluster, parallel, bs,
       prefill_parallel, prefill_workers, decode_parallel, decode_bs, decode_workers
FROM search_default('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 8, 1024, 256, 0, 1000, 20);

-- The aggregated frontier there: tokens/s/gpu_cluster against tokens/s/user,
-- the best configs under the TPOT limit ranked.
SELECT round(tokens_per_s_per_user, 1) AS tok_s_user, round(tokens_per_s_per_gpu_cluster, 1) AS tok_s_gpu_cluster,
       parallel, bs, ctx_tokens, tpot_ms, best_rank
FROM search_agg('meta-llama/Meta-Llama-3.1-8B', 'h200_sxm/vllm/0.19.0', 8, 1024, 256, 0, 1000, 20)
WHERE pareto
ORDER BY tokens_per_s_per_user;
