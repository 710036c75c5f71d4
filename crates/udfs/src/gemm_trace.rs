//! `gemm_trace(db, quant, m, n, k)`: how `gemm_latency` reaches its value,
//! one row per step (own-site step, or every transfer candidate in rank
//! order), then a `result` or `miss` row.

use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::Documentation;

use aicsql_tables::error::ErrorClass;
use aicsql_tables::{DataTree, GemmQuant, GemmTable, TraceStep};

use crate::DOC_SECTION_AICSQL;
use crate::args::{constant_int, constant_text};
use crate::config::AicOptions;
use crate::database::{Database, resolve};
use crate::errors::tables_error;
use crate::gemm_args::{check_shape, quant};
use crate::table_call::RowsFunction;

pub const NAME: &str = "gemm_trace";
/// The arguments, in order: two texts, then three integers.
pub const ARGS: [&str; 5] = ["db", "quant", "m", "n", "k"];

/// Table function `gemm_trace`.
#[derive(Debug)]
pub struct GemmTrace {
    tree: Arc<DataTree>,
}

impl GemmTrace {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree }
    }

    pub fn schema() -> SchemaRef {
        let f = |name: &str, t: DataType| Field::new(name, t, true);
        Arc::new(Schema::new(vec![
            Field::new("db", DataType::Utf8, false),
            Field::new("quant", DataType::Utf8, false),
            Field::new("m", DataType::Int64, false),
            Field::new("n", DataType::Int64, false),
            Field::new("k", DataType::Int64, false),
            Field::new("step", DataType::Int32, false),
            Field::new("stage", DataType::Utf8, false),
            f("site_n", DataType::Int64),
            f("site_k", DataType::Int64),
            f("distance", DataType::Float64),
            f("covers_m", DataType::Boolean),
            f("rank", DataType::Int32),
            Field::new("selected", DataType::Boolean, false),
            f("weight", DataType::Float64),
            f("site_latency_ms", DataType::Float64),
            f("site_sol_ms", DataType::Float64),
            f("util", DataType::Float64),
            f("result_ms", DataType::Float64),
            f("reason", DataType::Utf8),
        ]))
    }

    pub fn documentation() -> &'static Documentation {
        static DOC: OnceLock<Documentation> = OnceLock::new();
        DOC.get_or_init(|| {
            Documentation::builder(
                DOC_SECTION_AICSQL,
                "How gemm_latency reaches its value, one row per step: at a measured (n, k) site the site's own \
                 interpolation in m; elsewhere every transfer candidate site in rank order (its distance, whether \
                 it covers m, whether it was selected, its weight, latency, SOL and util), then a `result` row \
                 (result_ms = gemm_latency) or a `miss` row naming why (NULL in gemm_latency). The value is \
                 computed as gemm_latency computes it, so the rows explain exactly the number the scalar returns.",
                "gemm_trace(db, quant, m, n, k)",
            )
            .with_sql_example(
                r#"```sql
> SELECT rank, site_n, site_k, selected, round(weight, 3) AS weight, round(site_latency_ms, 6) AS site_ms
  FROM gemm_trace('h200_sxm/vllm/0.19.0', 'fp8_block', 1024, 1280, 5120) WHERE rank <= 5 ORDER BY rank;
+------+--------+--------+----------+--------+----------+
| rank | site_n | site_k | selected | weight | site_ms  |
+------+--------+--------+----------+--------+----------+
| 1    | 1536   | 5120   | true     | 14.454 | 0.032124 |
| 2    | 1024   | 5120   | true     | 9.649  | 0.031701 |
| 3    | 1536   | 6144   | true     | 7.227  | 0.036855 |
| 4    | 1536   | 4096   | true     | 5.786  | 0.027508 |
| 5    | 1024   | 6144   | false    |        |          |
+------+--------+--------+----------+--------+----------+
```"#,
            )
            .with_argument(
                "db",
                "Database 'system/backend/version' (or a prefix completed by aic.backend / aic.version).",
            )
            .with_argument(
                "quant",
                "GEMM quant mode: bfloat16, fp8, fp8_static, fp8_block, nvfp4, int8_wo, int4_wo, sq.",
            )
            .with_argument("m", "Rows (tokens), >= 0.")
            .with_argument("n", "Output features, >= 1.")
            .with_argument("k", "Input features, >= 1.")
            .build()
        })
    }
}

/// A checked call: the database, the quant and the shape.
struct TraceCall {
    database: Database,
    quant: GemmQuant,
    shape: (i64, i64, i64),
}

impl GemmTrace {
    /// The call's arguments checked (`None`: a NULL argument, no rows).
    fn call(&self, values: &[ScalarValue], options: &AicOptions) -> Result<Option<TraceCall>> {
        if values.len() != 5 {
            return plan_err!("{NAME}({}) takes 5 arguments, got {}", ARGS.join(", "), values.len());
        }
        let (db, q, m, n, k) = (
            constant_text(NAME, 1, &values[0])?,
            constant_text(NAME, 2, &values[1])?,
            constant_int(NAME, 3, &values[2])?,
            constant_int(NAME, 4, &values[3])?,
            constant_int(NAME, 5, &values[4])?,
        );
        let (Some(db), Some(q), Some(m), Some(n), Some(k)) = (db, q, m, n, k) else {
            return Ok(None);
        };
        let quant = quant(NAME, &q)?;
        let database = resolve(NAME, &self.tree, &db, options)?;
        check_shape(NAME, m, n, k)?;
        Ok(Some(TraceCall { database, quant, shape: (m, n, k) }))
    }
}

impl RowsFunction for GemmTrace {
    fn name(&self) -> &'static str {
        NAME
    }

    fn schema(&self) -> SchemaRef {
        GemmTrace::schema()
    }

    fn check(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<()> {
        self.call(args, &AicOptions::from_config(config)?).map(|_| ())
    }

    fn rows(&self, args: &[ScalarValue], config: &ConfigOptions) -> Result<RecordBatch> {
        let options = AicOptions::from_config(config)?;
        let schema = GemmTrace::schema();
        let Some(TraceCall { database, quant, shape: (m, n, k) }) = self.call(args, &options)? else {
            // NULL in, nothing out.
            return Ok(RecordBatch::new_empty(schema));
        };
        // A database without a GEMM table traces as one `miss` row naming
        // why, like a quant it has no data for; corrupt data stays an error.
        let steps = match GemmTable::cached(
            &self.tree,
            &database.system,
            &database.backend,
            &database.version,
            quant,
            options.shared_layer,
        ) {
            Ok(table) => table.trace(m, n, k),
            Err(e) if e.class() == ErrorClass::Miss => vec![TraceStep::miss(e.to_string())],
            Err(e) => return Err(tables_error(NAME, e)),
        };
        trace_batch(&schema, &database.name(), quant.name(), (m, n, k), &steps)
    }
}

fn trace_batch(
    schema: &SchemaRef,
    db: &str,
    quant: &str,
    (m, n, k): (i64, i64, i64),
    steps: &[TraceStep],
) -> Result<RecordBatch> {
    let rows = steps.len();
    let repeat_text = |v: &str| {
        let mut b = StringBuilder::new();
        (0..rows).for_each(|_| b.append_value(v));
        Arc::new(b.finish()) as ArrayRef
    };
    let repeat_int = |v: i64| {
        let mut b = Int64Builder::new();
        (0..rows).for_each(|_| b.append_value(v));
        Arc::new(b.finish()) as ArrayRef
    };
    let ints = |f: &dyn Fn(&TraceStep) -> Option<i64>| {
        let mut b = Int64Builder::new();
        steps.iter().for_each(|s| b.append_option(f(s)));
        Arc::new(b.finish()) as ArrayRef
    };
    let floats = |f: &dyn Fn(&TraceStep) -> Option<f64>| {
        let mut b = Float64Builder::new();
        steps.iter().for_each(|s| b.append_option(f(s)));
        Arc::new(b.finish()) as ArrayRef
    };
    let mut step = Int32Builder::new();
    let mut stage = StringBuilder::new();
    let mut covers = BooleanBuilder::new();
    let mut rank = Int32Builder::new();
    let mut selected = BooleanBuilder::new();
    let mut reason = StringBuilder::new();
    for (i, s) in steps.iter().enumerate() {
        step.append_value(i as i32 + 1);
        stage.append_value(s.stage.name());
        covers.append_option(s.covers_m);
        rank.append_option(s.rank.map(|r| r as i32));
        selected.append_value(s.selected);
        reason.append_option(s.reason.as_deref());
    }
    let columns: Vec<ArrayRef> = vec![
        repeat_text(db),
        repeat_text(quant),
        repeat_int(m),
        repeat_int(n),
        repeat_int(k),
        Arc::new(step.finish()),
        Arc::new(stage.finish()),
        ints(&|s| s.site_n),
        ints(&|s| s.site_k),
        floats(&|s| s.distance),
        Arc::new(covers.finish()),
        Arc::new(rank.finish()),
        Arc::new(selected.finish()),
        floats(&|s| s.weight),
        floats(&|s| s.site_latency_ms),
        floats(&|s| s.site_sol_ms),
        floats(&|s| s.util),
        floats(&|s| s.result_ms),
        Arc::new(reason.finish()),
    ];
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}
