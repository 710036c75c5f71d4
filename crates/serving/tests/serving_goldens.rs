//! Every point of `serving_point_goldens.parquet` (tp, dp) and of
//! `serving_pp_goldens.parquet` (pipeline parallelism, made with
//! `scripts/spec_points.py`) on the Rust path: agg
//! points equal (f64 bits) on every numeric field of the spec's result dict
//! but the power fields (energy is not modelled), disagg points equal on
//! every field (both at the spec's 3 decimals), string fields equal, error
//! points an error, and the KV-cache warning where the spec gives one.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use aicsql_serving::{
    AggEstimate, AggQuery, DisaggEstimate, DisaggQuery, Images, KvSizing, NextN, Parallel, Server, WorkerEstimate,
};
use aicsql_tables::DataTree;
use aicsql_tables::step::QuantOverrides;
use arrow::array::{Array, AsArray};
use common::{data_dir, goldens_dir};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

struct Point {
    id: String,
    mode: String,
    model: String,
    db: String,
    args: serde_json::Map<String, Value>,
    error: Option<String>,
    warning: Option<String>,
    raw: Option<serde_json::Map<String, Value>>,
}

fn points(path: &Path) -> Vec<Point> {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let col = |name: &str| {
            let c = batch.column_by_name(name).unwrap_or_else(|| panic!("goldens lack {name}"));
            let c =
                arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).unwrap_or_else(|e| panic!("{name}: {e}"));
            let a = c.as_string::<i32>().clone();
            move |i: usize| (!a.is_null(i)).then(|| a.value(i).to_string())
        };
        let (id, mode, model, db, args, error, warning, raw) = (
            col("point_id"),
            col("mode"),
            col("model"),
            col("db"),
            col("args"),
            col("error"),
            col("kv_cache_warning"),
            col("raw"),
        );
        let object = |text: Option<String>| -> Option<serde_json::Map<String, Value>> {
            text.map(|t| match serde_json::from_str::<Value>(&t) {
                Ok(Value::Object(m)) => m,
                other => panic!("not a JSON object: {other:?}"),
            })
        };
        for i in 0..batch.num_rows() {
            out.push(Point {
                id: id(i).unwrap_or_default(),
                mode: mode(i).unwrap_or_default(),
                model: model(i).unwrap_or_default(),
                db: db(i).unwrap_or_default(),
                args: object(args(i)).unwrap_or_default(),
                error: error(i).filter(|e| !e.is_empty()),
                warning: warning(i).filter(|e| !e.is_empty()),
                raw: object(raw(i)),
            });
        }
    }
    out
}

fn arg(args: &serde_json::Map<String, Value>, name: &str) -> Option<u32> {
    args.get(name).and_then(Value::as_u64).map(|v| u32::try_from(v).unwrap_or_else(|_| panic!("{name} = {v}")))
}

fn need(args: &serde_json::Map<String, Value>, name: &str) -> u32 {
    arg(args, name).unwrap_or_else(|| panic!("golden args lack {name}: {args:?}"))
}

/// `cli_estimate`'s parallel arguments: `{side}_{name}` falling back to the
/// shared `{name}` (disagg), then to the default (1 for pp and dp).
fn parallel(args: &serde_json::Map<String, Value>, side: Option<&str>) -> Parallel {
    let get = |name: &str| side.and_then(|s| arg(args, &format!("{s}_{name}"))).or_else(|| arg(args, name));
    Parallel {
        tp: get("tp_size").unwrap_or_else(|| panic!("golden args lack tp_size: {args:?}")),
        pp: get("pp_size").unwrap_or(1),
        dp: get("attention_dp_size").unwrap_or(1),
        cp: get("cp_size").unwrap_or(1),
        moe_tp: get("moe_tp_size"),
        moe_ep: get("moe_ep_size"),
    }
}

/// Our value of one field of the spec's dict.
#[derive(Debug, PartialEq)]
enum Field {
    Num(f64),
    Text(String),
    Null,
}

