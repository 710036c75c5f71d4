-- Which PASS entries of the support matrix aicsql prices, by architecture.
--
-- For every `PASS` agg entry of aic.meta.support_matrix (the matrix the
-- newest wheel ships, graded upstream), whether the model's context step
-- prices on the entry's database at a probe shape (batch 16, isl 256,
-- osl 256) at the smallest tensor-parallel size of 1, 2, 4, 8 that prices
-- (MoE models with the experts in expert parallelism, moe_tp 1 and
-- moe_ep = tp, then in tensor parallelism, moe_tp = tp and moe_ep 1). Every entry's default search walks these sizes, so a model
-- that only prices from tp 2 on (Gemma 4: its 262,144-wide logits GEMM at
-- tp 1 is beyond every measured site) is priced for the entry.
--
-- The first row totals every architecture. `priced_at_tp1` keeps the single tp-1 probe of earlier releases; the
-- first reason of each group that does not price is its tp-1 status (the
-- lookup that missed, or the refusal).
--
--   aicsql -f queries/coverage/support_matrix.sql
WITH entries AS (
    SELECT
        hugging_face_id AS model,
        architecture,
        system || '/' || backend || '/' || version AS db
    FROM aic.meta.support_matrix
    WHERE status = 'PASS' AND mode = 'agg'
),
tp1 AS (
    SELECT *, step_status(model, db, 'context', 1, 16, 256, 256, 1, 1) AS status FROM entries
),
probed AS (
    SELECT
        *,
        -- CASE prices a larger tp only for the rows the smaller ones left.
        CASE
            WHEN status = 'priced' THEN 1
            WHEN step_status(model, db, 'context', 2, 16, 256, 256, 1, 2) = 'priced' THEN 2
            WHEN step_status(model, db, 'context', 2, 16, 256, 256, 2, 1) = 'priced' THEN 2
            WHEN step_status(model, db, 'context', 4, 16, 256, 256, 1, 4) = 'priced' THEN 4
            WHEN step_status(model, db, 'context', 4, 16, 256, 256, 4, 1) = 'priced' THEN 4
            WHEN step_status(model, db, 'context', 8, 16, 256, 256, 1, 8) = 'priced' THEN 8
            WHEN step_status(model, db, 'context', 8, 16, 256, 256, 8, 1) = 'priced' THEN 8
        END AS priced_tp
    FROM tp1
)
SELECT
    coalesce(architecture, 'all architectures') AS architecture,
    count(*) AS entries,
    count(priced_tp) AS priced,
    count(*) FILTER (WHERE status = 'priced') AS priced_at_tp1,
    count(*) FILTER (WHERE priced_tp IS NULL AND status LIKE 'miss:%') AS misses,
    count(*) FILTER (WHERE priced_tp IS NULL AND status LIKE 'refused:%') AS refused,
    min(priced_tp) AS smallest_tp,
    first_value(
        CASE WHEN priced_tp IS NULL THEN model || ' on ' || db || ': ' || status END
        ORDER BY priced_tp IS NOT NULL, model, db
    ) AS first_reason
FROM probed
GROUP BY ROLLUP (architecture)
ORDER BY entries DESC, architecture;
