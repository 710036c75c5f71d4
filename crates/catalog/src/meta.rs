//! Schema `aic.meta`: what is mounted (databases, communication-library
//! tables), the system constants,
//! the model configs and the upstream support matrix.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, RecordBatch, StringBuilder, new_null_array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::TableType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use aicsql_tables::version_dirs::DATABASE_BACKENDS;
use aicsql_tables::{DataTree, Layout, Num, PerfFile, read_model_config, read_system_yaml, support_matrix};

use crate::prune;

/// The tables of `aic.meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaKind {
    Databases,
    CommLibraries,
    Systems,
    Models,
    ModelGemms,
    SupportMatrix,
    SiliconRefs,
}

impl MetaKind {
    pub const ALL: [MetaKind; 7] = [
        MetaKind::Databases,
        MetaKind::CommLibraries,
        MetaKind::Systems,
        MetaKind::Models,
        MetaKind::ModelGemms,
        MetaKind::SupportMatrix,
        MetaKind::SiliconRefs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MetaKind::Databases => "databases",
            MetaKind::CommLibraries => "comm_libraries",
            MetaKind::Systems => "systems",
            MetaKind::Models => "models",
            MetaKind::ModelGemms => "model_gemms",
            MetaKind::SupportMatrix => "support_matrix",
            MetaKind::SiliconRefs => "silicon_refs",
        }
    }

    /// What the table holds, for the function reference.
    pub fn description(self) -> &'static str {
        match self {
            MetaKind::Databases => {
                "Every table of every database (system/backend/version) the spec serves: its layout, the release \
                 whose file serves it (the newer wheel wins), whether the version is the newest ('latest') and \
                 whether its directory holds only a shared-layer marker."
            }
            MetaKind::CommLibraries => {
                "The communication-library tables (NCCL, oneCCL) per system and version, which the databases of \
                 that system use for their collectives."
            }
            MetaKind::Systems => {
                "The system YAML of each GPU system: memory, bandwidths, tensor-core FLOPS, GPUs a node."
            }
            MetaKind::Models => "The model configs the spec ships (Hugging Face config.json), with the spec's family.",
            MetaKind::ModelGemms => {
                "The GEMMs a model's engine step runs (op, n, k, quant, count per layer), for joins against gemm_latency."
            }
            MetaKind::SupportMatrix => {
                "Upstream's support matrix: (model, system, backend, version, mode) combinations graded PASS or FAIL, \
                 with the CLI command that was run."
            }
            MetaKind::SiliconRefs => {
                "Upstream's end-to-end measurements on real hardware (aiconfigurator v0.11.0's \
                 tools/accuracy_tracking/silicon_refs.csv, Apache-2.0, bundled with aicsql): per point its system, \
                 backend and measured version, model, workload, quant modes, parallel layout (agg, or prefill and \
                 decode workers) and the measured TTFT and TPOT. queries/accuracy/silicon_refs.sql prices them as \
                 the spec's accuracy report does."
            }
        }
    }

    /// The column a filter can be pushed to (the document is skipped unread).
    fn key(self) -> Option<&'static str> {
        match self {
            MetaKind::Systems => Some("system"),
            MetaKind::Models | MetaKind::ModelGemms => Some("model"),
            _ => None,
        }
    }
}

/// Schema provider for `aic.meta`.
#[derive(Debug)]
pub struct MetaSchema {
    tree: Arc<DataTree>,
}

impl MetaSchema {
    pub fn new(tree: Arc<DataTree>) -> Self {
        Self { tree }
    }
}

