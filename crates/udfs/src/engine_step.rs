//! `engine_step(model, db, phase, tp, batch, isl, osl [, moe_tp, moe_ep])`:
//! one row per op of the step (for generation, per op and sampled decode
//! step, plus each sample's total), then the step's total row.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, RecordBatch, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::datasource::MemTable;

use aicsql_tables::DataTree;
use aicsql_tables::step::{Lookup, OpRow, RowKind, StepError, StepModel, StepReport};

use crate::args::{constant, constant_int, constant_text};
use crate::config::{AicOptions, OnMiss};
use crate::database::resolve;
use crate::step_args::{ARGS, phase, shape, step_error};
use aicsql_tables::sources::GEMM_FILE;

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
        let text = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
        let int = |name: &str| Field::new(name, DataType::Int64, true);
        let float = |name: &str| Field::new(name, DataType::Float64, true);
        Arc::new(Schema::new(vec![
            text("db", false),
            text("phase", false),
            text("row_kind", false),
            Field::new("op_index", DataType::Int64, true),
            text("op_name", false),
            text("op_kind", true),
            float("count"),
            text("quant", true),
            text("lookup_table", true),
            int("m"),
            int("n"),
            int("k"),
            int("attn_batch"),
            int("attn_seq"),
            int("attn_prefix"),
            int("heads"),
            int("kv_heads"),
            int("head_dim"),
            int("window"),
            int("comm_gpus"),
            int("message_size"),
            int("moe_tokens"),
            int("moe_hidden"),
            int("moe_inter"),
            int("moe_topk"),
            int("moe_experts"),
            int("moe_tp"),
            int("moe_ep"),
            text("lookup_args", true),
            text("interp_path", true),
            float("latency_ms"),
            float("total_ms"),
            float("weighted_total_ms"),
            int("gen_step_index"),
            int("gen_s"),
            int("gen_repeat"),
            Field::new("miss", DataType::Boolean, false),
            text("reason", true),
        ]))
    }
}

impl TableFunctionImpl for EngineStep {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        if exprs.len() != 7 && exprs.len() != 9 {
            return plan_err!("{NAME}({}) takes 7 or 9 arguments, got {}", ARGS.join(", "), exprs.len());
        }
        let session = args.session();
        let values: Vec<ScalarValue> =
            exprs.iter().enumerate().map(|(i, e)| constant(NAME, session, e, i + 1)).collect::<Result<_>>()?;
        let options = AicOptions::from_config(session.config().options())?;
        let schema = Self::schema();
        let empty = || -> Result<Arc<dyn TableProvider>> {
            Ok(Arc::new(MemTable::try_new(Arc::clone(&schema), vec![vec![]])?))
        };
        let (Some(model), Some(db), Some(phase_name)) = (
            constant_text(NAME, 1, &values[0])?,
            constant_text(NAME, 2, &values[1])?,
            constant_text(NAME, 3, &values[2])?,
        ) else {
            return empty();
        };
        let ints: Vec<Option<i64>> =
            values[3..].iter().enumerate().map(|(i, v)| constant_int(NAME, i + 4, v)).collect::<Result<_>>()?;
        let (Some(tp), Some(batch), Some(isl), Some(osl)) = (ints[0], ints[1], ints[2], ints[3]) else {
            return empty();
        };
        let phase = phase(NAME, &phase_name)?;
        let shape =
            shape(NAME, [tp, batch, isl, osl], [ints.get(4).copied().flatten(), ints.get(5).copied().flatten()])?;
        let database = resolve(NAME, &self.tree, &GEMM_FILE, &db, &options)?;
        let db_name = database.name();
        let report = StepModel::new(
            &self.tree,
            &model,
            &database.system,
            &database.backend,
            &database.version,
            options.shared_layer,
        )
        .and_then(|mut step| step.report(phase, &shape));
        let mut rows = Rows::default();
        match report {
            Ok(report) => rows.report(&report),
            Err(StepError::Miss { op, lookup, message }) if options.on_miss == OnMiss::Null => {
                rows.miss(&op, lookup.as_deref(), &message)
            }
            Err(e) => return Err(step_error(NAME, &model, &db_name, e)),
        }
        let batch = rows.finish(&schema, &db_name, phase.name())?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}

/// Column builders in schema order (after `db` and `phase`, which repeat).
#[derive(Default)]
struct Rows {
    len: usize,
    row_kind: StringBuilder,
    op_index: Int64Builder,
    op_name: StringBuilder,
    op_kind: StringBuilder,
    count: Float64Builder,
    quant: StringBuilder,
    lookup_table: StringBuilder,
    lookup_ints: [Int64Builder; 19],
    lookup_args: StringBuilder,
    interp_path: StringBuilder,
    latency_ms: Float64Builder,
    total_ms: Float64Builder,
    weighted_total_ms: Float64Builder,
    generation: [Int64Builder; 3],
    miss: BooleanBuilder,
    reason: StringBuilder,
}

