//! Malformed data, each case on a temporary copy of a few real databases:
//! `h200_sxm/vllm/{0.19.0, 0.18.0, 0.14.0}` (intact: the GEMM goldens' union)
//! and `gb200/vllm/0.19.0` (the one broken), their system YAMLs and two model
//! configs, as one legacy release. The query that needs the broken file must
//! fail through SQL naming the file and what is wrong (never NULL), or do
//! what the spec documents (duplicate keys: first row wins; a GEMM latency
//! below its SOL is raised to it, docs/spec 4.4); queries on the intact
//! databases of the same tree keep their values.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, RecordBatch, StringArray};
use datafusion::arrow::compute::{cast, concat_batches};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::prelude::SessionContext;

use aicsql::SessionBuilder;

use crate::harness::{Outcome, run_sql, runtime};

const LEGACY: (&str, &str, &str) = ("aiconfigurator-0.10.0", "aiconfigurator", "aiconfigurator==0.10.0");
const TABLES: [&str; 5] = ["gemm", "context_attention", "generation_attention", "custom_allreduce", "moe"];
const INTACT: [&str; 3] = ["0.19.0", "0.18.0", "0.14.0"];
const MODELS: [&str; 2] = ["Qwen--Qwen3-32B-FP8_config.json", "Qwen--Qwen3-8B_config.json"];

fn wheel() -> PathBuf {
    crate::common::release_root(LEGACY.0, LEGACY.1)
}