#[async_trait]
impl SchemaProvider for MetaSchema {
    fn table_names(&self) -> Vec<String> {
        MetaKind::ALL.iter().map(|k| k.name().to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(kind) = MetaKind::ALL.into_iter().find(|k| k.name() == name) else {
            return Ok(None);
        };
        Ok(Some(Arc::new(MetaTable::try_new(Arc::clone(&self.tree), kind)?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        MetaKind::ALL.iter().any(|k| k.name() == name)
    }
}

/// A metadata table built from the mounted tree when scanned.
#[derive(Debug)]
pub struct MetaTable {
    tree: Arc<DataTree>,
    kind: MetaKind,
    schema: SchemaRef,
}

impl MetaTable {
    pub fn try_new(tree: Arc<DataTree>, kind: MetaKind) -> Result<Self> {
        let schema = match kind {
            MetaKind::Databases => databases_schema(),
            MetaKind::CommLibraries => comm_libraries_schema(),
            MetaKind::Systems => systems_schema(),
            MetaKind::Models => models_schema(),
            MetaKind::ModelGemms => model_gemms_schema(),
            MetaKind::SupportMatrix => support_matrix_schema(&tree)?,
            MetaKind::SiliconRefs => crate::silicon_refs::schema(),
        };
        Ok(Self { tree, kind, schema })
    }

    pub fn kind(&self) -> MetaKind {
        self.kind
    }
}

#[async_trait]
impl TableProvider for MetaTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(match self.kind.key() {
            // Inexact: the filter still runs above the scan; pushing it only
            // spares reading the documents it rules out.
            Some(key) => prune::pushdown(filters, &[key], false),
            None => vec![TableProviderFilterPushDown::Unsupported; filters.len()],
        })
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let context =
            |e: aicsql_tables::TablesError| DataFusionError::Execution(format!("aic.meta.{}: {e}", self.kind.name()));
        let batch = match self.kind {
            MetaKind::Databases => databases(&self.tree)?,
            MetaKind::CommLibraries => comm_libraries(&self.tree)?,
            MetaKind::Systems => {
                let docs = self.tree.system_yamls();
                let names: Vec<&str> = docs.iter().map(|d| d.stem.as_str()).collect();
                let keep = prune::select(state, filters, &["system"], &[names])?;
                let mut specs = Vec::new();
                for (doc, _) in docs.iter().zip(keep).filter(|(_, k)| *k) {
                    if let Some(spec) = read_system_yaml(doc).map_err(context)? {
                        specs.push((spec, self.tree.release_label(doc.root).to_string(), doc.path.clone()));
                    }
                }
                systems(&specs)?
            }
            MetaKind::Models | MetaKind::ModelGemms => {
                let docs = self.tree.model_configs();
                let names: Vec<String> = docs.iter().map(|d| model_name(&d.stem)).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let keep = prune::select(state, filters, &["model"], &[refs])?;
                let mut models = Vec::new();
                for (doc, _) in docs.iter().zip(keep).filter(|(_, k)| *k) {
                    let model = read_model_config(doc).map_err(context)?;
                    models.push((model, self.tree.release_label(doc.root).to_string()));
                }
                if self.kind == MetaKind::Models { models_batch(&models)? } else { model_gemms_batch(&models)? }
            }
            MetaKind::SupportMatrix => support_matrix_batch(&self.tree, &self.schema).map_err(|e| match e {
                DataFusionError::External(inner) => {
                    DataFusionError::Execution(format!("aic.meta.support_matrix: {inner}"))
                }
                other => other,
            })?,
            MetaKind::SiliconRefs => crate::silicon_refs::batch()?,
        };
        let exec = MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&self.schema), projection.cloned())?;
        Ok(exec)
    }
}

/// `Org--Name_config` → `Org/Name`.
fn model_name(stem: &str) -> String {
    let base = stem.strip_suffix("_config").unwrap_or(stem);
    match base.split_once("--") {
        Some((org, name)) => format!("{org}/{name}"),
        None => base.to_string(),
    }
}

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn databases_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("db", false),
        utf8("system", false),
        utf8("backend", false),
        utf8("version", false),
        Field::new("latest", DataType::Boolean, false),
        Field::new("marker_only", DataType::Boolean, false),
        utf8("table", true),
        utf8("family", true),
        utf8("layout", true),
        utf8("release", true),
        utf8("path", true),
        utf8("shadowed_releases", true),
    ]))
}

/// One row per table file a database holds itself; a database that holds
/// none (its tables all come from the shared layer) has one row with a NULL
/// table. Only the spec's databases are listed (docs/spec/
/// families_hybrid_vl_databases.md 4.2): communication-library tables are
/// in `aic.meta.comm_libraries`, and partial dirs are no databases.
fn databases(tree: &DataTree) -> Result<RecordBatch> {
    let set = tree.databases();
    if let Some(e) = set.broken().next() {
        return Err(DataFusionError::Execution(format!("aic.meta.databases: {e}")));
    }
    let mut text: Vec<StringBuilder> = (0..10).map(|_| StringBuilder::new()).collect();
    let (mut latest, mut marker) = (BooleanBuilder::new(), BooleanBuilder::new());
    let files = tree.perf_files();
    for e in set.entries() {
        let own: Vec<&PerfFile> = files
            .iter()
            .filter(|f| !f.partial_dir && f.system == e.system && f.backend == e.backend && f.version == e.version)
            .collect();
        let rows: Vec<Option<&PerfFile>> =
            if own.is_empty() { vec![None] } else { own.into_iter().map(Some).collect() };
        for f in rows {
            text[0].append_value(e.db());
            text[1].append_value(&e.system);
            text[2].append_value(&e.backend);
            text[3].append_value(&e.version);
            latest.append_value(e.latest);
            marker.append_value(e.marker_only);
            file_columns(tree, f, &mut text[4..]);
        }
    }
    let mut arrays: Vec<ArrayRef> = text[..4].iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef).collect();
    arrays.push(Arc::new(latest.finish()));
    arrays.push(Arc::new(marker.finish()));
    arrays.extend(text[4..].iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    Ok(RecordBatch::try_new(databases_schema(), arrays)?)
}

