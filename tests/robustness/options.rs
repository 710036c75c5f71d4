//! The options argument of the estimating functions, fuzzed through SQL for
//! a wall-clock budget: random STRUCTs of valid and invalid fields, valid,
//! out-of-range, wrongly typed and NULL values, and combinations the spec
//! refuses (an fp8 FMHA without data, an fp8_block MoE split), on every
//! function that takes them. No call may panic; a malformed option is an
//! error naming the option; a well-formed one answers (a refusal or a miss
//! is NULL with its reason), and no latency or memory is NaN or negative.

use std::time::Instant;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};

use aicsql::SessionBuilder;

use crate::harness::{self, Failures, Outcome, Rng, run_sql, runtime};

/// A field value and whether it is well-formed for its field.
struct Value {
    sql: String,
    valid: bool,
}

fn text(s: &str, valid: bool) -> Value {
    Value { sql: format!("'{}'", s.replace('\'', "''")), valid }
}

fn raw(s: &str, valid: bool) -> Value {
    Value { sql: s.to_string(), valid }
}

const QUANTS: [&str; 12] = [
    "bfloat16",
    "fp8",
    "fp8_block",
    "nvfp4",
    "int8",
    "int4_wo",
    "w4afp8",
    "half",
    "fp8_static",
    "sq",
    "int8_wo",
    "fp8_ootb",
];
const BAD_QUANTS: [&str; 5] = ["FP8", "fp4", "", " fp8", "x'y"];

/// Which names each quant field accepts (the spec's enums, GEMM's
/// `fp8_ootb` and FMHA's `fp8_block` included: names no table has).
fn accepts(field: &str, name: &str) -> bool {
    match field {
        "gemm_quant" => ["bfloat16", "fp8", "fp8_static", "fp8_block", "nvfp4", "int8_wo", "int4_wo", "sq", "fp8_ootb"]
            .contains(&name),
        "moe_quant" => ["bfloat16", "fp8", "int4_wo", "fp8_block", "w4afp8", "nvfp4"].contains(&name),
        "kvcache_quant" => ["bfloat16", "fp8", "int8"].contains(&name),
        "fmha_quant" => ["bfloat16", "fp8", "fp8_block"].contains(&name),
        _ => ["half", "int8", "fp8"].contains(&name),
    }
}

fn value(rng: &mut Rng, field: &str) -> Value {
    match field {
        "free_gpu_memory_fraction" => match rng.below(9) {
            0 => raw("0.5", true),
            1 => raw("1.0", true),
            2 => raw("0.02", true),
            3 => raw("0.0", false),
            4 => raw("-0.5", false),
            5 => raw("1.5", false),
            6 => raw("CAST('NaN' AS DOUBLE)", false),
            7 => raw("CAST(NULL AS DOUBLE)", true),
            _ => text("half", false),
        },
        "image_height" | "image_width" => match rng.below(9) {
            0 | 1 => raw("CAST(448 AS BIGINT)", true),
            2 => raw("CAST(1024 AS BIGINT)", true),
            3 => raw("CAST(10 AS BIGINT)", true),
            4 => raw("CAST(0 AS BIGINT)", true),
            5 => raw("CAST(-1 AS BIGINT)", false),
            6 => raw("CAST(65537 AS BIGINT)", false),
            7 => raw("2.5", false),
            _ => raw("CAST(NULL AS BIGINT)", true),
        },
        "num_images" => match rng.below(7) {
            0 | 1 => raw("CAST(1 AS BIGINT)", true),
            2 => raw("CAST(4 AS BIGINT)", true),
            3 => raw("CAST(0 AS BIGINT)", true),
            4 => raw("CAST(-2 AS BIGINT)", false),
            5 => raw("CAST(1025 AS BIGINT)", false),
            _ => raw("CAST(NULL AS BIGINT)", true),
        },
        "enable_encoder_dp" => match rng.below(5) {
            0 => raw("true", true),
            1 => raw("false", true),
            2 => raw("CAST(NULL AS BOOLEAN)", true),
            3 => raw("1", false),
            _ => text("true", false),
        },
        "max_seq_len" => match rng.below(8) {
            0 => raw("CAST(16384 AS BIGINT)", true),
            1 => raw("CAST(1 AS BIGINT)", true),
            2 => raw("CAST(131072 AS BIGINT)", true),
            3 => raw("CAST(0 AS BIGINT)", false),
            4 => raw("CAST(-7 AS BIGINT)", false),
            5 => raw("CAST(4294967296 AS BIGINT)", false),
            6 => raw("2.5", false),
            _ => raw("CAST(NULL AS BIGINT)", true),
        },
        _ => match rng.below(10) {
            0..=5 => {
                let name = *rng.pick(&QUANTS);
                text(name, accepts(field, name))
            }
            6 | 7 => {
                // '' leaves the mode unset (the spec reads an empty name as none given).
                let name = *rng.pick(&BAD_QUANTS);
                text(name, name.is_empty())
            }
            8 => raw("CAST(NULL AS VARCHAR)", true),
            _ => raw("5", false),
        },
    }
}

