//! `engine_step(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep [, dp [, pp [, cp]]]])`:
//! one row per op of the step (for generation, per op and sampled decode
//! step, plus each sample's total), then the step's total row.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::Documentation;

use aicsql_tables::DataTree;
use aicsql_tables::step::{Lookup, OpRow, Phase, RowKind, StepError, StepModel, StepReport, StepShape};

use crate::DOC_SECTION_AICSQL;
use crate::args::{constant_int, constant_text};
use crate::config::{AicOptions, OnMiss};
use crate::database::{Database, resolve};
use crate::errors::step_error;
use crate::rows::{self, Column, Rows, Value, col, required};
use crate::step_args::{ARGS, ARITIES, ARITIES_TEXT, phase, shape, with_step_arguments_only};
use crate::table_call::RowsFunction;

pub const NAME: &str = "engine_step";

/// Table function `engine_step`.
#[derive(Debug)]
pub struct EngineStep {
    tree: Arc<DataTree>,
}

impl EngineStep {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree }
    }

    /// Columns: the row, the op, its first table lookup (arguments as
    /// columns; NULL where they do not apply), and its latency.
    pub fn schema() -> SchemaRef {
        rows::schema(&columns())
    }

    pub fn documentation() -> &'static Documentation {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        DOC.get_or_init(|| {
            with_step_arguments_only(
                Documentation::builder(
                    DOC_SECTION_AICSQL,
                    "One engine step op by op, as step_latency prices it: a row per op (for 'generation', per op \
                     and sampled decode step, then each sample's gen_step_total), then the step_total row whose \
                     latency_ms is TTFT or TPOT. Each op row names its kind, count and quant, the table it looked \
                     up and the lookup's arguments as columns (m, n, k for GEMMs; attn_* for attention and MLA; \
                     comm_gpus, message_size for collectives; moe_* for the experts; NULL where they do not apply), \
                     lookup_args (the spec's call, as in the goldens), the interpolation path, and latency_ms per \
                     application. A miss ends the list with a `miss` row naming the op and the lookup (an error \
                     under SET aic.on_miss = 'error').",
                    "engine_step(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep [, dp [, pp [, cp]]]])",
                )
                .with_sql_example(
                    r#"```sql
> SELECT op_index, op_name, count, round(latency_ms, 6) AS latency_ms
  FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128)
  WHERE row_kind = 'op' ORDER BY op_index LIMIT 5;
+----------+--------------------+-------+------------+
| op_index | op_name            | count | latency_ms |
+----------+--------------------+-------+------------+
| 0        | context_embedding  | 1.0   | 0.005731   |
| 1        | context_add_norm_1 | 64.0  | 0.013923   |
| 2        | context_qkv_gemm   | 64.0  | 0.029277   |
| 3        | context_attention  | 64.0  | 0.062772   |
| 4        | context_proj_gemm  | 64.0  | 0.022839   |
+----------+--------------------+-------+------------+
```"#,
                ),
            )
            .build()
        })
    }
}

/// A checked call: the model, the database, the phase and the shape.
struct StepCall {
    model: String,
    database: Database,
    phase: Phase,
    shape: StepShape,
}

impl EngineStep {
    /// The call's arguments checked (`None`: a NULL argument, no rows).
    fn call(&self, values: &[ScalarValue], options: &AicOptions) -> Result<Option<StepCall>> {
        if !ARITIES.contains(&values.len()) {
            return plan_err!("{NAME}({}) takes {ARITIES_TEXT} arguments, got {}", ARGS.join(", "), values.len());
        }
        // Every argument's type is checked before a NULL short-circuits the
        // call: a wrong type is an error whatever the other arguments are.
        let texts = (
            constant_text(NAME, 1, &values[0])?,
            constant_text(NAME, 2, &values[1])?,
            constant_text(NAME, 3, &values[2])?,
        );
        let ints: Vec<Option<i64>> =
            values[3..].iter().enumerate().map(|(i, v)| constant_int(NAME, i + 4, v)).collect::<Result<_>>()?;
        let (Some(model), Some(db), Some(phase_name)) = texts else {
            return Ok(None);
        };
        let (Some(tp), Some(batch), Some(isl), Some(osl)) = (ints[0], ints[1], ints[2], ints[3]) else {
            return Ok(None);
        };
        let phase = phase(NAME, &phase_name)?;
        let arg = |i: usize| ints.get(i).copied().flatten();
        let shape = shape(NAME, [tp, batch, isl, osl], [arg(4), arg(5)], [arg(6), arg(7), arg(8)])?;
        let database = resolve(NAME, &self.tree, &db, options)?;
        Ok(Some(StepCall { model, database, phase, shape }))
    }
}

impl RowsFunction for EngineStep {
    fn name(&self) -> &'static str {
        NAME
    }

    fn schema(&self) -> SchemaRef {
        EngineStep::schema()
    }

    fn check(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<()> {
        self.call(args, &AicOptions::from_config(config)?).map(|_| ())
    }

    fn rows(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
        let options = AicOptions::from_config(config)?;
        let Some(StepCall { model, database, phase, shape }) = self.call(args, &options)? else {
            return Ok(RecordBatch::new_empty(EngineStep::schema()));
        };
        let db_name = database.name();
        let report = StepModel::new(
            &self.tree,
            &model,
            &database.system,
            &database.backend,
            &database.version,
            options.shared_layer,
        )
        .and_then(|step| step.with_quant_overrides(options.quant))
        .and_then(|step| {
            let depth = options.nextn.resolve(step.checkpoint_nextn());
            step.with_nextn(depth)
        })
        .and_then(|mut step| step.report(phase, &shape));
        let outcome = match report {
            Ok(report) => Outcome::Report(report),
            Err(StepError::Miss { op, lookup, message }) if options.on_miss == OnMiss::Null => {
                Outcome::Miss { op, lookup, message }
            }
            Err(e) => return Err(step_error(NAME, &model, &db_name, e)),
        };
        table_rows(&db_name, phase.name(), &outcome)
    }
}

/// One output row, whichever its kind (op, sampled step total, step total, miss).
struct Line<'a> {
    db: &'a str,
    phase: &'static str,
    row_kind: &'static str,
    op_index: Option<i64>,
    op_name: &'a str,
    op_kind: Option<&'static str>,
    count: Option<f64>,
    quant: Option<&'a str>,
    lookup: Option<&'a Lookup>,
    lookup_args: Option<String>,
    interp_path: Option<&'a str>,
    latency_ms: Option<f64>,
    total_ms: Option<f64>,
    weighted_total_ms: Option<f64>,
    gen_step_index: Option<i64>,
    gen_s: Option<i64>,
    gen_repeat: Option<i64>,
    miss: bool,
    reason: Option<&'a str>,
}

impl<'a> Line<'a> {
    /// A row with no op, no lookup and no numbers.
    fn empty(db: &'a str, phase: &'static str, row_kind: &'static str, op_name: &'a str) -> Line<'a> {
        Line {
            db,
            phase,
            row_kind,
            op_index: None,
            op_name,
            op_kind: None,
            count: None,
            quant: None,
            lookup: None,
            lookup_args: None,
            interp_path: None,
            latency_ms: None,
            total_ms: None,
            weighted_total_ms: None,
            gen_step_index: None,
            gen_s: None,
            gen_repeat: None,
            miss: false,
            reason: None,
        }
    }

    fn with_lookup(mut self, lookup: Option<&'a Lookup>) -> Line<'a> {
        self.lookup = lookup;
        self.lookup_args = lookup.map(|l| format!("{} {}", l.method(), l.args_json()));
        self
    }

    fn op(db: &'a str, phase: &'static str, row: &'a OpRow) -> Line<'a> {
        let kind = match row.row_kind {
            RowKind::Op => "op",
            RowKind::GenStepTotal => "gen_step_total",
        };
        Line {
            op_index: Some(i64::from(row.op_index)),
            op_kind: row.op_kind.map(|k| k.name()),
            count: row.count,
            // Per-step total rows have no quant (NULL in the goldens); ops without
            // one (P2P) have the empty text, as there.
            quant: (row.row_kind == RowKind::Op).then_some(row.quant.as_str()),
            interp_path: row.interp_path.as_deref(),
            latency_ms: row.latency_ms,
            total_ms: Some(row.total_ms),
            weighted_total_ms: Some(row.weighted_total_ms),
            gen_step_index: row.gen_step_index.map(i64::from),
            gen_s: row.gen_s.map(i64::from),
            gen_repeat: row.gen_repeat.map(i64::from),
            ..Line::empty(db, phase, kind, &row.op_name)
        }
        .with_lookup(row.lookup.as_ref())
    }

    /// The total row: `latency_ms` is TTFT (context) or TPOT (generation),
    /// `total_ms` the phase latency (context: TTFT; generation: the sum over
    /// all decode steps).
    fn total(db: &'a str, phase: &'static str, latency_ms: Option<f64>, phase_ms: Option<f64>) -> Line<'a> {
        Line {
            latency_ms,
            total_ms: phase_ms,
            weighted_total_ms: phase_ms,
            ..Line::empty(db, phase, "step_total", "__step_total__")
        }
    }
}

/// The columns of `engine_step`, in order.
fn columns<'a>() -> Vec<Column<Line<'a>>> {
    use Value::{Bool, Float, Int, Text};
    /// The lookup's argument, when the lookup is of the kind that has it.
    macro_rules! arg {
        ($name:literal, $($pattern:pat => $value:expr),+) => {
            col($name, Int(|r| match r.lookup? { $($pattern => Some(*$value),)+ _ => None }))
        };
    }
    vec![
        required("db", Text(|r| Some(r.db))),
        required("phase", Text(|r| Some(r.phase))),
        required("row_kind", Text(|r| Some(r.row_kind))),
        col("op_index", Int(|r| r.op_index)),
        required("op_name", Text(|r| Some(r.op_name))),
        col("op_kind", Text(|r| r.op_kind)),
        col("count", Float(|r| r.count)),
        col("quant", Text(|r| r.quant)),
        col("lookup_table", Text(|r| r.lookup.map(Lookup::table))),
        // The quantisation-overhead and MLA lookups reuse the GEMM and
        // attention argument columns (the BMM's tokens are its batch).
        arg!("m", Lookup::Gemm { m, .. } => m, Lookup::ComputeScale { m, .. } => m, Lookup::ScaleMatrix { m, .. } => m),
        arg!("n", Lookup::Gemm { n, .. } => n),
        arg!("k", Lookup::Gemm { k, .. } => k, Lookup::ComputeScale { k, .. } => k, Lookup::ScaleMatrix { k, .. } => k),
        arg!("attn_batch", Lookup::ContextAttention { b, .. } => b, Lookup::GenerationAttention { b, .. } => b,
            Lookup::ContextMlaModule { b, .. } => b, Lookup::ContextMla { b, .. } => b,
            Lookup::GenerationMlaModule { b, .. } => b, Lookup::GenerationMla { b, .. } => b,
            Lookup::MlaBmm { tokens, .. } => tokens, Lookup::Gdn { batch, .. } => batch,
            Lookup::Mamba2 { batch, .. } => batch, Lookup::ContextDsa { b, .. } => b,
            Lookup::GenerationDsa { b, .. } => b, Lookup::ContextDsv4 { b, .. } => b,
            Lookup::GenerationDsv4 { b, .. } => b),
        arg!("attn_seq", Lookup::ContextAttention { s, .. } => s, Lookup::GenerationAttention { s, .. } => s,
            Lookup::ContextMlaModule { s, .. } => s, Lookup::ContextMla { s, .. } => s,
            Lookup::GenerationMlaModule { s, .. } => s, Lookup::GenerationMla { s, .. } => s,
            Lookup::Gdn { seq_len: Some(s), .. } => s, Lookup::Mamba2 { seq_len: Some(s), .. } => s,
            Lookup::ContextDsa { s, .. } => s, Lookup::GenerationDsa { s, .. } => s,
            Lookup::ContextDsv4 { s, .. } => s, Lookup::GenerationDsv4 { s, .. } => s),
        arg!("attn_prefix", Lookup::ContextAttention { prefix, .. } => prefix,
            Lookup::ContextMlaModule { prefix, .. } => prefix, Lookup::ContextMla { prefix, .. } => prefix,
            Lookup::ContextDsa { prefix, .. } => prefix, Lookup::ContextDsv4 { prefix, .. } => prefix),
        arg!("heads", Lookup::ContextAttention { n, .. } => n, Lookup::GenerationAttention { n, .. } => n,
            Lookup::ContextMlaModule { heads, .. } => heads, Lookup::ContextMla { heads, .. } => heads,
            Lookup::GenerationMlaModule { heads, .. } => heads, Lookup::GenerationMla { heads, .. } => heads,
            Lookup::MlaBmm { heads, .. } => heads, Lookup::ContextDsa { heads, .. } => heads,
            Lookup::GenerationDsa { heads, .. } => heads, Lookup::ContextDsv4 { attn, .. } => &attn.dims.heads,
            Lookup::GenerationDsv4 { attn, .. } => &attn.dims.heads),
        arg!("kv_heads", Lookup::ContextAttention { n_kv, .. } => n_kv, Lookup::GenerationAttention { n_kv, .. } => n_kv),
        arg!("head_dim", Lookup::ContextAttention { head_size, .. } => head_size,
            Lookup::GenerationAttention { head_size, .. } => head_size,
            Lookup::ContextDsv4 { attn, .. } => &attn.dims.head_dim,
            Lookup::GenerationDsv4 { attn, .. } => &attn.dims.head_dim),
        arg!("window", Lookup::ContextAttention { window, .. } => window,
            Lookup::GenerationAttention { window, .. } => window,
            Lookup::ContextDsv4 { attn, .. } => &attn.dims.window,
            Lookup::GenerationDsv4 { attn, .. } => &attn.dims.window),
        arg!("comm_gpus", Lookup::CustomAllReduce { tp, .. } => tp, Lookup::Nccl { g, .. } => g),
        arg!("message_size", Lookup::CustomAllReduce { size, .. } => size, Lookup::Nccl { size, .. } => size),
        arg!("moe_tokens", Lookup::Moe { num_tokens, .. } => num_tokens),
        arg!("moe_hidden", Lookup::Moe { shape, .. } => &shape.hidden),
        arg!("moe_inter", Lookup::Moe { shape, .. } => &shape.inter),
        arg!("moe_topk", Lookup::Moe { shape, .. } => &shape.topk),
        arg!("moe_experts", Lookup::Moe { shape, .. } => &shape.experts),
        arg!("moe_tp", Lookup::Moe { shape, .. } => &shape.moe_tp),
        arg!("moe_ep", Lookup::Moe { shape, .. } => &shape.moe_ep),
        col("lookup_args", Text(|r| r.lookup_args.as_deref())),
        col("interp_path", Text(|r| r.interp_path)),
        col("latency_ms", Float(|r| r.latency_ms)),
        col("total_ms", Float(|r| r.total_ms)),
        col("weighted_total_ms", Float(|r| r.weighted_total_ms)),
        col("gen_step_index", Int(|r| r.gen_step_index)),
        col("gen_s", Int(|r| r.gen_s)),
        col("gen_repeat", Int(|r| r.gen_repeat)),
        required("miss", Bool(|r| Some(r.miss))),
        col("reason", Text(|r| r.reason)),
    ]
}

/// The rows of one call: the report's ops then its total, or (under
/// `aic.on_miss = 'null'`) the op that missed then a NULL total.
fn table_rows(db: &str, phase: &'static str, outcome: &Outcome) -> Result<RecordBatch> {
    // Outlives the rows that borrow it.
    let total_reason = match outcome {
        Outcome::Miss { op, .. } => format!("op '{op}' has no perf data"),
        Outcome::Report(_) => String::new(),
    };
    let columns = columns();
    let mut rows = Rows::new(&columns);
    match outcome {
        Outcome::Report(report) => {
            for row in &report.rows {
                rows.push(&Line::op(db, phase, row));
            }
            rows.push(&Line::total(db, phase, Some(report.total_ms), Some(report.phase_latency_ms)));
        }
        Outcome::Miss { op, lookup, message } => {
            let mut missed = Line::empty(db, phase, "miss", op).with_lookup(lookup.as_deref());
            (missed.miss, missed.reason) = (true, Some(message.as_str()));
            rows.push(&missed);
            let mut total = Line::total(db, phase, None, None);
            (total.miss, total.reason) = (true, Some(total_reason.as_str()));
            rows.push(&total);
        }
    }
    rows.finish()
}

/// What one call produced.
enum Outcome {
    Report(StepReport),
    Miss { op: String, lookup: Option<Box<Lookup>>, message: String },
}
