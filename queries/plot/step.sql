-- The worked example's engine steps per op, for `aicsql plot step`: one
-- bar per phase, one segment per op. The context bar sums to TTFT; the
-- generation bar to TPOT (each op's weighted decode-step total over the
-- osl - 1 = 127 decode steps, as the step's TPOT averages them).
--
--   aicsql plot step --sql "$(cat queries/plot/step.sql)" --out step.svg
SELECT bar, op_name, latency_ms FROM (
    SELECT 'context (TTFT)' AS bar, op_index, regexp_replace(op_name, '^context_', '') AS op_name, total_ms AS latency_ms
    FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128)
    WHERE row_kind = 'op'
    UNION ALL
    SELECT 'generation (TPOT)' AS bar, min(op_index) AS op_index, regexp_replace(op_name, '^generation_', '') AS op_name,
           sum(weighted_total_ms) / 127 AS latency_ms
    FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'generation', 8, 1, 1024, 128)
    WHERE row_kind = 'op'
    GROUP BY op_name
)
ORDER BY bar, op_index;
