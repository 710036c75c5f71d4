//! `SET aic.*` for a wall-clock budget: valid values (every spelling the
//! settings accept) and invalid ones (bogus, empty, odd Unicode, unknown
//! names). A valid SET shows in `information_schema.df_settings`, normalised;
//! a refused one names the setting and the value and changes nothing; and
//! after every SET the functions still answer what they answered before
//! (full database names do not read `aic.backend` / `aic.version`).

use std::collections::BTreeMap;
use std::time::Instant;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::prelude::SessionContext;

use aicsql::SessionBuilder;

use crate::harness::{self, Failures, Outcome, Rng, names, quote, run_sql, runtime};
use crate::world::{weird_text, world};

fn current(rt: &tokio::runtime::Runtime, ctx: &SessionContext) -> BTreeMap<String, Option<String>> {
    let Outcome::Rows(b) =
        run_sql(rt, ctx, "SELECT name, value FROM information_schema.df_settings WHERE name LIKE 'aic.%'")
    else {
        panic!("df_settings is not readable");
    };
    let mut out = BTreeMap::new();
    for batch in &b {
        let n = cast(batch.column(0), &DataType::Utf8).expect("text");
        let v = cast(batch.column(1), &DataType::Utf8).expect("text");
        let (n, v) = (n.as_string::<i32>(), v.as_string::<i32>());
        for i in 0..n.len() {
            out.insert(n.value(i).to_string(), v.is_valid(i).then(|| v.value(i).to_string()));
        }
    }
    out
}

/// What a valid value of `key` shows as, or `None` if the value is invalid.
fn normalised(key: &str, value: &str) -> Option<String> {
    let t = value.trim();
    let l = t.to_ascii_lowercase();
    match key {
        "backend" | "decode_system" => Some(t.to_string()),
        "version" => (!t.is_empty()).then(|| t.to_string()),
        "on_miss" => ["null", "error"].contains(&l.as_str()).then_some(l),
        "shared_layer" | "strict_sla" | "enable_chunked_prefill" => match l.as_str() {
            "true" | "on" | "1" => Some("true".into()),
            "false" | "off" | "0" => Some("false".into()),
            _ => None,
        },
        "top_n" => t.parse::<usize>().ok().filter(|n| (1..=1000).contains(n)).map(|n| n.to_string()),
        // A number of ms; '' or 0 and below: no target.
        "request_latency" if t.is_empty() => Some(String::new()),
        "request_latency" => {
            t.parse::<f64>().ok().filter(|v| v.is_finite()).map(|v| if v > 0.0 { v.to_string() } else { String::new() })
        }
        // The spec's mode names, exact (after trimming); empty: the checkpoint's.
        "gemm_quant" | "moe_quant" | "kvcache_quant" | "fmha_quant" | "comm_quant" => {
            (t.is_empty() || quant_names(key).contains(&t)).then(|| t.to_string())
        }
        "max_seq_len" if t.is_empty() => Some(String::new()),
        "max_seq_len" => t.parse::<i64>().ok().filter(|n| (1..=i64::from(u32::MAX)).contains(n)).map(|n| n.to_string()),
        "free_gpu_memory_fraction" if t.is_empty() => Some(String::new()),
        "free_gpu_memory_fraction" => t.parse::<f64>().ok().filter(|f| *f > 0.0 && *f <= 1.0).map(|f| f.to_string()),
        "nextn" if t.is_empty() => Some(String::new()),
        "nextn" if l == "auto" => Some("auto".into()),
        "nextn" => t
            .parse::<f64>()
            .ok()
            .filter(|n| n.fract() == 0.0 && (0.0..=64.0).contains(n))
            .map(|n| if n == 0.0 { String::new() } else { (n as u32).to_string() }),
        "nextn_accepted" if t.is_empty() => Some(String::new()),
        "nextn_accepted" => t.parse::<f64>().ok().filter(|a| a.is_finite() && *a >= 0.0).map(|a| a.to_string()),
        // Images: '' restores the default (no image, one image per request, encoder DP on).
        "image_height" | "image_width" if t.is_empty() => Some("0".into()),
        "num_images" if t.is_empty() => Some("1".into()),
        "image_height" | "image_width" => {
            t.parse::<i64>().ok().filter(|n| (0..=65536).contains(n)).map(|n| n.to_string())
        }
        "num_images" => t.parse::<i64>().ok().filter(|n| (0..=1024).contains(n)).map(|n| n.to_string()),
        "enable_encoder_dp" => match l.as_str() {
            "" | "true" | "on" | "1" => Some("true".into()),
            "false" | "off" | "0" => Some("false".into()),
            _ => None,
        },
        _ => None,
    }
}