/// The lookup's arguments in the column order of `lookup_ints`:
/// m n k | attn_batch attn_seq attn_prefix heads kv_heads head_dim window |
/// comm_gpus message_size | moe_tokens hidden inter topk experts moe_tp moe_ep.
fn lookup_columns(lookup: Option<&Lookup>) -> [Option<i64>; 19] {
    let mut c = [None; 19];
    match lookup {
        Some(&Lookup::Gemm { m, n, k, .. }) => (c[0], c[1], c[2]) = (Some(m), Some(n), Some(k)),
        Some(&Lookup::ContextAttention { b, s, prefix, n, n_kv, window, head_size, .. }) => c[3..10]
            .copy_from_slice(&[Some(b), Some(s), Some(prefix), Some(n), Some(n_kv), Some(head_size), Some(window)]),
        Some(&Lookup::GenerationAttention { b, s, n, n_kv, window, head_size, .. }) => {
            c[3..10].copy_from_slice(&[Some(b), Some(s), None, Some(n), Some(n_kv), Some(head_size), Some(window)])
        }
        Some(&Lookup::CustomAllReduce { tp, size }) => (c[10], c[11]) = (Some(tp), Some(size)),
        Some(&Lookup::Nccl { g, size, .. }) => (c[10], c[11]) = (Some(g), Some(size)),
        Some(&Lookup::Moe { num_tokens, hidden, inter, topk, experts, moe_tp, moe_ep, .. }) => c[12..19]
            .copy_from_slice(&[
                Some(num_tokens),
                Some(hidden),
                Some(inter),
                Some(topk),
                Some(experts),
                Some(moe_tp),
                Some(moe_ep),
            ]),
        None => {}
    }
    c
}

impl Rows {
    fn lookup(&mut self, lookup: Option<&Lookup>) {
        self.lookup_table.append_option(lookup.map(Lookup::table));
        for (builder, value) in self.lookup_ints.iter_mut().zip(lookup_columns(lookup)) {
            builder.append_option(value);
        }
        self.lookup_args.append_option(lookup.map(|l| format!("{} {}", l.method(), l.args_json())));
    }

    fn op(&mut self, row: &OpRow) {
        self.len += 1;
        self.row_kind.append_value(match row.row_kind {
            RowKind::Op => "op",
            RowKind::GenStepTotal => "gen_step_total",
        });
        self.op_index.append_value(i64::from(row.op_index));
        self.op_name.append_value(&row.op_name);
        self.op_kind.append_option(row.op_kind.map(|k| k.name()));
        self.count.append_option(row.count);
        // Per-step total rows have no quant (NULL in the goldens); ops without
        // one (P2P) have the empty text, as there.
        self.quant.append_option((row.row_kind == RowKind::Op).then_some(row.quant.as_str()));
        self.lookup(row.lookup.as_ref());
        self.interp_path.append_option(row.interp_path.as_deref());
        self.latency_ms.append_option(row.latency_ms);
        self.total_ms.append_value(row.total_ms);
        self.weighted_total_ms.append_value(row.weighted_total_ms);
        for (builder, value) in self.generation.iter_mut().zip([row.gen_step_index, row.gen_s, row.gen_repeat]) {
            builder.append_option(value.map(i64::from));
        }
        self.miss.append_value(false);
        self.reason.append_null();
    }

    /// The total row: `latency_ms` is TTFT (context) or TPOT (generation),
    /// `total_ms` the phase latency (context: TTFT; generation: the sum over
    /// all decode steps).
    fn total(&mut self, latency_ms: Option<f64>, phase_ms: Option<f64>, miss: bool, reason: Option<&str>) {
        self.len += 1;
        self.row_kind.append_value("step_total");
        self.op_index.append_null();
        self.op_name.append_value("__step_total__");
        self.op_kind.append_null();
        self.count.append_null();
        self.quant.append_null();
        self.lookup(None);
        self.interp_path.append_null();
        self.latency_ms.append_option(latency_ms);
        self.total_ms.append_option(phase_ms);
        self.weighted_total_ms.append_option(phase_ms);
        self.generation.iter_mut().for_each(|b| b.append_null());
        self.miss.append_value(miss);
        self.reason.append_option(reason);
    }

    fn report(&mut self, report: &StepReport) {
        for row in &report.rows {
            self.op(row);
        }
        self.total(Some(report.total_ms), Some(report.phase_latency_ms), false, None);
    }

    /// Under `aic.on_miss = 'null'`: the op that missed, then a NULL total.
    fn miss(&mut self, op: &str, lookup: Option<&Lookup>, message: &str) {
        self.len += 1;
        self.row_kind.append_value("miss");
        self.op_index.append_null();
        self.op_name.append_value(op);
        self.op_kind.append_null();
        self.count.append_null();
        self.quant.append_null();
        self.lookup(lookup);
        self.interp_path.append_null();
        self.latency_ms.append_null();
        self.total_ms.append_null();
        self.weighted_total_ms.append_null();
        self.generation.iter_mut().for_each(|b| b.append_null());
        self.miss.append_value(true);
        self.reason.append_value(message);
        self.total(None, None, true, Some(&format!("op '{op}' has no perf data")));
    }

    fn finish(mut self, schema: &SchemaRef, db: &str, phase: &str) -> Result<RecordBatch> {
        let repeat = |v: &str| Arc::new(datafusion::arrow::array::StringArray::from(vec![v; self.len])) as ArrayRef;
        let mut columns: Vec<ArrayRef> = vec![
            repeat(db),
            repeat(phase),
            Arc::new(self.row_kind.finish()),
            Arc::new(self.op_index.finish()),
            Arc::new(self.op_name.finish()),
            Arc::new(self.op_kind.finish()),
            Arc::new(self.count.finish()),
            Arc::new(self.quant.finish()),
            Arc::new(self.lookup_table.finish()),
        ];
        columns.extend(self.lookup_ints.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        columns.extend([
            Arc::new(self.lookup_args.finish()) as ArrayRef,
            Arc::new(self.interp_path.finish()),
            Arc::new(self.latency_ms.finish()),
            Arc::new(self.total_ms.finish()),
            Arc::new(self.weighted_total_ms.finish()),
        ]);
        columns.extend(self.generation.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        columns.push(Arc::new(self.miss.finish()));
        columns.push(Arc::new(self.reason.finish()));
        Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
    }
}
