//! What the fuzz draws from: the mounted databases, quants, models and
//! settings, read once through SQL (`aic.meta.*`, `aic.perf.gemm`), and the
//! strange values every text and integer argument is also tried with.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::prelude::SessionContext;

use aicsql::{DataTree, SessionBuilder};

use crate::harness::{Outcome, Rng, Settings, run_sql, runtime};

/// The spec's GEMM quant modes (README: `quant` of `gemm_latency`).
pub const QUANTS: [&str; 8] = ["bfloat16", "fp8", "fp8_static", "fp8_block", "nvfp4", "int8_wo", "int4_wo", "sq"];

/// Largest GEMM dimension accepted (2^40, the functions' documented domain).
pub const MAX_DIM: i64 = 1 << 40;

/// A model of `aic.meta.models`.
#[derive(Debug, Clone)]
pub struct Model {
    pub name: String,
    pub family: Option<String>,
    pub heads: i64,
    pub moe: bool,
    /// What the spec's MoE builders refuse: moe_ep above `experts`, and
    /// fp8_block experts whose per-GPU width (`moe_inter / moe_tp`) is not
    /// a multiple of the 128 block.
    pub experts: i64,
    pub moe_inter: i64,
    pub fp8_block: bool,
}

/// Everything the generators draw from.
pub struct World {
    /// (system, backend, version) of every database with a GEMM table.
    pub all_gemm_dbs: Vec<(String, String, String)>,
    /// The databases calls are drawn from: all of them, or (the default,
    /// cold table loads are what a debug build spends its time on) a subset
    /// chosen by the seed that always holds the probe and golden databases;
    /// `AICSQL_FUZZ_DATABASES` = a count or `all`.
    pub gemm_dbs: Vec<(String, String, String)>,
    /// Every system, backend and version name in the tree.
    pub systems: Vec<String>,
    pub backends: Vec<String>,
    pub versions: Vec<String>,
    /// GEMM dtypes present per database (hits are likelier with these).
    pub dtypes: BTreeMap<String, Vec<String>>,
    pub models: Vec<Model>,
    /// Step configurations that were accepted by a probe, per (model, backend):
    /// only those are generated as valid step calls.
    pub step_ok: BTreeSet<(String, String)>,
    /// Why a (model, backend) probe was refused (reported, and used for invalid calls).
    pub step_refused: BTreeMap<(String, String), String>,
}

impl World {
    pub fn db_name(&self, i: usize) -> String {
        let (s, b, v) = &self.gemm_dbs[i];
        format!("{s}/{b}/{v}")
    }

    /// Whether `system/backend/version` has a GEMM table of its own.
    pub fn has_gemm(&self, system: &str, backend: &str, version: &str) -> bool {
        self.all_gemm_dbs.iter().any(|(s, b, v)| s == system && b == backend && v == version)
    }

    pub fn has_backend(&self, system: &str, backend: &str) -> bool {
        self.all_gemm_dbs.iter().any(|(s, b, _)| s == system && b == backend)
    }

    /// A database argument that is valid under `settings`, with its full name:
    /// mostly a full name, sometimes a prefix completed by `aic.backend` /
    /// `aic.version` when those make it resolve unambiguously.
    pub fn valid_db(&self, rng: &mut Rng, settings: &Settings) -> (String, String) {
        let i = rng.below(self.gemm_dbs.len() as u64) as usize;
        let (s, b, v) = &self.gemm_dbs[i];
        let full = format!("{s}/{b}/{v}");
        if rng.one_in(4) {
            let version = settings.version.trim();
            let backend = settings.backend.trim();
            // 'system': backend and version from the settings.
            if !backend.is_empty() && rng.one_in(2) {
                let latest = version == "latest" && self.has_backend(s, backend);
                if latest || self.has_gemm(s, backend, version) {
                    let v = if latest { "latest".to_string() } else { version.to_string() };
                    return (s.clone(), format!("{s}/{backend}/{v}"));
                }
            }
            // 'system/backend': the version from the settings.
            if version == "latest" || self.has_gemm(s, b, version) {
                return (format!("{s}/{b}"), full);
            }
        }
        (full.clone(), full)
    }

    /// A quant for `db`: mostly one its GEMM table holds, else any of the spec's modes.
    pub fn quant_for(&self, rng: &mut Rng, full_db: &str) -> String {
        match self.dtypes.get(full_db) {
            Some(d) if !d.is_empty() && !rng.one_in(4) => {
                let q = rng.pick(d).clone();
                if QUANTS.contains(&q.as_str()) { q } else { rng.pick(&QUANTS).to_string() }
            }
            _ => rng.pick(&QUANTS).to_string(),
        }
    }

    /// Settings of a batch: every value of every setting, including a bogus
    /// version and backend (only prefixes of database names read them).
    pub fn settings(&self, rng: &mut Rng) -> Settings {
        let backend = match rng.below(6) {
            0 | 1 => String::new(),
            2 => " vllm ".to_string(),
            3 => "no-such-backend".to_string(),
            _ => rng.pick(&self.backends).clone(),
        };
        let version = match rng.below(6) {
            0..=2 => "latest".to_string(),
            3 => "99.bogus".to_string(),
            _ => rng.pick(&self.versions).clone(),
        };
        Settings {
            on_miss: rng.pick(&["null", "NULL", " Null "]).to_string(),
            shared_layer: rng.pick(&["true", "false", "on", "off", "1", "0", "TRUE"]).to_string(),
            backend,
            version,
        }
    }
}