/// A temporary tree; `root` is the package folder (`.../aiconfigurator`).
struct Tree {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        let release = dir.path().join(LEGACY.0);
        let root = release.join(LEGACY.1);
        fs::create_dir_all(root.join("systems/data")).expect("mkdir");
        fs::write(release.join("RELEASE"), format!("{}\n", LEGACY.2)).expect("marker");
        let src = wheel();
        let copy = |rel: &str| {
            let (from, to) = (src.join(rel), root.join(rel));
            if from.is_file() {
                fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
                fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
            }
        };
        for system in ["h200_sxm", "gb200"] {
            copy(&format!("systems/{system}.yaml"));
        }
        copy("systems/op_kernel_source_manifest.yaml");
        for table in TABLES {
            for v in INTACT {
                copy(&format!("systems/data/h200_sxm/vllm/{v}/{table}_perf.parquet"));
            }
            copy(&format!("systems/data/gb200/vllm/0.19.0/{table}_perf.parquet"));
        }
        for m in MODELS {
            copy(&format!("model_configs/{m}"));
        }
        Tree { dir, root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn gb200(&self, table: &str) -> PathBuf {
        self.path(&format!("systems/data/gb200/vllm/0.19.0/{table}_perf.parquet"))
    }

    fn session(&self) -> Result<SessionContext, String> {
        SessionBuilder::open(&[self.dir.path()]).map(|b| b.build()).map_err(|e| e.to_string())
    }
}

fn read_parquet(path: &Path) -> RecordBatch {
    let file = fs::File::open(path).expect("open parquet");
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet").build().expect("reader");
    let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    concat_batches(&batches[0].schema(), &batches).expect("concat")
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let file = fs::File::create(path).expect("create parquet");
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
}

/// `batch` with column `name` replaced by `array` (of any type).
fn replace_column(batch: &RecordBatch, name: &str, array: ArrayRef) -> RecordBatch {
    let schema = batch.schema();
    let i = schema.index_of(name).expect("column");
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[i] = Field::new(name, array.data_type().clone(), true);
    let mut columns = batch.columns().to_vec();
    columns[i] = array;
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("batch")
}

fn drop_column(batch: &RecordBatch, name: &str) -> RecordBatch {
    let i = batch.schema().index_of(name).expect("column");
    let mut b = batch.clone();
    b.remove_column(i);
    b
}

fn with_latency(batch: &RecordBatch, f: impl Fn(usize, f64) -> f64) -> RecordBatch {
    let lat = cast(batch.column_by_name("latency").expect("latency"), &DataType::Float64).expect("f64");
    let lat = lat.as_primitive::<Float64Type>();
    let new: Float64Array = (0..lat.len()).map(|i| Some(f(i, lat.value(i)))).collect();
    replace_column(batch, "latency", Arc::new(new))
}

/// Row `index` of the GEMM file's fp8_block rows: (row, m, n, k).
fn gemm_row(batch: &RecordBatch, nth: usize) -> (usize, i64, i64, i64) {
    let dtype = cast(batch.column_by_name("gemm_dtype").expect("dtype"), &DataType::Utf8).expect("text");
    let dtype = dtype.as_string::<i32>();
    let int = |name: &str, i: usize| {
        let c = cast(batch.column_by_name(name).expect("column"), &DataType::Int64).expect("int");
        c.as_primitive::<Int64Type>().value(i)
    };
    let row = (0..batch.num_rows()).filter(|&i| dtype.value(i) == "fp8_block").nth(nth).expect("fp8_block rows");
    (row, int("m", row), int("n", row), int("k", row))
}

fn value(ctx: &SessionContext, sql: &str) -> Result<Option<f64>, String> {
    match run_sql(&runtime(), ctx, sql) {
        Outcome::Rows(b) => {
            let c = cast(b[0].column(0), &DataType::Float64).map_err(|e| e.to_string())?;
            let a = c.as_primitive::<Float64Type>();
            Ok(a.is_valid(0).then(|| a.value(0)))
        }
        other => Err(other.describe()),
    }
}

const GEMM_GB200: &str = "SELECT gemm_latency('gb200/vllm/0.19.0', 'fp8_block', 32, 1280, 5120)";
const SOL_GB200: &str = "SELECT gemm_sol('gb200/vllm/0.19.0', 'fp8_block', 32, 1280, 5120)";
const STEP_GB200: &str = "SELECT step_latency('Qwen/Qwen3-8B', 'gb200/vllm/0.19.0', 'context', 1, 1, 1024, 128)";
/// Queries of the intact databases, and what they answer on an intact copy.
const SPARED: [&str; 5] = [
    "SELECT gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', 32, 1280, 5120)",
    "SELECT gemm_sol('h200_sxm/vllm/0.19.0', 'fp8_block', 32, 1280, 5120)",
    "SELECT step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128)",
    "SELECT step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.18.0', 'generation', 8, 4, 512, 64)",
    "SELECT count(*) FROM aic.perf.gemm WHERE system = 'h200_sxm' AND version = '0.19.0'",
];

fn intact() -> &'static Vec<Option<f64>> {
    static VALUES: OnceLock<Vec<Option<f64>>> = OnceLock::new();
    VALUES.get_or_init(|| {
        let tree = Tree::new();
        let ctx = tree.session().expect("an intact copy mounts");
        let mut out = Vec::new();
        for sql in SPARED.iter().chain(&[GEMM_GB200, SOL_GB200, STEP_GB200]) {
            let v = value(&ctx, sql).unwrap_or_else(|e| panic!("intact copy: {sql}: {e}"));
            assert!(v.is_some(), "intact copy: {sql} should answer");
            out.push(v);
        }
        out
    })
}

/// The intact databases answer as on an intact copy.
fn spared(ctx: &SessionContext, problems: &mut Vec<String>) {
    for (i, sql) in SPARED.iter().enumerate() {
        match value(ctx, sql) {
            Ok(v) if v.map(f64::to_bits) == intact()[i].map(f64::to_bits) => {}
            other => problems.push(format!("an intact database changed: {sql}: {other:?}, intact {:?}", intact()[i])),
        }
    }
}

/// `sql` fails naming `file` and, in the rest of the message, one of `what`
/// (case-insensitive).
fn fails_naming(ctx: &SessionContext, sql: &str, file: &Path, what: &[&str], problems: &mut Vec<String>) {
    match value(ctx, sql) {
        Err(m) if m.starts_with("PANIC") => problems.push(format!("{sql}: {m}")),
        Err(m) => {
            // Shown with --nocapture: the error a user would see.
            println!("{sql}\n  -> {m}");
            let path = file.display().to_string();
            if !m.contains(&path) {
                problems.push(format!("{sql}: the error does not name {path}: {m}"));
            } else {
                let rest = m.replace(&path, "").to_lowercase();
                if !what.iter().any(|w| rest.contains(&w.to_lowercase())) {
                    problems.push(format!("{sql}: the error does not say what is wrong (any of {what:?}): {m}"));
                }
            }
        }
        Ok(v) => problems.push(format!("{sql}: no error for the broken file {}: {v:?}", file.display())),
    }
}

