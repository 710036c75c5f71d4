-- A first look at the published kernel-performance data.
-- Run with: cargo run -- -f examples/tour.sql

-- Which databases (system/backend/version) carry a GEMM table, per system?
SELECT system, count(*) AS gemm_databases,
       array_to_string(array_sort(array_agg(DISTINCT backend)), ', ') AS backends
FROM aic.meta.databases
WHERE "table" = 'gemm'
GROUP BY system
ORDER BY gemm_databases DESC, system;

-- The GPU constants the estimators use, for the systems in the goldens.
SELECT system, mem_bw / 1e12 AS mem_tb_s, bfloat16_tc_flops / 1e12 AS bf16_tflops,
       fp8_tc_flops / 1e12 AS fp8_tflops, fp4_tc_flops / 1e12 AS fp4_tflops,
       num_gpus_per_node, intra_node_bw / 1e9 AS nvlink_gb_s
FROM aic.meta.systems
WHERE system IN ('h200_sxm', 'gb200', 'h100_sxm', 'a100_sxm')
ORDER BY system;

-- Measured GEMM rows of one database, by quant mode (filters on
-- system/backend/version select the file before anything is read).
SELECT gemm_dtype, count(*) AS rows, count(DISTINCT (n, k)) AS nk_sites,
       min(m) AS min_m, max(m) AS max_m
FROM aic.perf.gemm
WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0'
GROUP BY gemm_dtype
ORDER BY gemm_dtype;

-- Measured fp8_block latencies at one (n, k) site, a few token counts m.
SELECT m, n, k, latency AS latency_ms
FROM aic.perf.gemm
WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0'
  AND gemm_dtype = 'fp8_block' AND n = 1536 AND k = 5120 AND m IN (1, 16, 256, 4096)
ORDER BY m;

-- Model shapes: dense and MoE models the spec's builders know.
SELECT model, family, num_hidden_layers AS layers, hidden_size AS hidden,
       num_attention_heads AS heads, num_key_value_heads AS kv_heads, num_experts AS experts, quant_method
FROM aic.meta.models
WHERE model IN ('Qwen/Qwen3-32B-FP8', 'meta-llama/Meta-Llama-3.1-70B', 'Qwen/Qwen3-30B-A3B')
ORDER BY model;
