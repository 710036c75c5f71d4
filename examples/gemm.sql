-- GEMM estimates as SQL: gemm_latency, gemm_sol and gemm_trace.
-- Run with: cargo run -- -f examples/gemm.sql

-- The qkv projection of Qwen3-32B at tp 8 (n = 1280, k = 5120) is not a
-- measured (n, k) site on h200_sxm/vllm/0.19.0: it is priced by site
-- transfer from the four nearest sites.
SELECT m,
       gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', m, 1280, 5120) AS latency_ms,
       gemm_sol('h200_sxm/vllm/0.19.0', 'fp8_block', m, 1280, 5120) AS sol_ms
FROM (VALUES (1), (4), (32), (416), (1024)) AS t(m)
ORDER BY m;

-- Why: the neighbours, their distance in (log2 n, log2 k), weight and util.
-- Ranks 4 and 5 tie on distance; site order (first appearance in the table)
-- puts (1536, 4096) first.
SELECT step, stage, rank, site_n, site_k, distance, selected, weight, site_latency_ms, util, result_ms
FROM gemm_trace('h200_sxm/vllm/0.19.0', 'fp8_block', 1024, 1280, 5120)
WHERE rank <= 6 OR stage IN ('result', 'miss')
ORDER BY step;

-- The same shape on every system's vllm 0.19.0 database.
SELECT system, gemm_latency(db, 'fp8_block', 4096, 6400, 5120) AS ffn1_ms
FROM aic.meta.databases
WHERE "table" = 'gemm' AND backend = 'vllm' AND version = '0.19.0'
ORDER BY ffn1_ms;