fn assert_ok(case: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{case}:\n  {}", problems.join("\n  "));
}

/// A broken GEMM file of gb200: every query that reads it fails naming it.
fn broken_gemm(case: &str, what: &[&str], brk: impl FnOnce(&Path)) {
    let tree = Tree::new();
    let file = tree.gb200("gemm");
    brk(&file);
    let ctx = match tree.session() {
        Ok(c) => c,
        Err(e) => panic!("{case}: the tree no longer mounts: {e}"),
    };
    let mut problems = Vec::new();
    fails_naming(&ctx, GEMM_GB200, &file, what, &mut problems);
    fails_naming(&ctx, STEP_GB200, &file, what, &mut problems);
    fails_naming(
        &ctx,
        "SELECT gemm_latency('gb200/vllm/0.19.0', 'fp8_block', 32, 1280, 5120) FROM (VALUES (1)) t(x) WHERE x = 1",
        &file,
        what,
        &mut problems,
    );
    spared(&ctx, &mut problems);
    assert_ok(case, problems);
}

#[test]
fn truncated_parquet() {
    broken_gemm("truncated gemm_perf.parquet", &["parquet", "truncated", "corrupt", "eof", "footer"], |f| {
        let bytes = fs::read(f).expect("read");
        fs::write(f, &bytes[..bytes.len() / 2]).expect("truncate");
    });
}

#[test]
fn zero_byte_parquet() {
    broken_gemm("zero-byte gemm_perf.parquet", &["parquet", "empty", "size", "footer", "eof"], |f| {
        fs::write(f, b"").expect("truncate");
    });
}

#[test]
fn parquet_with_a_column_of_the_wrong_type() {
    broken_gemm("gemm_perf.parquet with latency as text", &["latency"], |f| {
        let b = read_parquet(f);
        let text = cast(b.column_by_name("latency").expect("latency"), &DataType::Utf8).expect("to text");
        write_parquet(f, &replace_column(&b, "latency", text));
    });
}

#[test]
fn parquet_missing_a_required_column() {
    broken_gemm("gemm_perf.parquet without latency", &["latency"], |f| {
        let b = read_parquet(f);
        write_parquet(f, &drop_column(&b, "latency"));
    });
}

/// One row's latency set to `bad`; the query of exactly that key.
fn bad_gemm_row(bad: f64) -> (Tree, SessionContext, String, String) {
    let tree = Tree::new();
    let file = tree.gb200("gemm");
    let b = read_parquet(&file);
    let (row, m, n, k) = gemm_row(&b, 100);
    write_parquet(&file, &with_latency(&b, |i, v| if i == row { bad } else { v }));
    let ctx = tree.session().expect("mount");
    let q = format!("SELECT gemm_latency('gb200/vllm/0.19.0', 'fp8_block', {m}, {n}, {k})");
    let sol = format!("SELECT gemm_sol('gb200/vllm/0.19.0', 'fp8_block', {m}, {n}, {k})");
    (tree, ctx, q, sol)
}

#[test]
fn a_nan_gemm_latency_is_an_error_naming_the_file() {
    let (tree, ctx, q, _) = bad_gemm_row(f64::NAN);
    let mut problems = Vec::new();
    let file = tree.gb200("gemm");
    fails_naming(&ctx, &q, &file, &["nan"], &mut problems);
    spared(&ctx, &mut problems);
    assert_ok("a NaN latency in gemm_perf.parquet", problems);
}