const FIELDS: [&str; 13] = [
    "gemm_quant",
    "moe_quant",
    "kvcache_quant",
    "fmha_quant",
    "comm_quant",
    "free_gpu_memory_fraction",
    "max_seq_len",
    "nextn",
    "nextn_accepted",
    "image_height",
    "image_width",
    "num_images",
    "enable_encoder_dp",
];
/// The options only the estimates take (the step functions refuse them).
const IMAGE_FIELDS: [&str; 4] = ["image_height", "image_width", "num_images", "enable_encoder_dp"];
const BAD_FIELDS: [&str; 3] = ["kv_quant", "next_n", "GEMM_QUANT"];

/// An MTP depth as the fuzz wrote it: its draft tokens, the checkpoint's
/// (`'auto'`), or malformed.
#[derive(Clone, Copy, PartialEq)]
enum Depth {
    Tokens(u32),
    Auto,
    Malformed,
}

fn depth(rng: &mut Rng) -> (Value, Depth) {
    match rng.below(10) {
        0 => (raw("0", true), Depth::Tokens(0)),
        1 | 2 => (raw("1", true), Depth::Tokens(1)),
        3 => (raw("CAST(3 AS BIGINT)", true), Depth::Tokens(3)),
        4 => (text("auto", true), Depth::Auto),
        5 => (raw("2.0", true), Depth::Tokens(2)),
        6 => (raw("1.5", false), Depth::Malformed),
        7 => (raw("-1", false), Depth::Malformed),
        8 => (text("two", false), Depth::Malformed),
        _ => (raw("65", false), Depth::Malformed),
    }
}

fn acceptance(rng: &mut Rng) -> (Value, Option<f64>) {
    let (sql, a) = match rng.below(8) {
        0 => ("0.0", 0.0),
        1 => ("0.5", 0.5),
        2 => ("1.0", 1.0),
        3 => ("2.5", 2.5),
        4 => ("-0.1", -0.1),
        5 => ("CAST('NaN' AS DOUBLE)", f64::NAN),
        6 => ("3.0", 3.0),
        _ => return (raw("CAST(NULL AS DOUBLE)", true), None),
    };
    (raw(sql, true), Some(a))
}

/// Whether a call's MTP fields are well-formed (docs/spec/options.md 2.2):
/// the depth resolved on the call's model (`'auto'`: DeepSeek-V3 ships one
/// MTP layer, the Qwen3 checkpoints none); a depth above 0 needs an
/// acceptance within `[0, depth]` in the estimates, and the step functions
/// take no acceptance at all.
fn mtp_well_formed(function: &str, depth: Option<Depth>, accepted: Option<Option<f64>>) -> bool {
    let estimates = function.starts_with("estimate_");
    if !estimates && accepted.is_some() {
        return false;
    }
    let model_layers = if function == "step_latency" { 1 } else { 0 };
    let n = match depth {
        None => 0,
        Some(Depth::Malformed) => return false,
        Some(Depth::Auto) => model_layers,
        Some(Depth::Tokens(n)) => n,
    };
    if n == 0 || !estimates {
        return true;
    }
    matches!(accepted.flatten(), Some(a) if a.is_finite() && (0.0..=f64::from(n)).contains(&a))
}

/// `(function, call with OPTIONS in place of the struct, the f64 results to check)`.
const CALLS: [(&str, &str, &[&str]); 7] = [
    (
        "estimate_agg",
        "estimate_agg('Qwen/Qwen3-VL-8B-Instruct', 'h200_sxm/sglang/0.5.14', 2, 8, 1024, 128, OPTIONS)",
        &["ttft_ms", "tpot_ms", "memory_gib", "encoder_latency_ms", "encoder_memory_gib"],
    ),
    (
        "estimate_disagg",
        "estimate_disagg('Qwen/Qwen3-VL-8B-Instruct', 'h200_sxm/trtllm/1.3.0rc20', 2, 1, 1, 2, 16, 1, 1024, 128, OPTIONS)",
        &["ttft_ms", "tpot_ms", "encoder_latency_ms", "encoder_memory_gib"],
    ),
    (
        "estimate_agg",
        "estimate_agg('Qwen/Qwen3-30B-A3B', 'h200_sxm/trtllm/1.3.0rc10', 4, 16, 1024, 128, 0, NULL, 1, 4, OPTIONS)",
        &["ttft_ms", "tpot_ms", "memory_gib", "tokens_per_s_per_gpu"],
    ),
    (
        "estimate_memory",
        "estimate_memory('Qwen/Qwen3-32B-FP8', 'h200_sxm/vllm/0.19.0', 8, 64, 1024, 256, OPTIONS)",
        &["total_gib", "kvcache_gib"],
    ),
    (
        "estimate_disagg",
        "estimate_disagg('Qwen/Qwen3-32B', 'gb200/sglang/0.5.14', 2, 1, 2, 8, 16, 1, 1024, 128, OPTIONS)",
        &["ttft_ms", "tpot_ms", "tokens_per_s_per_gpu"],
    ),
    (
        "step_latency",
        "step_latency('deepseek-ai/DeepSeek-V3', 'h200_sxm/sglang/0.5.14', 'context', 8, 4, 1024, 128, 1, 8, OPTIONS)",
        &[],
    ),
    (
        "step_status",
        "step_status('Qwen/Qwen3-30B-A3B', 'h200_sxm/vllm/0.19.0', 'generation', 4, 8, 1024, 128, OPTIONS)",
        &[],
    ),
];