/// The mode names a quant setting takes (the spec's enums).
fn quant_names(key: &str) -> &'static [&'static str] {
    match key {
        "gemm_quant" => &["bfloat16", "fp8", "fp8_static", "fp8_block", "nvfp4", "int8_wo", "int4_wo", "sq"],
        "moe_quant" => &[
            "bfloat16",
            "fp8",
            "int4_wo",
            "fp8_block",
            "w4afp8",
            "nvfp4",
            "w4a16_mxfp4",
            "w4a8_mxfp4_mxfp8",
            "w4a8_mxfp4_mxfp8_trtllm",
            "w4a16_mxfp4_cutlass",
        ],
        "kvcache_quant" => &["bfloat16", "fp8", "int8"],
        "fmha_quant" => &["bfloat16", "fp8"],
        _ => &["half", "int8", "fp8"],
    }
}

fn value_for(rng: &mut Rng, key: &str) -> String {
    let w = world();
    let valid: Vec<String> = match key {
        "backend" => w.backends.iter().cloned().chain(["".into(), " sglang ".into()]).collect(),
        "decode_system" => w.systems.iter().cloned().chain(["".into(), " h200_sxm ".into(), "nosuch".into()]).collect(),
        "version" => w.versions.iter().cloned().chain(["latest".into(), "LATEST".into(), " 0.19.0 ".into()]).collect(),
        "on_miss" => ["null", "error", "NULL", " Error ", "eRrOr"].map(String::from).to_vec(),
        "top_n" => ["1", "5", "10", " 3 ", "1000", "0", "1001", "-1", "2.5"].map(String::from).to_vec(),
        "gemm_quant" | "moe_quant" | "kvcache_quant" | "fmha_quant" | "comm_quant" => {
            quant_names(key).iter().map(|s| s.to_string()).chain(["".into(), " fp8 ".into(), "FP8".into()]).collect()
        }
        "max_seq_len" => ["", "1", "8192", " 16384 ", "0", "-3", "2.5", "4294967296"].map(String::from).to_vec(),
        "free_gpu_memory_fraction" => {
            ["", "0.9", "1", " 0.5 ", "1e-3", "0", "-0.1", "1.5", "NaN", "inf"].map(String::from).to_vec()
        }
        "nextn" => ["", "0", "1", " 3 ", "auto", "AUTO", "2.0", "1.5", "-1", "65", "two"].map(String::from).to_vec(),
        "nextn_accepted" => ["", "0", "0.8", "1.4", " 2 ", "-0.1", "NaN", "inf"].map(String::from).to_vec(),
        "image_height" | "image_width" => {
            ["", "0", "448", " 1024 ", "65536", "65537", "-1", "2.5", "big"].map(String::from).to_vec()
        }
        "num_images" => ["", "0", "1", " 4 ", "1024", "1025", "-1", "two"].map(String::from).to_vec(),
        "request_latency" => {
            ["", "0", "2000", " 1500.5 ", "1e4", "-5", "NaN", "inf", "soon"].map(String::from).to_vec()
        }
        "enable_encoder_dp" => ["", "true", "false", "off", "1", " On ", "yes"].map(String::from).to_vec(),
        _ => ["true", "false", "on", "off", "1", "0", "TRUE", " False ", "On"].map(String::from).to_vec(),
    };
    match rng.below(3) {
        0 => weird_text(rng),
        1 => {
            let v = rng.pick(&valid).clone();
            crate::world::near_miss(rng, &v)
        }
        _ => rng.pick(&valid).clone(),
    }
}

fn single_f64(rt: &tokio::runtime::Runtime, ctx: &SessionContext, sql: &str) -> Result<Option<f64>, String> {
    match run_sql(rt, ctx, sql) {
        Outcome::Rows(b) => {
            let c = cast(b[0].column(0), &DataType::Float64).map_err(|e| e.to_string())?;
            let a = c.as_primitive::<Float64Type>();
            Ok(a.is_valid(0).then(|| a.value(0)))
        }
        other => Err(other.describe()),
    }
}