/// table, family, layout, release, path, shadowed_releases of a file (all NULL without one).
fn file_columns(tree: &DataTree, f: Option<&PerfFile>, cols: &mut [StringBuilder]) {
    let Some(f) = f else {
        cols.iter_mut().for_each(StringBuilder::append_null);
        return;
    };
    cols[0].append_value(&f.table);
    cols[1].append_option(f.family.as_deref());
    cols[2].append_value(match f.layout {
        Layout::Legacy => "legacy",
        Layout::Family => "family",
    });
    cols[3].append_value(tree.release_label(f.root));
    cols[4].append_value(f.path.display().to_string());
    if f.shadowed.is_empty() {
        cols[5].append_null();
    } else {
        let labels: Vec<&str> = f.shadowed.iter().map(|&r| tree.release_label(r)).collect();
        cols[5].append_value(labels.join(", "));
    }
}

fn comm_libraries_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("system", false),
        utf8("library", false),
        utf8("version", false),
        utf8("table", false),
        utf8("family", true),
        utf8("layout", false),
        utf8("release", false),
        utf8("path", false),
        utf8("shadowed_releases", true),
    ]))
}

/// The communication libraries' tables (`nccl/<version>/`, `comm/nccl/<version>/`,
/// oneCCL likewise): the databases of a system read them by the system's
/// NCCL version; they are not databases themselves.
fn comm_libraries(tree: &DataTree) -> Result<RecordBatch> {
    let mut text: Vec<StringBuilder> = (0..9).map(|_| StringBuilder::new()).collect();
    for f in tree.perf_files().iter().filter(|f| !DATABASE_BACKENDS.contains(&f.backend.as_str())) {
        text[0].append_value(&f.system);
        text[1].append_value(&f.backend);
        text[2].append_value(&f.version);
        file_columns(tree, Some(f), &mut text[3..]);
    }
    let arrays: Vec<ArrayRef> = text.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef).collect();
    Ok(RecordBatch::try_new(comm_libraries_schema(), arrays)?)
}

fn systems_schema() -> SchemaRef {
    let f64s = [
        "mem_bw",
        "mem_bw_empirical_scaling_factor",
        "mem_empirical_constant_latency",
        "mem_capacity",
        "bfloat16_tc_flops",
        "fp8_tc_flops",
        "fp4_tc_flops",
        "int8_tc_flops",
    ];
    let mut fields = vec![utf8("system", false), utf8("data_dir", true)];
    fields.extend(f64s.iter().map(|n| Field::new(*n, DataType::Float64, true)));
    fields.push(Field::new("sm_version", DataType::Int64, true));
    fields.push(Field::new("num_gpus_per_node", DataType::Int64, false));
    fields.push(Field::new("num_gpus_per_rack", DataType::Int64, true));
    for n in ["intra_node_bw", "inter_node_bw", "inter_rack_bw", "p2p_latency"] {
        fields.push(Field::new(n, DataType::Float64, true));
    }
    fields.extend([utf8("nccl_version", true), utf8("release", false), utf8("path", false)]);
    Arc::new(Schema::new(fields))
}

