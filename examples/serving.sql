-- Serving estimates: one model on three databases at tp 1/2/4/8, served
-- aggregated (in-flight batching), ranked by tokens/s per GPU among the
-- deployments that meet a TPOT limit, with the memory each GPU needs.
-- Run: cargo run -- -f examples/serving.sql
-- Numbers are aiconfigurator v0.11.0's cli_estimate(mode='agg'), bit for bit.

-- Qwen3-32B-FP8, 64 concurrent requests of 1024 input / 256 output tokens,
-- TPOT limit 20 ms: every (database, tp) is one estimate_agg call.
SELECT db, tp,
       round(e['ttft_ms'], 2) AS ttft_ms,
       round(e['tpot_ms'], 3) AS tpot_ms,
       round(e['tokens_per_s_per_gpu'], 1) AS tok_s_gpu,
       round(e['tokens_per_s_per_user'], 1) AS tok_s_user,
       round(e['memory_gib'], 2) AS mem_gib,
       e['reason'] AS why_not
FROM (SELECT db, tp, estimate_agg('Qwen/Qwen3-32B-FP8', db, tp, 64, 1024, 256) AS e
      FROM (VALUES ('h200_sxm/vllm/0.19.0'), ('h200_sxm/sglang/0.5.10'), ('gb200/vllm/0.19.0')) AS d(db)
      CROSS JOIN (VALUES (1), (2), (4), (8)) AS t(tp))
WHERE e['reason'] IS NOT NULL OR e['tpot_ms'] <= 20
ORDER BY e['tokens_per_s_per_gpu'] DESC NULLS LAST, db, tp;

-- Where the memory of the best fitting layout goes, per GPU.
SELECT db, tp, round(m['weights_gib'], 2) AS weights, round(m['activations_gib'], 2) AS activations,
       round(m['kvcache_gib'], 2) AS kv_cache, round(m['nccl_gib'], 2) AS nccl, round(m['others_gib'], 2) AS others,
       round(m['total_gib'], 2) AS total, round(m['capacity_gib'], 2) AS capacity, m['fits'] AS fits
FROM (SELECT db, tp, estimate_memory('Qwen/Qwen3-32B-FP8', db, tp, 64, 1024, 256) AS m
      FROM (VALUES ('h200_sxm/vllm/0.19.0'), ('gb200/vllm/0.19.0')) AS d(db)
      CROSS JOIN (VALUES (1), (8)) AS t(tp))
ORDER BY db, tp;

-- The same model disaggregated on h200_sxm/vllm/0.19.0: prefill workers of tp 2 at batch 1,
-- decode workers of tp 4 at batch 64; the spec's rate matching picks the slower side.
SELECT pw AS prefill_workers, dw AS decode_workers, d['ttft_ms'] AS ttft_ms, d['tpot_ms'] AS tpot_ms,
       d['tokens_per_s_per_gpu'] AS tok_s_gpu, d['num_total_gpus'] AS gpus,
       d['prefill_seq_per_s_per_worker'] AS prefill_rps, d['decode_seq_per_s_per_worker'] AS decode_rps
FROM (SELECT pw, dw, estimate_disagg('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 2, 1, pw, 4, 64, dw, 1024, 256) AS d
      FROM (VALUES (1), (2), (4)) AS p(pw) CROSS JOIN (VALUES (1), (2)) AS q(dw))
ORDER BY d['tokens_per_s_per_gpu'] DESC;
