-- The entries of the support-matrix parity scan (`python -m aicsql.parity --scan support-matrix`).
--
-- Every `PASS` entry of aic.meta.support_matrix (the matrix the newest wheel
-- ships, graded upstream) whose model the engine step prices (its
-- architecture and quantization parse: aic.meta.model_gemms lists it), one
-- row per entry and mode, with the arguments of the entry's own upstream
-- call: its `command` column is the `aiconfigurator cli default` command
-- line that graded it (--total-gpus, --isl, --osl, --prefix, --ttft,
-- --tpot, --top-n; --strict-sla when present). Entries graded on another
-- database mode than SILICON (measured data) are left out: aicsql prices
-- measured data only.
--
-- `entry` is upstream's key (scan_rust_parity.py): model|system|backend|version|mode;
-- rows come in that key's order, the order upstream's scan works through them.
-- Runs in the shell too: aicsql -f queries/parity/support_matrix_entries.sql
WITH priced AS (
    SELECT DISTINCT model FROM aic.meta.model_gemms
),
parsed AS (
    SELECT s.hugging_face_id AS model,
           s.architecture,
           s.system, s.backend, s.version, s.mode,
           concat(s.system, '/', s.backend, '/', s.version) AS db,
           CAST(regexp_match(s.command, '--total-gpus (\d+)')[1] AS BIGINT) AS total_gpus,
           CAST(regexp_match(s.command, '--isl (\d+)')[1] AS BIGINT) AS isl,
           CAST(regexp_match(s.command, '--osl (\d+)')[1] AS BIGINT) AS osl,
           CAST(coalesce(regexp_match(s.command, '--prefix (\d+)')[1], '0') AS BIGINT) AS prefix,
           CAST(regexp_match(s.command, '--ttft ([0-9.]+)')[1] AS DOUBLE) AS ttft_ms,
           CAST(regexp_match(s.command, '--tpot ([0-9.]+)')[1] AS DOUBLE) AS tpot_ms,
           -- cli default's defaults: --top-n 5, no --strict-sla
           CAST(coalesce(regexp_match(s.command, '--top-n (\d+)')[1], '5') AS BIGINT) AS top_n,
           s.command LIKE '%--strict-sla%' AS strict_sla,
           coalesce(regexp_match(s.command, '--database-mode (\w+)')[1], 'SILICON') AS database_mode
    FROM aic.meta.support_matrix s
    JOIN priced p ON p.model = s.hugging_face_id
    WHERE s.status = 'PASS'
)
SELECT concat_ws('|', model, system, backend, version, mode) AS entry,
       model, architecture, db, mode,
       total_gpus, isl, osl, prefix, ttft_ms, tpot_ms, top_n, strict_sla
FROM parsed
WHERE database_mode = 'SILICON'
ORDER BY entry