/// docs/spec 4.4: every GEMM entry below its SOL is raised to it, so a zero
/// or negative measured latency prices as the SOL (not NULL, not an error).
#[test]
fn a_zero_or_negative_gemm_latency_is_raised_to_the_sol() {
    for bad in [0.0, -0.0, -1.0, f64::MIN] {
        let (_tree, ctx, q, sol) = bad_gemm_row(bad);
        let mut problems = Vec::new();
        match (value(&ctx, &q), value(&ctx, &sol)) {
            (Ok(Some(v)), Ok(Some(s))) if v.to_bits() == s.to_bits() => {}
            (got, sol) => problems.push(format!("{q}: {got:?}, the SOL is {sol:?}")),
        }
        spared(&ctx, &mut problems);
        assert_ok(&format!("a latency of {bad} in gemm_perf.parquet"), problems);
    }
}

/// Context attention has no SOL clamp: NaN, zero and negative latencies
/// must be refused naming the file (a step must not be priced with them).
#[test]
fn nan_zero_or_negative_attention_latencies_are_errors_naming_the_file() {
    let mut problems = Vec::new();
    for bad in [f64::NAN, 0.0, -1.0] {
        let tree = Tree::new();
        let file = tree.gb200("context_attention");
        let b = read_parquet(&file);
        write_parquet(&file, &with_latency(&b, |_, _| bad));
        let ctx = tree.session().expect("mount");
        let label = if bad.is_nan() { "nan".to_string() } else { bad.to_string() };
        fails_naming(&ctx, STEP_GB200, &file, &["latency"], &mut problems);
        let _ = label;
        spared(&ctx, &mut problems);
    }
    assert_ok("context attention latencies NaN / 0 / -1", problems);
}

#[test]
fn duplicate_keys_first_row_wins() {
    let mut problems = Vec::new();
    for first in [true, false] {
        let tree = Tree::new();
        let file = tree.gb200("gemm");
        let b = read_parquet(&file);
        let (row, m, n, k) = gemm_row(&b, 100);
        let original = b.slice(row, 1);
        let lat = cast(original.column_by_name("latency").expect("latency"), &DataType::Float64).expect("f64");
        let planted = lat.as_primitive::<Float64Type>().value(0) * 3.0 + 0.5;
        let dup = with_latency(&original, |_, _| planted);
        let dup = RecordBatch::try_new(b.schema(), dup.columns().to_vec()).expect("same schema");
        let parts = if first { vec![dup, b.clone()] } else { vec![b.clone(), dup] };
        write_parquet(&file, &concat_batches(&b.schema(), &parts).expect("concat"));
        let ctx = tree.session().expect("mount");
        for shared in ["false", "true"] {
            let _ = run_sql(&runtime(), &ctx, &format!("SET aic.shared_layer = {shared}"));
            let q = format!("SELECT gemm_latency('gb200/vllm/0.19.0', 'fp8_block', {m}, {n}, {k})");
            let got = value(&ctx, &q);
            let want = if first {
                Some(planted)
            } else {
                // The file's own first row: what an intact copy answers.
                let intact = Tree::new();
                value(&intact.session().expect("mount"), &q).expect("intact")
            };
            if got.as_ref().map(|v| v.map(f64::to_bits)) != Ok(want.map(f64::to_bits)) {
                problems.push(format!(
                    "duplicate {} the original row, shared_layer {shared}: {q} gives {got:?}, the first row says {want:?}",
                    if first { "before" } else { "after" }
                ));
            }
        }
        let _ = run_sql(&runtime(), &ctx, "SET aic.shared_layer = true");
        spared(&ctx, &mut problems);
    }
    assert_ok("duplicate keys", problems);
}

fn broken_yaml(case: &str, what: &[&str], edit: impl FnOnce(&str) -> String) {
    let tree = Tree::new();
    let file = tree.path("systems/gb200.yaml");
    let text = fs::read_to_string(&file).expect("yaml");
    fs::write(&file, edit(&text)).expect("write yaml");
    let ctx = tree.session().unwrap_or_else(|e| panic!("{case}: the tree no longer mounts: {e}"));
    let mut problems = Vec::new();
    for sql in [SOL_GB200, GEMM_GB200, STEP_GB200] {
        fails_naming(&ctx, sql, &file, what, &mut problems);
    }
    spared(&ctx, &mut problems);
    assert_ok(case, problems);
}

