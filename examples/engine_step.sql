-- The worked example of docs/spec/engine_step.md section 12: Qwen/Qwen3-32B-FP8 on
-- h200_sxm/vllm/0.19.0, tp 8, batch 1, isl 1024, osl 128.
-- Run: cargo run -- -f examples/engine_step.sql
-- Expect TTFT 24.74004986586315 ms and TPOT 7.121815664339327 ms.

-- The two totals (CAST to text: every digit of the double).
SELECT CAST(step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128) AS VARCHAR) AS ttft_ms,
       CAST(step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'generation', 8, 1, 1024, 128) AS VARCHAR) AS tpot_ms;

-- The context step op by op: what each op looked up, how the lookup was
-- answered (exact hit, curve, site transfer, grid interpolation) and its share.
SELECT op_name, count, quant, lookup_table, m, n, k, interp_path,
       round(latency_ms, 6) AS latency_ms, round(total_ms, 6) AS total_ms
FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128)
ORDER BY row_kind, op_index;

-- The generation step: the decode steps are sampled every 32 (gen_s = isl + i + 1),
-- each sample standing for gen_repeat steps; TPOT = their sum / (osl - 1).
SELECT gen_step_index, gen_s, gen_repeat, round(total_ms, 9) AS step_ms
FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'generation', 8, 1, 1024, 128)
WHERE row_kind = 'gen_step_total' ORDER BY gen_step_index;