fn opt(v: Option<i64>) -> Field {
    v.map_or(Field::Null, |v| Field::Num(v as f64))
}

fn n(v: impl Into<f64>) -> Field {
    Field::Num(v.into())
}

fn agg_fields(e: &AggEstimate, server: &Server) -> BTreeMap<&'static str, Field> {
    let p = &e.parallel;
    BTreeMap::from([
        ("model", Field::Text(server.model().to_string())),
        ("isl", n(e.isl)),
        ("osl", n(e.osl)),
        ("prefix", n(e.prefix)),
        ("concurrency", n(e.concurrency as f64)),
        ("request_rate", n(e.request_rate)),
        ("bs", n(e.bs)),
        ("global_bs", n(e.global_bs as f64)),
        ("ttft", n(e.ttft_ms)),
        ("tpot", n(e.tpot_ms)),
        ("seq/s", n(e.seq_per_s)),
        ("seq/s/gpu", n(e.seq_per_s_per_gpu)),
        ("tokens/s", n(e.tokens_per_s)),
        ("tokens/s/gpu", n(e.tokens_per_s_per_gpu)),
        ("tokens/s/user", n(e.tokens_per_s_per_user)),
        ("request_latency", n(e.request_latency_ms)),
        ("encoder_latency", n(e.encoder_ms)),
        ("encoder_memory", n(e.encoder_memory_gib)),
        ("num_total_gpus", n(e.num_total_gpus as f64)),
        ("tp", n(p.tp)),
        ("pp", n(p.pp)),
        ("dp", n(p.dp)),
        ("moe_tp", opt(e.moe_tp)),
        ("moe_ep", opt(e.moe_ep)),
        ("cp", n(p.cp)),
        ("parallel", Field::Text(e.label().to_string())),
        ("gemm", Field::Text(e.quants.gemm.name().to_string())),
        ("kvcache", Field::Text(e.quants.kv.name().to_string())),
        ("fmha", Field::Text(e.quants.fmha.name().to_string())),
        ("moe", Field::Text(e.quants.moe.name().to_string())),
        ("comm", Field::Text(server.comm_quant().name().to_string())),
        ("memory", n(e.memory.total)),
        ("balance_score", n(e.balance_score)),
        ("num_ctx_reqs", n(e.num_ctx_reqs)),
        ("num_gen_reqs", n(e.num_gen_reqs)),
        ("num_tokens", n(e.num_tokens)),
        ("ctx_tokens", n(e.ctx_tokens)),
        ("gen_tokens", n(e.num_gen_reqs)),
        ("backend", Field::Text(server.backend().name().to_string())),
        ("version", Field::Text(server.version().to_string())),
        ("system", Field::Text(server.system().to_string())),
    ])
}