const PROBES: [&str; 3] = [
    "SELECT gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', 32, 1280, 5120)",
    "SELECT step_latency('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'context', 8, 1, 1024, 128)",
    "SELECT latency_ms FROM engine_step('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 'generation', 8, 4, 512, 64) WHERE row_kind = 'step_total'",
];

fn fuzz_settings(seed: u64, budget: std::time::Duration) {
    let rt = runtime();
    let ctx = SessionBuilder::with_tree(crate::common::tree()).build();
    let mut rng = Rng::new(seed);
    let mut failures = Failures::default();
    // What the probes answer with the shared layer on and off (these are hits).
    let mut baseline: BTreeMap<(usize, bool), Option<u64>> = BTreeMap::new();
    for shared in [true, false] {
        let _ = run_sql(&rt, &ctx, &format!("SET aic.shared_layer = '{shared}'"));
        for (i, p) in PROBES.iter().enumerate() {
            let v = single_f64(&rt, &ctx, p).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert!(v.is_some(), "{p} should be a hit");
            baseline.insert((i, shared), v.map(f64::to_bits));
        }
    }
    let _ = run_sql(&rt, &ctx, "SET aic.shared_layer = 'true'");
    let keys = [
        "backend",
        "version",
        "on_miss",
        "shared_layer",
        "top_n",
        "strict_sla",
        "enable_chunked_prefill",
        "request_latency",
        "decode_system",
        "gemm_quant",
        "moe_quant",
        "kvcache_quant",
        "fmha_quant",
        "comm_quant",
        "max_seq_len",
        "free_gpu_memory_fraction",
        "nextn",
        "nextn_accepted",
        "image_height",
        "image_width",
        "num_images",
        "enable_encoder_dp",
    ];
    let unknown = ["bogus", "on_misses", "sharedlayer", "backends", "version2", "latest", "data"];
    let (mut sets, mut refused, mut probes) = (0usize, 0usize, 0usize);
    // The budget is for SETs: it starts once the probes' tables are loaded.
    let started = Instant::now();
    while (started.elapsed() < budget || sets < 50) && !failures.full() {
        let before = current(&rt, &ctx);
        if before.len() != keys.len() {
            failures.push("df_settings does not list every aic.* setting", "", format!("{before:?}"));
        }
        let known = !rng.one_in(8);
        let key = if known { rng.pick(&keys).to_string() } else { rng.pick(&unknown).to_string() };
        let value = value_for(&mut rng, if known { &key } else { "backend" });
        let sql = format!("SET aic.{key} = {}", quote(&value));
        let outcome = run_sql(&rt, &ctx, &sql);
        sets += 1;
        let expected = if known { normalised(&key, &value) } else { None };
        match (outcome, expected) {
            (Outcome::Panic(m), _) => failures.push("panic", sql.clone(), m),
            (Outcome::Rows(_), Some(shown)) => {
                let after = current(&rt, &ctx);
                if after.get(&format!("aic.{key}")) != Some(&Some(shown.clone())) {
                    failures.push(
                        "a SET does not show, normalised, in df_settings",
                        sql.clone(),
                        format!("{after:?}, expected {shown:?}"),
                    );
                }
            }
            (Outcome::Rows(_), None) => {
                failures.push("an invalid SET was accepted", sql.clone(), format!("{:?}", current(&rt, &ctx)))
            }
            (Outcome::Error(m), Some(_)) => failures.push("a valid SET was refused", sql.clone(), m),
            (Outcome::Error(m), None) => {
                refused += 1;
                let t = value.trim();
                let named_value = names(&m, &value) || names(&m, t) || names(&m, &t.to_ascii_lowercase());
                if !m.contains(&format!("aic.{key}")) {
                    failures.push("a refused SET does not name the setting", sql.clone(), m);
                } else if known && key != "version" && !named_value {
                    failures.push("a refused SET does not name the value", sql.clone(), m);
                }
                let after = current(&rt, &ctx);
                if after != before {
                    failures.push(
                        "a refused SET changed the settings",
                        sql.clone(),
                        format!("{before:?} -> {after:?}"),
                    );
                }
            }
        }
        // The probes: full database names answer as before, whatever backend / version / on_miss say.
        // A quant override or an MTP depth changes what a step prices (that is what it is for): under
        // one the step probes must answer without a panic, and the GEMM probe as before.
        let now = current(&rt, &ctx);
        let shared = now.get("aic.shared_layer").cloned().flatten().as_deref() != Some("false");
        // MTP's depth changes what a generation step prices, as a quant mode does.
        let quant_set = ["gemm_quant", "moe_quant", "kvcache_quant", "fmha_quant", "comm_quant", "nextn"]
            .iter()
            .any(|k| now.get(&format!("aic.{k}")).cloned().flatten().is_some_and(|v| !v.is_empty()));
        for (i, p) in PROBES.iter().enumerate() {
            probes += 1;
            if quant_set && i > 0 {
                if let Outcome::Panic(m) = run_sql(&rt, &ctx, p) {
                    failures.push("panic under a quant setting", format!("{p} [{now:?}]"), m);
                }
                continue;
            }
            match single_f64(&rt, &ctx, p) {
                Ok(v) if v.map(f64::to_bits) == baseline[&(i, shared)] => {}
                other => failures.push(
                    "a probe changed under settings that do not concern it",
                    format!("{p} [{now:?}] after {sql}"),
                    format!("{other:?}, expected {:?}", baseline[&(i, shared)].map(f64::from_bits)),
                ),
            }
        }
        // A prefix: 'h200_sxm' resolves iff aic.backend names one of its backends.
        let backend = now.get("aic.backend").cloned().flatten().unwrap_or_default();
        let version = now.get("aic.version").cloned().flatten().unwrap_or_default();
        let sql = "SELECT gemm_latency('h200_sxm', 'fp8_block', 32, 1280, 5120)";
        let got = single_f64(&rt, &ctx, sql);
        probes += 1;
        let resolvable = world().has_backend("h200_sxm", &backend)
            && (version == "latest" || world().has_gemm("h200_sxm", &backend, &version));
        match got {
            Ok(v) if resolvable => {
                if version != "latest" {
                    let full =
                        format!("SELECT gemm_latency('h200_sxm/{backend}/{version}', 'fp8_block', 32, 1280, 5120)");
                    let want = single_f64(&rt, &ctx, &full);
                    if want.as_ref().map(|w| w.map(f64::to_bits)) != Ok(v.map(f64::to_bits)) {
                        failures.push(
                            "a completed prefix differs from the full name",
                            format!("{sql} [{now:?}]"),
                            format!("{v:?} vs {want:?}"),
                        );
                    }
                }
            }
            Err(m) if !resolvable && !backend.is_empty() && world().has_backend("h200_sxm", &backend) => {
                // A version the backend lacks: named, or served by reuse.yaml (then no error).
                if !m.contains("gemm_latency") || !names(&m, &version) {
                    failures.push("an unresolvable aic.version is not named", format!("{sql} [{now:?}]"), m);
                }
            }
            Err(m) if !resolvable => {
                if !m.contains("gemm_latency") || !m.contains("h200_sxm") {
                    failures.push("an unresolvable prefix is not named", format!("{sql} [{now:?}]"), m);
                }
            }
            // A version the backend holds no file of may still declare the table (reuse.yaml).
            Ok(v) if world().has_backend("h200_sxm", &backend) => {
                if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                    failures.push("a reused version gives nonsense", format!("{sql} [{now:?}]"), format!("{v:?}"));
                }
            }
            // The newest version may have its GEMMs only in the shared layer:
            // with the layer off that is a miss, an error under on_miss='error'.
            Err(m) if resolvable && !shared && version == "latest" => {
                if !m.contains("gemm_latency") || !m.contains("no GEMM") || !m.contains("h200_sxm") {
                    failures.push("a shared-only newest version is not named", format!("{sql} [{now:?}]"), m);
                }
            }
            Ok(v) => failures.push("a prefix resolved that cannot", format!("{sql} [{now:?}]"), format!("{v:?}")),
            Err(m) => failures.push("a resolvable prefix failed", format!("{sql} [{now:?}]"), m),
        }
    }
    println!(
        "fuzz settings: {sets} SETs ({refused} refused) and {probes} probe calls in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    failures.assert_none("fuzz settings");
}

#[test]
fn fuzz_settings_and_their_effect() {
    fuzz_settings(harness::seed(0x5e77_0001), harness::budget(30.0));
}

#[test]
#[ignore = "long fuzz: cargo test --test robustness -- --ignored"]
fn fuzz_settings_long() {
    fuzz_settings(harness::seed(0x5e77_0002), harness::budget(300.0));
}