#[test]
fn system_yaml_with_a_syntax_error() {
    broken_yaml(
        "gb200.yaml with a syntax error",
        &["yaml", "line", "column", "syntax", "expected", "invalid", "parse"],
        |t| t.replacen("gpu:\n", "gpu: [unclosed\n", 1),
    );
}

#[test]
fn system_yaml_missing_a_field() {
    broken_yaml("gb200.yaml without gpu.mem_bw", &["mem_bw"], |t| {
        t.lines().filter(|l| !l.trim_start().starts_with("mem_bw:")).map(|l| format!("{l}\n")).collect()
    });
}

fn broken_model(case: &str, what: &[&str], edit: impl FnOnce(&str) -> String) {
    let tree = Tree::new();
    let file = tree.path("model_configs/Qwen--Qwen3-8B_config.json");
    let text = fs::read_to_string(&file).expect("json");
    fs::write(&file, edit(&text)).expect("write json");
    let ctx = tree.session().unwrap_or_else(|e| panic!("{case}: the tree no longer mounts: {e}"));
    let mut problems = Vec::new();
    for sql in [
        "SELECT step_latency('Qwen/Qwen3-8B', 'h200_sxm/vllm/0.19.0', 'context', 1, 1, 1024, 128)",
        "SELECT step_latency('Qwen/Qwen3-8B', 'h200_sxm/vllm/0.19.0', 'generation', 2, 8, 512, 64)",
        "SELECT count(*) FROM engine_step('Qwen/Qwen3-8B', 'h200_sxm/vllm/0.19.0', 'context', 1, 1, 1024, 128)",
    ] {
        fails_naming(&ctx, sql, &file, what, &mut problems);
    }
    spared(&ctx, &mut problems);
    assert_ok(case, problems);
}

#[test]
fn model_json_with_a_syntax_error() {
    broken_model("Qwen3-8B config that is not JSON", &["json", "line", "column", "expected", "eof", "parse"], |t| {
        t[..t.len() / 2].to_string()
    });
}

#[test]
fn model_json_missing_a_field() {
    broken_model("Qwen3-8B config without num_attention_heads", &["num_attention_heads"], |t| {
        let kept: Vec<&str> = t.lines().filter(|l| !l.contains("\"num_attention_heads\"")).collect();
        kept.join("\n")
    });
}

#[test]
fn a_symlink_loop_named_like_a_perf_file() {
    broken_gemm("gemm_perf.parquet is a symlink to itself", &["symbolic", "loop", "too many levels", "symlink"], |f| {
        fs::remove_file(f).expect("rm");
        std::os::unix::fs::symlink(f, f).expect("symlink loop");
    });
}

/// Directory cycles (`gb200/loop -> .`, `gb200/vllm/0.19.0/up -> ..`): the
/// tree mounts, the intact databases keep their values, and gb200 either
/// answers as an intact copy does or fails naming the cycle.
#[test]
fn directory_symlink_cycles() {
    let tree = Tree::new();
    let gb = tree.path("systems/data/gb200");
    std::os::unix::fs::symlink(".", gb.join("loop")).expect("symlink");
    std::os::unix::fs::symlink("..", gb.join("vllm/0.19.0/up")).expect("symlink");
    let ctx = tree.session().unwrap_or_else(|e| panic!("the tree with symlink cycles no longer mounts: {e}"));
    let mut problems = Vec::new();
    spared(&ctx, &mut problems);
    let intact_gb = intact()[SPARED.len()];
    match value(&ctx, GEMM_GB200) {
        Ok(v) if v.map(f64::to_bits) == intact_gb.map(f64::to_bits) => {}
        Err(m) if m.contains("gemm_latency") && (m.contains("loop") || m.contains("/up")) => {}
        other => problems.push(format!("{GEMM_GB200}: {other:?}, an intact copy gives {intact_gb:?}")),
    }
    match value(&ctx, "SELECT count(*) FROM aic.meta.databases WHERE system = 'gb200' AND \"table\" = 'gemm'") {
        Ok(Some(1.0)) => {}
        other => problems.push(format!("gb200 lists {other:?} GEMM tables (one file, seen through the cycles?)")),
    }
    assert_ok("directory symlink cycles", problems);
}