fn disagg_fields(e: &DisaggEstimate, server: &Server) -> BTreeMap<String, Field> {
    let mut out: BTreeMap<String, Field> = BTreeMap::new();
    let mut put = |k: &str, v: Field| {
        out.insert(k.to_string(), v);
    };
    put("model", Field::Text(server.model().to_string()));
    put("isl", n(e.isl));
    put("osl", n(e.osl));
    put("prefix", n(e.prefix));
    put("concurrency", n(e.concurrency as f64));
    put("request_rate", n(e.request_rate));
    put("ttft", n(e.ttft_ms));
    put("tpot", n(e.tpot_ms));
    put("request_latency", n(e.request_latency_ms));
    put("encoder_latency", n(e.encoder_ms));
    put("seq/s", n(e.seq_per_s));
    put("seq/s/gpu", n(e.seq_per_s_per_gpu));
    put("tokens/s", n(e.tokens_per_s));
    put("tokens/s/gpu", n(e.tokens_per_s_per_gpu));
    put("tokens/s/user", n(e.tokens_per_s_per_user));
    put("num_total_gpus", n(e.num_total_gpus as f64));
    for (side, w) in [("p", &e.prefill), ("d", &e.decode)] {
        let WorkerEstimate {
            parallel: p,
            moe_tp,
            moe_ep,
            bs,
            global_bs,
            workers,
            seq_per_s_per_worker,
            memory_gib,
            quants,
            ..
        } = w;
        let k = |name: &str| format!("({side}){name}");
        put(&k("bs"), n(*bs));
        put(&k("global_bs"), n(*global_bs as f64));
        put(&k("workers"), n(*workers));
        put(&k("seq/s/worker"), n(*seq_per_s_per_worker));
        put(&k("tp"), n(p.tp));
        put(&k("pp"), n(p.pp));
        put(&k("dp"), n(p.dp));
        put(&k("moe_tp"), opt(*moe_tp));
        put(&k("moe_ep"), opt(*moe_ep));
        if side == "p" {
            put(&k("cp"), n(p.cp));
        }
        put(&k("parallel"), Field::Text(w.label().to_string()));
        put(&k("gemm"), Field::Text(quants.gemm.name().to_string()));
        put(&k("kvcache"), Field::Text(quants.kv.name().to_string()));
        put(&k("fmha"), Field::Text(quants.fmha.name().to_string()));
        put(&k("moe"), Field::Text(quants.moe.name().to_string()));
        put(&k("comm"), Field::Text(server.comm_quant().name().to_string()));
        put(&k("memory"), n(*memory_gib));
        put(&k("backend"), Field::Text(server.backend().name().to_string()));
        put(&k("version"), Field::Text(server.version().to_string()));
        put(&k("system"), Field::Text(server.system().to_string()));
    }
    put("(e)workers", n(0));
    put("(e)tp", n(0));
    put("(e)pp", n(0));
    put("(e)parallel", Field::Text(String::new()));
    put("(e)memory", n(e.encoder_memory_gib));
    out
}