/// Strange text: empty, whitespace, odd Unicode, control characters, SQL
/// metacharacters, very long.
pub fn weird_text(rng: &mut Rng) -> String {
    const WEIRD: [&str; 24] = [
        "",
        " ",
        "\t",
        "\n",
        "/",
        "//",
        "///",
        "a/b/c/d",
        "h200_sxm//0.19.0",
        "é",
        "ǅ",
        "\u{0}",
        "\u{200b}",
        "\u{feff}fp8",
        "\u{1F600}",
        "ｆｐ８",
        "𝔣𝔭8",
        "'",
        "''; DROP TABLE x; --",
        "%",
        "_",
        "\\",
        "NULL",
        "null",
    ];
    match rng.below(4) {
        0 => "x".repeat(1 + rng.below(5000) as usize),
        1 => {
            let n = 1 + rng.below(12) as usize;
            (0..n).map(|_| char::from_u32(rng.range(1, 0x10FFFF) as u32).unwrap_or('\u{FFFD}')).collect()
        }
        _ => rng.pick(&WEIRD).to_string(),
    }
}

/// A variant of a valid name that is not valid: padded, re-cased, truncated,
/// with a zero-width or homoglyph character.
pub fn near_miss(rng: &mut Rng, valid: &str) -> String {
    let upper = valid.to_uppercase();
    let out = match rng.below(7) {
        0 => format!(" {valid}"),
        1 => format!("{valid} "),
        2 if upper != valid => upper,
        3 => format!("{valid}\u{200b}"),
        4 if valid.len() > 1 => valid[..valid.len() - 1].to_string(),
        5 => valid.replace('a', "а"), // Cyrillic а
        _ => format!("{valid}x"),
    };
    if out == valid { format!("{valid}_") } else { out }
}

/// An integer from everywhere: small, powers of two and their neighbours,
/// the i64 extremes, log-uniform over the whole positive range.
pub fn wild_int(rng: &mut Rng) -> i64 {
    match rng.below(8) {
        0 => *rng.pick(&[i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1, -1, 0, 1, u32::MAX as i64, 1 << 32]),
        1 => {
            let p = rng.range(0, 62);
            (1i64 << p) + rng.range(-1, 1)
        }
        2 => -rng.log_range(1, i64::MAX),
        3 => rng.range(-10, 10),
        _ => rng.log_range(1, i64::MAX),
    }
}

fn strings(batches: &[datafusion::arrow::record_batch::RecordBatch], col: usize) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for b in batches {
        let c = datafusion::arrow::compute::cast(b.column(col), &datafusion::arrow::datatypes::DataType::Utf8)
            .expect("cast to text");
        let a = c.as_string::<i32>();
        out.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())));
    }
    out
}

fn ints(batches: &[datafusion::arrow::record_batch::RecordBatch], col: usize) -> Vec<Option<i64>> {
    let mut out = Vec::new();
    for b in batches {
        let c = datafusion::arrow::compute::cast(b.column(col), &datafusion::arrow::datatypes::DataType::Int64)
            .expect("cast to int");
        let a = c.as_primitive::<Int64Type>();
        out.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))));
    }
    out
}

pub fn rows(ctx: &SessionContext, sql: &str) -> Vec<datafusion::arrow::record_batch::RecordBatch> {
    match run_sql(&runtime(), ctx, sql) {
        Outcome::Rows(b) => b,
        other => panic!("{sql}: {}", other.describe()),
    }
}

/// One representative database per backend, for the step probes.
pub const PROBE_DBS: [&str; 3] = ["h200_sxm/vllm/0.19.0", "h200_sxm/sglang/0.5.10", "h200_sxm/trtllm/1.3.0rc10"];