fn systems(specs: &[(aicsql_tables::SystemSpec, String, std::path::PathBuf)]) -> Result<RecordBatch> {
    let text = |f: &dyn Fn(&aicsql_tables::SystemSpec, &str, &std::path::Path) -> Option<String>| {
        let mut b = StringBuilder::new();
        for (s, r, p) in specs {
            b.append_option(f(s, r, p));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let num = |f: &dyn Fn(&aicsql_tables::SystemSpec) -> Option<Num>| {
        let mut b = Float64Builder::new();
        for (s, _, _) in specs {
            b.append_option(f(s).map(Num::as_f64));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let int = |f: &dyn Fn(&aicsql_tables::SystemSpec) -> Option<i64>| {
        let mut b = Int64Builder::new();
        for (s, _, _) in specs {
            b.append_option(f(s));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let arrays = vec![
        text(&|s, _, _| Some(s.system.clone())),
        text(&|s, _, _| s.data_dir.clone()),
        num(&|s| Some(s.mem_bw)),
        num(&|s| Some(s.mem_bw_empirical_scaling_factor)),
        num(&|s| Some(s.mem_empirical_constant_latency)),
        num(&|s| s.mem_capacity),
        num(&|s| Some(s.bfloat16_tc_flops)),
        num(&|s| s.fp8_tc_flops),
        num(&|s| s.fp4_tc_flops),
        num(&|s| s.int8_tc_flops),
        int(&|s| s.sm_version),
        int(&|s| Some(s.num_gpus_per_node)),
        int(&|s| s.num_gpus_per_rack),
        num(&|s| Some(s.intra_node_bw)),
        num(&|s| Some(s.inter_node_bw)),
        num(&|s| s.inter_rack_bw),
        num(&|s| Some(s.p2p_latency)),
        text(&|s, _, _| s.nccl_version.clone()),
        text(&|_, r, _| Some(r.to_string())),
        text(&|_, _, p| Some(p.display().to_string())),
    ];
    Ok(RecordBatch::try_new(systems_schema(), arrays)?)
}

fn models_schema() -> SchemaRef {
    let ints = [
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "vocab_size",
        "num_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
    ];
    let mut fields = vec![utf8("model", false), utf8("architecture", true), utf8("family", true)];
    fields.extend(ints.iter().map(|n| Field::new(*n, DataType::Int64, true)));
    fields.push(utf8("quant_method", true));
    fields.push(Field::new("use_qk_norm", DataType::Boolean, false));
    fields.extend([utf8("release", false), utf8("path", false)]);
    Arc::new(Schema::new(fields))
}

fn models_batch(models: &[(aicsql_tables::ModelConfig, String)]) -> Result<RecordBatch> {
    let text = |f: &dyn Fn(&aicsql_tables::ModelConfig, &str) -> Option<String>| {
        let mut b = StringBuilder::new();
        for (m, r) in models {
            b.append_option(f(m, r));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let int = |f: &dyn Fn(&aicsql_tables::ModelConfig) -> Option<i64>| {
        let mut b = Int64Builder::new();
        for (m, _) in models {
            b.append_option(f(m));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let mut qk = BooleanBuilder::new();
    for (m, _) in models {
        qk.append_value(m.use_qk_norm);
    }
    let arrays = vec![
        text(&|m, _| Some(m.model.clone())),
        text(&|m, _| m.architecture.clone()),
        text(&|m, _| m.family.map(str::to_string)),
        int(&|m| m.num_hidden_layers),
        int(&|m| m.hidden_size),
        int(&|m| m.num_attention_heads),
        int(&|m| m.num_key_value_heads),
        int(&|m| m.head_dim),
        int(&|m| m.intermediate_size),
        int(&|m| m.vocab_size),
        int(&|m| m.num_experts),
        int(&|m| m.num_experts_per_tok),
        int(&|m| m.moe_intermediate_size),
        text(&|m, _| m.quant_method.clone()),
        Arc::new(qk.finish()) as ArrayRef,
        text(&|_, r| Some(r.to_string())),
        text(&|m, _| Some(m.path.display().to_string())),
    ];
    Ok(RecordBatch::try_new(models_schema(), arrays)?)
}

/// Tensor-parallel degrees `aic.meta.model_gemms` lists.
const MODEL_GEMM_TPS: [u32; 4] = [1, 2, 4, 8];

fn model_gemms_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("model", false),
        Field::new("tp", DataType::Int64, false),
        utf8("op", false),
        Field::new("n", DataType::Int64, false),
        Field::new("k", DataType::Int64, false),
        utf8("quant", false),
        Field::new("count", DataType::Float64, false),
    ]))
}

/// Every GEMM op of every model at tp 1, 2, 4, 8. A (model, tp) the spec
/// cannot price (unsupported architecture or quantization, heads not
/// divisible by tp) has no rows; `engine_step` says why for a given one.
fn model_gemms_batch(models: &[(aicsql_tables::ModelConfig, String)]) -> Result<RecordBatch> {
    let (mut model, mut tp, mut op) = (StringBuilder::new(), Int64Builder::new(), StringBuilder::new());
    let (mut n, mut k, mut quant) = (Int64Builder::new(), Int64Builder::new(), StringBuilder::new());
    let mut count = datafusion::arrow::array::Float64Builder::new();
    for (cfg, _) in models {
        for degree in MODEL_GEMM_TPS {
            let gemms = match aicsql_tables::step::model_gemms(cfg, degree) {
                Ok(gemms) => gemms,
                Err(aicsql_tables::step::StepError::Input(_) | aicsql_tables::step::StepError::Refused(_)) => continue,
                Err(e) => return Err(DataFusionError::Execution(format!("aic.meta.model_gemms: {}: {e}", cfg.model))),
            };
            for g in gemms {
                model.append_value(&cfg.model);
                tp.append_value(i64::from(degree));
                op.append_value(g.op);
                n.append_value(g.n);
                k.append_value(g.k);
                quant.append_value(g.quant.name());
                count.append_value(g.count);
            }
        }
    }
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(model.finish()),
        Arc::new(tp.finish()),
        Arc::new(op.finish()),
        Arc::new(n.finish()),
        Arc::new(k.finish()),
        Arc::new(quant.finish()),
        Arc::new(count.finish()),
    ];
    Ok(RecordBatch::try_new(model_gemms_schema(), arrays)?)
}

/// `HuggingFaceID` → `hugging_face_id`, `ErrMsg` → `err_msg`.
fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower = i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c == ' ' || c == '-' {
            out.push('_');
        } else {
            out.push(c);
        }
    }
    out
}

/// Columns: the union of the CSV headers (snake_case, text), then `release`, `path`.
/// Needs only the header lines, which are read when the table is resolved.
fn support_matrix_schema(tree: &DataTree) -> Result<SchemaRef> {
    let mut names: Vec<String> = Vec::new();
    for doc in tree.support_matrices() {
        let header = std::fs::read_to_string(&doc.path)
            .map_err(|e| DataFusionError::Execution(format!("aic.meta.support_matrix: {}: {e}", doc.path.display())))?;
        for col in header.lines().next().unwrap_or("").split(',') {
            let col = snake_case(col.trim());
            if !col.is_empty() && !names.contains(&col) {
                names.push(col);
            }
        }
    }
    let mut fields: Vec<Field> = names.iter().map(|n| utf8(n, true)).collect();
    fields.extend([utf8("release", false), utf8("path", false)]);
    Ok(Arc::new(Schema::new(fields)))
}

fn support_matrix_batch(tree: &DataTree, schema: &SchemaRef) -> Result<RecordBatch> {
    let mut batches = Vec::new();
    for doc in tree.support_matrices() {
        let release = tree.release_label(doc.root);
        let path = doc.path.display().to_string();
        for batch in support_matrix::read_support_matrix(doc).map_err(|e| DataFusionError::External(Box::new(e)))? {
            let rows = batch.num_rows();
            let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
            for field in schema.fields() {
                let array = match field.name().as_str() {
                    "release" => Arc::new(datafusion::arrow::array::StringArray::from(vec![release; rows])) as ArrayRef,
                    "path" => {
                        Arc::new(datafusion::arrow::array::StringArray::from(vec![path.as_str(); rows])) as ArrayRef
                    }
                    name => match batch.schema().fields().iter().position(|f| snake_case(f.name()) == name) {
                        Some(i) => Arc::clone(batch.column(i)),
                        None => new_null_array(&DataType::Utf8, rows),
                    },
                };
                arrays.push(array);
            }
            batches.push(RecordBatch::try_new(Arc::clone(schema), arrays)?);
        }
    }
    Ok(datafusion::arrow::compute::concat_batches(schema, &batches)?)
}

#[cfg(test)]
mod tests {
    use super::{model_name, snake_case};

    #[test]
    fn snake_cases_csv_headers() {
        assert_eq!(snake_case("HuggingFaceID"), "hugging_face_id");
        assert_eq!(snake_case("ErrMsg"), "err_msg");
        assert_eq!(snake_case("System"), "system");
    }

    #[test]
    fn names_models_like_hugging_face() {
        assert_eq!(model_name("Qwen--Qwen3-32B-FP8_config"), "Qwen/Qwen3-32B-FP8");
    }
}