/// The spec's value as a [`Field`].
fn spec_field(v: &Value) -> Field {
    match v {
        Value::Null => Field::Null,
        Value::Number(x) => Field::Num(x.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Field::Text(s.clone()),
        other => Field::Text(other.to_string()),
    }
}

const NOT_MODELLED: [&str; 2] = ["power_w", "power_coverage"];

fn compare<K: AsRef<str>>(
    raw: &serde_json::Map<String, Value>,
    ours: &BTreeMap<K, Field>,
    counts: &mut BTreeMap<String, (usize, usize)>,
    failures: &mut Vec<String>,
    id: &str,
) {
    let ours: BTreeMap<&str, &Field> = ours.iter().map(|(k, v)| (k.as_ref(), v)).collect();
    for (key, value) in raw {
        if NOT_MODELLED.contains(&key.as_str()) {
            continue;
        }
        let entry = counts.entry(key.clone()).or_default();
        let expected = spec_field(value);
        let equal = match (ours.get(key.as_str()), &expected) {
            (Some(Field::Num(a)), Field::Num(b)) => a.to_bits() == b.to_bits(),
            (Some(a), b) => *a == b,
            (None, _) => false,
        };
        if equal {
            entry.0 += 1;
        } else {
            entry.1 += 1;
            failures.push(format!("{id} {key}: spec {expected:?}, ours {:?}", ours.get(key.as_str())));
        }
    }
    for key in ours.keys() {
        if !raw.contains_key(*key) {
            failures.push(format!("{id}: field {key} is not in the spec's dict"));
        }
    }
}

#[test]
fn every_serving_golden_point() {
    assert_eq!(run_goldens("serving_point_goldens.parquet", 80, None), 0);
}

#[test]
fn every_pipeline_parallel_golden_point() {
    assert_eq!(run_goldens("serving_pp_goldens.parquet", 40, None), 0);
}

/// DEEPSEEK / KIMIK25 aggregated: their attention is inside the MLA block,
/// which the mixed step's dict lookup reads as 0.0 (the spec's defaultdict).
#[test]
fn every_mla_agg_golden_point() {
    assert_eq!(run_goldens("serving_mla_agg_goldens.parquet", 4, None), 0);
}

/// Attention dp > 1 for HYBRIDMOE and DEEPSEEK / KIMIK25
/// (serving_family_dp_goldens.parquet, docs/spec/families_dp_cp.md 2, 5):
/// every point equal to the spec's, its 4 error points failing on ours too.
#[test]
fn every_family_attention_dp_golden_point() {
    assert_eq!(run_goldens("serving_family_dp_goldens.parquet", 30, None), 0);
}

/// Context parallelism (sglang) for HYBRIDMOE and DEEPSEEK / KIMIK25
/// (serving_family_cp_goldens.parquet, computed by the spec through
/// scripts/spec_cp_points.py; docs/spec/families_dp_cp.md 3, 6): every
/// point equal, its 4 error points (2 OOM, 2 cp with tp or dp) failing.
#[test]
fn every_family_context_parallel_golden_point() {
    assert_eq!(run_goldens("serving_family_cp_goldens.parquet", 26, None), 0);
}

/// The spec's user-facing options (serving_options_goldens.parquet,
/// docs/spec/options.md): every point (the quant overrides, TRT-LLM's
/// max_seq_len and free-memory fraction, MTP's nextn and nextn_accepted,
/// Qwen3-VL's images and encoder parallelism) equal to the spec's, its
/// KV-cache warning and encoder columns included, every error point an
/// error of the same kind (an unknown mode name, a malformed MTP depth or
/// acceptance, a refused deployment, a missing table (`fp8_ootb` and fmha
/// `fp8_block` among them: names the spec knows, no table has), OOM).
#[test]
fn every_options_golden_point_aicsql_prices() {
    let report = run_goldens_with("serving_options_goldens.parquet", 99, None, true);
    assert_eq!(
        report.priced, 99,
        "every point: quant overrides, the KV-cache knobs, MTP and images (72 equal: 57 agg, 15 disagg; 27 errors)"
    );
    assert!(report.not_priced.is_empty(), "points turning options not priced yet: {:?}", report.not_priced);
}

/// The options of a golden point's arguments: `Ok(Some)` the quant
/// overrides, `Ok(None)` when no option is turned, `Err(option)` naming the
/// first option aicsql does not price yet; an unknown mode name is an
/// `Ok(Some(Err))` (the spec's KeyError).
#[allow(clippy::type_complexity)]
fn quant_overrides(args: &serde_json::Map<String, Value>) -> Result<Option<Result<QuantOverrides, String>>, String> {
    const NOT_YET: [&str; 1] = ["stride"];
    if let Some(option) = NOT_YET.iter().find(|o| args.contains_key(**o)) {
        return Err(option.to_string());
    }
    let text = |name: &str| args.get(name).and_then(Value::as_str);
    let names = ["gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode", "fmha_quant_mode", "comm_quant_mode"];
    if !names.iter().any(|n| text(n).is_some()) {
        // The KV-cache knobs (if any) are read into the query.
        return Ok(None);
    }
    let parsed = (|| -> Result<QuantOverrides, String> {
        let e = |e: aicsql_tables::TablesError| e.to_string();
        Ok(QuantOverrides {
            gemm: text("gemm_quant_mode").map(str::parse).transpose().map_err(e)?,
            moe: text("moe_quant_mode").map(str::parse).transpose().map_err(e)?,
            kv: text("kvcache_quant_mode").map(str::parse).transpose().map_err(e)?,
            fmha: text("fmha_quant_mode").map(str::parse).transpose().map_err(e)?,
            comm: text("comm_quant_mode").map(str::parse).transpose().map_err(e)?,
        })
    })();
    Ok(Some(parsed))
}

/// Whether our error `ours` is the kind of the spec's `spec` error.
fn same_error_kind(spec: &str, ours: &str) -> bool {
    let (class, message) = spec.split_once(": ").unwrap_or((spec, ""));
    match class {
        "KeyError" => ours.starts_with("unknown ") && ours.contains(message.trim_matches('\'')),
        "PerfDataNotAvailableError" => ours.contains("perf data not available") || ours.contains("no data for"),
        _ => ours.contains(message.trim_end()),
    }
}

/// What one golden file's run found.
struct Report {
    gaps: usize,
    priced: usize,
    not_priced: BTreeMap<String, usize>,
}

/// Runs every point of `file`; returns how many our path refuses with an
/// error containing `gap` (a known gap, not a failure).
fn run_goldens(file: &str, at_least: usize, gap: Option<&str>) -> usize {
    run_goldens_with(file, at_least, gap, false).gaps
}

/// [`run_goldens`]; with `strict_errors`, an error point must fail with an
/// error of the spec's kind ([`same_error_kind`]).
fn run_goldens_with(file: &str, at_least: usize, gap: Option<&str>, strict_errors: bool) -> Report {
    let dir = data_dir();
    let tree = DataTree::open(&[&dir]).unwrap_or_else(|e| {
        panic!("perf data not found in {} ({e}); run `cargo run -- data fetch` first", dir.display())
    });
    let all = points(&goldens_dir().join(file));
    assert!(all.len() >= at_least, "expected the goldens of {file}, found {} points", all.len());
    let mut servers: BTreeMap<(String, String, String), Server> = BTreeMap::new();
    let (mut priced, mut not_priced) = (0, BTreeMap::<String, usize>::new());
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    let (mut agg_ok, mut disagg_ok, mut errors_ok, mut gaps) = (0, 0, 0, 0);
    for p in &all {
        let id = format!("{} {} {} {} {:?}", p.id, p.mode, p.model, p.db, p.args);
        let overrides = match quant_overrides(&p.args) {
            Err(option) => {
                *not_priced.entry(option).or_default() += 1;
                continue;
            }
            Ok(None) => QuantOverrides::default(),
            Ok(Some(Ok(overrides))) => overrides,
            Ok(Some(Err(unknown))) => {
                match &p.error {
                    Some(spec) if same_error_kind(spec, &unknown) => errors_ok += 1,
                    _ => failures.push(format!("{id}: ours refuses the arguments ({unknown}), the spec {:?}", p.error)),
                }
                priced += 1;
                continue;
            }
        };
        priced += 1;
        // MTP: a malformed depth is refused before anything is built, as
        // the spec validates it first; the acceptance when the server is.
        let nextn = match p.args.get("nextn") {
            None => NextN::Off,
            Some(Value::String(text)) => NextN::parse(text).unwrap_or_else(|e| panic!("{id}: {e}")),
            Some(v) => match NextN::from_number(v.as_f64().unwrap_or(f64::NAN), &v.to_string()) {
                Ok(n) => n,
                Err(e) => {
                    match &p.error {
                        Some(spec) if same_error_kind(spec, &e) => errors_ok += 1,
                        _ => failures.push(format!("{id}: ours refuses nextn ({e}), the spec {:?}", p.error)),
                    }
                    continue;
                }
            },
        };
        let accepted = p.args.get("nextn_accepted").and_then(Value::as_f64);
        let images = Images {
            height: arg(&p.args, "image_height").unwrap_or(0),
            width: arg(&p.args, "image_width").unwrap_or(0),
            count: arg(&p.args, "num_images").unwrap_or(1),
            encoder_dp: p.args.get("enable_encoder_dp").and_then(Value::as_bool).unwrap_or(true),
        };
        let key = (p.model.clone(), p.db.clone(), format!("{overrides:?} {nextn:?} {accepted:?} {images:?}"));
        if !servers.contains_key(&key) {
            let parts: Vec<&str> = p.db.split('/').collect();
            let [system, backend, version] = parts[..] else { panic!("db {}", p.db) };
            let server = Server::new(&tree, &p.model, system, backend, version, true)
                .and_then(|s| s.with_quant_overrides(overrides))
                .and_then(|s| s.with_images(images))
                .unwrap_or_else(|e| panic!("{} on {}: {e}", p.model, p.db));
            match server.with_mtp(nextn, accepted) {
                Ok(server) => {
                    servers.insert(key.clone(), server);
                }
                Err(e) => {
                    let e = e.to_string();
                    match &p.error {
                        Some(spec) if same_error_kind(spec, &e) => errors_ok += 1,
                        _ => failures.push(format!("{id}: ours refuses the MTP options ({e}), the spec {:?}", p.error)),
                    }
                    continue;
                }
            }
        }
        let Some(server) = servers.get_mut(&key) else { unreachable!() };
        let a = &p.args;
        let result: Result<(BTreeMap<String, Field>, Option<String>), String> = match p.mode.as_str() {
            "agg" => {
                let q = AggQuery {
                    parallel: parallel(a, None),
                    batch: need(a, "batch_size"),
                    isl: need(a, "isl"),
                    osl: need(a, "osl"),
                    prefix: arg(a, "prefix").unwrap_or(0),
                    ctx_tokens: arg(a, "ctx_tokens"),
                    kv_sizing: KvSizing {
                        max_seq_len: arg(a, "max_seq_len"),
                        free_gpu_memory_fraction: a.get("free_gpu_memory_fraction").and_then(Value::as_f64),
                    },
                };
                server.estimate_agg(&q).map_err(|e| e.to_string()).map(|e| {
                    let fields = agg_fields(&e, server).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                    (fields, e.warning)
                })
            }
            "disagg" => {
                let side = |s: &str| parallel(a, Some(s));
                let q = DisaggQuery {
                    prefill: side("prefill"),
                    prefill_batch: need(a, "prefill_batch_size"),
                    prefill_workers: need(a, "prefill_num_workers"),
                    decode: side("decode"),
                    decode_batch: need(a, "decode_batch_size"),
                    decode_workers: need(a, "decode_num_workers"),
                    isl: need(a, "isl"),
                    osl: need(a, "osl"),
                    prefix: arg(a, "prefix").unwrap_or(0),
                };
                server.estimate_disagg(&q).map_err(|e| e.to_string()).map(|e| (disagg_fields(&e, server), None))
            }
            other => panic!("mode {other}"),
        };
        match (&p.error, result) {
            (None, Err(e)) if gap.is_some_and(|g| e.contains(g)) => gaps += 1,
            (Some(spec), Err(e)) if strict_errors && !same_error_kind(spec, &e) => {
                failures.push(format!("{id}: the spec fails with {spec}, ours with {e}"))
            }
            (Some(_), Err(_)) => errors_ok += 1,
            (Some(spec), Ok(_)) => failures.push(format!("{id}: the spec fails ({spec}), ours prices it")),
            (None, Err(e)) => failures.push(format!("{id}: ours fails: {e}")),
            (None, Ok((fields, warning))) => {
                let Some(raw) = &p.raw else { panic!("{id}: no raw and no error") };
                let before = failures.len();
                compare(raw, &fields, &mut counts, &mut failures, &id);
                if warning != p.warning {
                    failures.push(format!("{id}: warning spec {:?}, ours {warning:?}", p.warning));
                }
                if failures.len() == before {
                    if p.mode == "agg" { agg_ok += 1 } else { disagg_ok += 1 }
                }
            }
        }
    }
    println!(
        "{file}: {agg_ok} agg and {disagg_ok} disagg points equal on every field, {errors_ok} error points fail on ours too"
    );
    for (field, (equal, differ)) in &counts {
        println!("  {field}: {equal} equal, {differ} differ");
    }
    for f in failures.iter().take(400) {
        println!("FAIL {f}");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
    if gaps > 0 {
        println!("{file}: {gaps} points refused as not priced yet");
    }
    if !not_priced.is_empty() {
        println!("{file}: {priced} points priced; not priced yet, by option: {not_priced:?}");
    }
    Report { gaps, priced, not_priced }
}