/// The f64 columns of a one-row result: none NaN, infinite or negative.
fn check_numbers(batches: &[datafusion::arrow::array::RecordBatch]) -> Result<(), String> {
    for batch in batches {
        for column in batch.columns() {
            if !column.data_type().is_numeric() {
                continue;
            }
            let c = cast(column, &DataType::Float64).map_err(|e| e.to_string())?;
            let a = c.as_primitive::<Float64Type>();
            for i in 0..a.len() {
                if a.is_valid(i) && !(a.value(i).is_finite() && a.value(i) >= 0.0) {
                    return Err(format!("value {}", a.value(i)));
                }
            }
        }
    }
    Ok(())
}

fn fuzz_options(seed: u64, budget: std::time::Duration) {
    let rt = runtime();
    let ctx = SessionBuilder::with_tree(crate::common::tree()).build();
    let mut rng = Rng::new(seed);
    let mut failures = Failures::default();
    let (mut calls, mut answered, mut refused) = (0usize, 0usize, 0usize);
    let started = Instant::now();
    while (started.elapsed() < budget || calls < 200) && !failures.full() {
        let (function, template, fields) = rng.pick(&CALLS);
        let mut names: Vec<&str> = Vec::new();
        let mut parts = Vec::new();
        let mut valid = true;
        let (mut depth_given, mut accepted_given) = (None, None);
        for _ in 0..1 + rng.below(4) {
            let bad = rng.one_in(12);
            let field = if bad { *rng.pick(&BAD_FIELDS) } else { *rng.pick(&FIELDS) };
            if names.contains(&field) {
                continue;
            }
            names.push(field);
            let v = match field {
                "nextn" => {
                    let (v, d) = depth(&mut rng);
                    depth_given = Some(d);
                    v
                }
                "nextn_accepted" => {
                    let (v, a) = acceptance(&mut rng);
                    accepted_given = Some(a);
                    v
                }
                _ => value(&mut rng, field),
            };
            valid &= !bad && v.valid && (function.starts_with("estimate_") || !IMAGE_FIELDS.contains(&field));
            parts.push(format!("'{field}', {}", v.sql));
        }
        valid &= mtp_well_formed(function, depth_given, accepted_given);
        let options = format!("named_struct({})", parts.join(", "));
        let call = template.replace("OPTIONS", &options);
        let sql = if fields.is_empty() {
            format!("SELECT {call} AS v")
        } else {
            let cols: Vec<String> = fields.iter().map(|f| format!("e['{f}'] AS {f}")).collect();
            format!("SELECT {}, e['reason'] AS reason FROM (SELECT {call} AS e)", cols.join(", "))
        };
        calls += 1;
        match run_sql(&rt, &ctx, &sql) {
            Outcome::Panic(m) => failures.push("panic", sql.clone(), m),
            Outcome::Rows(b) if valid => {
                answered += 1;
                if let Err(e) = check_numbers(&b) {
                    failures.push("a NaN, infinite or negative estimate", sql.clone(), e);
                }
            }
            Outcome::Rows(_) => failures.push("a malformed option was accepted", sql.clone(), String::new()),
            Outcome::Error(m) if valid => failures.push("a well-formed option failed", sql.clone(), m),
            Outcome::Error(m) => {
                refused += 1;
                if !m.contains(function) || !(m.contains("option") || m.contains("named_struct")) {
                    failures.push("a refusal names neither the function nor the option", sql.clone(), m);
                }
            }
        }
    }
    println!(
        "fuzz options: {calls} calls ({answered} answered, {refused} refused as malformed) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    failures.assert_none("fuzz options");
}

#[test]
fn fuzz_the_options_of_every_estimating_function() {
    fuzz_options(harness::seed(0x0971_0001), harness::budget(20.0));
}

#[test]
#[ignore = "long fuzz: cargo test --test robustness -- --ignored"]
fn fuzz_options_long() {
    fuzz_options(harness::seed(0x0971_0002), harness::budget(300.0));
}