/// chmod 000 where that makes the file unreadable; running as root (where
/// it does not), the file is replaced by a directory of the same name,
/// which nobody can read as a file.
#[test]
fn an_unreadable_file() {
    broken_gemm(
        "gemm_perf.parquet cannot be read",
        &["permission", "denied", "directory", "not a file", "read"],
        |f| {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(f, fs::Permissions::from_mode(0o000)).expect("chmod");
            if fs::read(f).is_ok() {
                println!(
                    "chmod 000 does not stop this user (root?) from reading: replacing the file by a directory instead"
                );
                fs::set_permissions(f, fs::Permissions::from_mode(0o644)).expect("chmod back");
                fs::remove_file(f).expect("rm");
                fs::create_dir(f).expect("mkdir in place of the file");
                fs::write(f.join("part-0.parquet"), b"not parquet").expect("a file inside");
            }
        },
    );
}

/// The GEMM goldens of h200_sxm/vllm/0.19.0 (shared layer off and on) are
/// reproduced bit for bit in a tree that also holds a broken database.
#[test]
fn goldens_pass_bit_for_bit_beside_a_broken_database() {
    let tree = Tree::new();
    let gemm = tree.gb200("gemm");
    let bytes = fs::read(&gemm).expect("read");
    fs::write(&gemm, &bytes[..bytes.len() / 3]).expect("truncate");
    fs::write(tree.gb200("context_attention"), b"").expect("zero bytes");
    fs::write(tree.path("systems/gb200.yaml"), "gpu: [\n").expect("bad yaml");
    let ctx = tree.session().expect("mount");
    let goldens = crate::common::goldens_dir().join("gemm_goldens.parquet");
    let rt = runtime();
    rt.block_on(ctx.register_parquet("goldens", goldens.to_str().expect("utf-8 path"), Default::default()))
        .expect("goldens");
    let mut problems = Vec::new();
    for (shared, column) in [("false", "latency_ms"), ("true", "latency_ms_shared")] {
        let _ = run_sql(&rt, &ctx, &format!("SET aic.shared_layer = {shared}"));
        let sql = format!(
            "SELECT quant || ' ' || m || ' ' || n || ' ' || k, {column}, gemm_latency('h200_sxm/vllm/0.19.0', quant, m, n, k) \
             FROM goldens WHERE system = 'h200_sxm' AND backend = 'vllm' AND version = '0.19.0'"
        );
        let Outcome::Rows(batches) = run_sql(&rt, &ctx, &sql) else {
            problems.push(format!(
                "shared_layer {shared}: the golden query failed: {}",
                run_sql(&rt, &ctx, &sql).describe()
            ));
            continue;
        };
        let mut total = 0;
        for b in &batches {
            let key = cast(b.column(0), &DataType::Utf8).expect("text");
            let key = key.as_any().downcast_ref::<StringArray>().expect("text");
            let (want, got) = (b.column(1).as_primitive::<Float64Type>(), b.column(2).as_primitive::<Float64Type>());
            for i in 0..b.num_rows() {
                total += 1;
                let w = want.is_valid(i).then(|| want.value(i).to_bits());
                let g = got.is_valid(i).then(|| got.value(i).to_bits());
                if w != g && problems.len() < 10 {
                    problems.push(format!(
                        "shared_layer {shared}: {}: {:?} instead of the golden {:?}",
                        key.value(i),
                        g.map(f64::from_bits),
                        w.map(f64::from_bits)
                    ));
                }
            }
        }
        if total != 1852 {
            problems
                .push(format!("shared_layer {shared}: {total} golden rows for h200_sxm/vllm/0.19.0, expected 1852"));
        }
    }
    assert_ok("the GEMM goldens beside a broken database", problems);
}
