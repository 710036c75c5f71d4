-- The options parity grid: every point of the spec's options goldens
-- (serving_options_goldens.parquet, registered as `serving_options_goldens`
-- by the scan) whose arguments are well-formed: quant overrides, TRT-LLM's
-- KV-cache knobs, MTP and images, alone and combined, aggregated and
-- disaggregated. The points the spec refuses for what they are (a miss, an
-- OOM, a refused MoE split or FMHA) stay: both paths must give a reason.
-- The malformed arguments (an unknown mode name, a malformed MTP depth or
-- acceptance) are errors of the whole call, not rows, and are left out.
-- One row per point: point, mode, model, db, the agg layout (tp, moe_tp,
-- moe_ep, batch, ctx_tokens), the disagg sides (prefill_* and decode_*:
-- tp, batch, workers, moe_tp, moe_ep), isl, osl, prefix, and `options`, the
-- STRUCT both paths take (a NULL field: the option is not turned).
-- Text as Utf8 (not views): the scan filters and slices the grid with pyarrow.
SELECT point_id AS point, arrow_cast(mode, 'Utf8') AS mode, arrow_cast(model, 'Utf8') AS model,
       arrow_cast(db, 'Utf8') AS db,
       CAST(arg_tp_size AS BIGINT) AS tp,
       CAST(arg_moe_tp_size AS BIGINT) AS moe_tp,
       CAST(arg_moe_ep_size AS BIGINT) AS moe_ep,
       CAST(arg_batch_size AS BIGINT) AS batch,
       CAST(arg_ctx_tokens AS BIGINT) AS ctx_tokens,
       CAST(arg_prefill_tp_size AS BIGINT) AS prefill_tp,
       CAST(arg_prefill_batch_size AS BIGINT) AS prefill_batch,
       CAST(arg_prefill_num_workers AS BIGINT) AS prefill_workers,
       CAST(arg_prefill_moe_tp_size AS BIGINT) AS prefill_moe_tp,
       CAST(arg_prefill_moe_ep_size AS BIGINT) AS prefill_moe_ep,
       CAST(arg_decode_tp_size AS BIGINT) AS decode_tp,
       CAST(arg_decode_batch_size AS BIGINT) AS decode_batch,
       CAST(arg_decode_num_workers AS BIGINT) AS decode_workers,
       CAST(arg_decode_moe_tp_size AS BIGINT) AS decode_moe_tp,
       CAST(arg_decode_moe_ep_size AS BIGINT) AS decode_moe_ep,
       CAST(arg_isl AS BIGINT) AS isl, CAST(arg_osl AS BIGINT) AS osl, CAST(arg_prefix AS BIGINT) AS prefix,
       named_struct('gemm_quant', arrow_cast(arg_gemm_quant_mode, 'Utf8'), 'moe_quant', arrow_cast(arg_moe_quant_mode, 'Utf8'),
                    'kvcache_quant', arrow_cast(arg_kvcache_quant_mode, 'Utf8'), 'fmha_quant', arrow_cast(arg_fmha_quant_mode, 'Utf8'),
                    'comm_quant', arrow_cast(arg_comm_quant_mode, 'Utf8'),
                    'free_gpu_memory_fraction', CAST(arg_free_gpu_memory_fraction AS DOUBLE),
                    'max_seq_len', CAST(arg_max_seq_len AS BIGINT),
                    'nextn', arrow_cast(replace(arg_nextn, '"', ''), 'Utf8'), 'nextn_accepted', CAST(arg_nextn_accepted AS DOUBLE),
                    'image_height', CAST(arg_image_height AS BIGINT), 'image_width', CAST(arg_image_width AS BIGINT),
                    'num_images', CAST(arg_num_images AS BIGINT),
                    'enable_encoder_dp', arg_enable_encoder_dp) AS options
FROM serving_options_goldens
WHERE error IS NULL OR NOT (error LIKE 'KeyError%' OR error LIKE 'ValueError: nextn%')
ORDER BY point_id