impl World {
    fn load(tree: Arc<DataTree>) -> World {
        let ctx = SessionBuilder::with_tree(tree).build();
        let dbs = rows(
            &ctx,
            "SELECT DISTINCT system, backend, version FROM aic.meta.databases WHERE \"table\" = 'gemm' ORDER BY 1, 2, 3",
        );
        let (s, b, v) = (strings(&dbs, 0), strings(&dbs, 1), strings(&dbs, 2));
        let all_gemm_dbs: Vec<(String, String, String)> = (0..s.len())
            .map(|i| (s[i].clone().expect("system"), b[i].clone().expect("backend"), v[i].clone().expect("version")))
            .collect();
        let gemm_dbs = subset(&all_gemm_dbs);
        println!(
            "fuzz databases: {}",
            gemm_dbs.iter().map(|(s, b, v)| format!("{s}/{b}/{v}")).collect::<Vec<_>>().join(", ")
        );
        let all = rows(&ctx, "SELECT DISTINCT system, backend, version FROM aic.meta.databases");
        let uniq = |c: usize| -> Vec<String> {
            strings(&all, c).into_iter().flatten().collect::<BTreeSet<_>>().into_iter().collect()
        };
        let systems: BTreeSet<&String> = gemm_dbs.iter().map(|(s, _, _)| s).collect();
        let list = systems.iter().map(|s| crate::harness::quote(s)).collect::<Vec<_>>().join(", ");
        let dt = rows(
            &ctx,
            &format!(
                "SELECT DISTINCT system || '/' || backend || '/' || version, gemm_dtype FROM aic.perf.gemm \
                 WHERE system IN ({list}) ORDER BY 1, 2"
            ),
        );
        let mut dtypes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (db, q) in strings(&dt, 0).into_iter().zip(strings(&dt, 1)) {
            if let (Some(db), Some(q)) = (db, q) {
                dtypes.entry(db).or_default().push(q);
            }
        }
        let m = rows(
            &ctx,
            "SELECT model, family, num_attention_heads, num_experts, moe_intermediate_size, quant_method FROM aic.meta.models ORDER BY model",
        );
        let (names, families, heads, experts) = (strings(&m, 0), strings(&m, 1), ints(&m, 2), ints(&m, 3));
        let (moe_inters, quants) = (ints(&m, 4), strings(&m, 5));
        let models: Vec<Model> = (0..names.len())
            .map(|i| {
                let experts = experts[i].unwrap_or(0);
                // GEMMA4MIX is a MoE family even without experts: its dense
                // variants take MoE parallelism with moe_ep 1 only.
                let gemma = families[i].as_deref() == Some("GEMMA4MIX");
                Model {
                    name: names[i].clone().expect("model"),
                    family: families[i].clone(),
                    heads: heads[i].unwrap_or(0),
                    moe: experts > 0 || gemma,
                    experts: if gemma { experts.max(1) } else { experts },
                    moe_inter: moe_inters[i].unwrap_or(0),
                    fp8_block: quants[i].as_deref() == Some("fp8_block"),
                }
            })
            .collect();
        let mut world = World {
            all_gemm_dbs,
            gemm_dbs,
            systems: uniq(0),
            backends: uniq(1),
            versions: uniq(2),
            dtypes,
            models,
            step_ok: BTreeSet::new(),
            step_refused: BTreeMap::new(),
        };
        world.probe_steps(&ctx);
        world
    }

    /// Which (model, backend) pairs a step accepts: one context and one
    /// generation call at tp 1 (MoE: moe_tp = moe_ep = 1) on each backend's
    /// representative database. Every model is probed (a family the step
    /// does not build is refused by name); everything refused is listed.
    fn probe_steps(&mut self, ctx: &SessionContext) {
        let rt = runtime();
        for model in self.models.clone() {
            for db in PROBE_DBS {
                let backend = db.split('/').nth(1).expect("backend").to_string();
                let mut refused = None;
                for phase in ["context", "generation"] {
                    let sql = format!(
                        "SELECT step_latency({}, '{db}', '{phase}', 1, 1, 128, 2, 1, 1)",
                        crate::harness::quote(&model.name)
                    );
                    if let Outcome::Error(e) | Outcome::Panic(e) = run_sql(&rt, ctx, &sql) {
                        refused = Some(e);
                    }
                }
                match refused {
                    None => {
                        self.step_ok.insert((model.name.clone(), backend));
                    }
                    Some(e) => {
                        self.step_refused.insert((model.name.clone(), backend), e);
                    }
                }
            }
        }
    }
}

/// Databases always fuzzed: the probes', the goldens', the eight-thread test's.
const ALWAYS: [&str; 6] = [
    "h200_sxm/vllm/0.19.0",
    "gb200/vllm/0.19.0",
    "h200_sxm/sglang/0.5.10",
    "h200_sxm/trtllm/1.3.0rc10",
    "b200_sxm/trtllm/1.3.0rc10",
    "a100_sxm/trtllm/1.0.0",
];

fn subset(all: &[(String, String, String)]) -> Vec<(String, String, String)> {
    let wanted = std::env::var("AICSQL_FUZZ_DATABASES").unwrap_or_default();
    if wanted.trim().eq_ignore_ascii_case("all") {
        return all.to_vec();
    }
    let n: usize = wanted.trim().parse().unwrap_or(16);
    let mut rng = Rng::new(crate::harness::seed(0xdb5e_1ec7));
    let name = |d: &(String, String, String)| format!("{}/{}/{}", d.0, d.1, d.2);
    let mut out: Vec<(String, String, String)> =
        all.iter().filter(|d| ALWAYS.contains(&name(d).as_str())).cloned().collect();
    let mut rest: Vec<(String, String, String)> = all.iter().filter(|d| !out.contains(d)).cloned().collect();
    while out.len() < n && !rest.is_empty() {
        let i = rng.below(rest.len() as u64) as usize;
        out.push(rest.swap_remove(i));
    }
    out.sort();
    out
}

/// The world of the real data, loaded once per test binary.
pub fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let started = std::time::Instant::now();
        let w = World::load(crate::common::tree());
        println!("world loaded in {:.1} s", started.elapsed().as_secs_f64());
        w
    })
}
