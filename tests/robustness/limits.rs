//! The documented per-call limits of the step functions: batch <= 65,536,
//! isl <= 2^24, osl <= 2^20, batch * isl <= 2^32 tokens, tp / moe_tp /
//! moe_ep <= 4,096. Beyond a limit: an error naming the function, the
//! argument and the limit. At a limit: the call finishes (a hang guard, not
//! a timing assertion) and is not the limit error (it may be another error,
//! such as heads not divisible by tp, or a miss).

use std::time::Duration;

use aicsql::SessionBuilder;

use crate::harness::{Outcome, run_sql, runtime, within};

const DENSE: &str = "Qwen/Qwen3-32B-FP8";
const MOE: &str = "Qwen/Qwen3-30B-A3B";
const DB: &str = "h200_sxm/vllm/0.19.0";

/// One step call.
#[derive(Debug, Clone, Copy)]
pub struct StepArgs {
    pub model: &'static str,
    pub phase: &'static str,
    pub tp: i64,
    pub batch: i64,
    pub isl: i64,
    pub osl: i64,
    pub moe: Option<(Option<i64>, Option<i64>)>,
}

impl StepArgs {
    pub fn sql_args(&self) -> String {
        let mut s = format!(
            "'{}', '{DB}', '{}', {}, {}, {}, {}",
            self.model, self.phase, self.tp, self.batch, self.isl, self.osl
        );
        if let Some((a, b)) = self.moe {
            let v = |x: Option<i64>| x.map_or("NULL".to_string(), |x| x.to_string());
            s += &format!(", {}, {}", v(a), v(b));
        }
        s
    }
}

fn base(phase: &'static str) -> StepArgs {
    StepArgs { model: DENSE, phase, tp: 8, batch: 1, isl: 1, osl: 2, moe: None }
}

/// The limit as a message may write it.
fn renderings(limit: i64, power: Option<u32>) -> Vec<String> {
    let mut out = vec![limit.to_string(), with_commas(limit), with_commas(limit).replace(',', "_")];
    if let Some(p) = power {
        out.push(format!("2^{p}"));
        out.push(format!("2**{p}"));
    }
    out
}

fn with_commas(v: i64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether `message` is the limit error of `arg` (names the argument and
/// the limit, and says it is a limit).
fn is_limit_error(message: &str, arg: &[&str], limit: &[String]) -> bool {
    let lower = message.to_lowercase();
    arg.iter().all(|a| message.contains(a))
        && limit.iter().any(|l| message.contains(l.as_str()))
        && ["limit", "at most", "exceed", "maximum", "too large", "<="].iter().any(|w| lower.contains(w))
}

pub enum Function {
    StepLatency,
    EngineStep,
}

impl Function {
    fn name(&self) -> &'static str {
        match self {
            Function::StepLatency => "step_latency",
            Function::EngineStep => "engine_step",
        }
    }

    pub fn sql(&self, a: &StepArgs) -> String {
        match self {
            Function::StepLatency => format!("SELECT step_latency({})", a.sql_args()),
            Function::EngineStep => {
                format!("SELECT count(*) FROM engine_step({})", a.sql_args())
            }
        }
    }
}

fn run(f: &Function, a: &StepArgs) -> Outcome {
    let sql = f.sql(a);
    let what = sql.to_string();
    within(Duration::from_secs(180), &what, move || {
        let ctx = SessionBuilder::with_tree(crate::common::tree()).build();
        run_sql(&runtime(), &ctx, &sql)
    })
}

/// The call beyond the limit must be the limit error; the call at it must not.
pub fn check_limit(f: Function, arg: &[&str], limit: i64, power: Option<u32>, at: StepArgs, beyond: StepArgs) {
    let name = f.name();
    let limit_text = renderings(limit, power);
    let mut problems = Vec::new();
    match run(&f, &beyond) {
        Outcome::Error(m) => {
            if !m.contains(name) {
                problems.push(format!("beyond the limit: the error does not name {name}: {m}"));
            }
            if !arg.iter().all(|a| m.contains(a)) {
                problems.push(format!("beyond the limit: the error does not name {arg:?}: {m}"));
            }
            if !limit_text.iter().any(|l| m.contains(l.as_str())) {
                problems.push(format!("beyond the limit: the error does not name the limit {limit}: {m}"));
            }
        }
        other => problems.push(format!("beyond the limit: no error ({}) for {}", other.describe(), f.sql(&beyond))),
    }
    match run(&f, &at) {
        Outcome::Panic(m) => problems.push(format!("at the limit: PANIC {m}")),
        Outcome::Error(m) if is_limit_error(&m, arg, &limit_text) => {
            problems.push(format!("at the limit: refused as beyond it: {m}"))
        }
        Outcome::Error(m) => println!("{}: at the limit, another error (allowed): {m}", f.sql(&at)),
        Outcome::Rows(_) => println!("{}: at the limit, answered", f.sql(&at)),
    }
    assert!(problems.is_empty(), "{name} {arg:?} <= {limit}:\n  {}", problems.join("\n  "));
}

macro_rules! limit_tests {
    ($($test:ident: $arg:expr, $limit:expr, $power:expr, $at:expr, $beyond:expr;)*) => {
        mod step_latency {
            use super::*;
            $(#[test] fn $test() { check_limit(Function::StepLatency, $arg, $limit, $power, $at, $beyond); })*
        }
        mod engine_step {
            use super::*;
            $(#[test] fn $test() { check_limit(Function::EngineStep, $arg, $limit, $power, $at, $beyond); })*
        }
    };
}

const B: i64 = 65_536;
const I: i64 = 1 << 24;
const O: i64 = 1 << 20;
const T: i64 = 1 << 32;
const P: i64 = 4_096;

limit_tests! {
    batch: &["batch"], B, Some(16), StepArgs { batch: B, ..base("context") }, StepArgs { batch: B + 1, ..base("context") };
    isl: &["isl"], I, Some(24), StepArgs { isl: I, ..base("context") }, StepArgs { isl: I + 1, ..base("context") };
    osl: &["osl"], O, Some(20), StepArgs { osl: O, ..base("generation") }, StepArgs { osl: O + 1, ..base("generation") };
    osl_in_context: &["osl"], O, Some(20), StepArgs { osl: O, ..base("context") }, StepArgs { osl: O + 1, ..base("context") };
    batch_times_isl: &["batch", "isl"], T, Some(32),
        StepArgs { batch: B, isl: B, ..base("context") }, StepArgs { batch: B, isl: B + 1, ..base("context") };
    batch_times_isl_long_prompts: &["batch", "isl"], T, Some(32),
        StepArgs { batch: 256, isl: I, ..base("context") }, StepArgs { batch: 257, isl: I, ..base("context") };
    tp: &["tp"], P, None, StepArgs { tp: P, ..base("context") }, StepArgs { tp: P + 1, ..base("context") };
    tp_generation: &["tp"], P, None, StepArgs { tp: P, ..base("generation") }, StepArgs { tp: P + 1, ..base("generation") };
    moe_tp: &["moe_tp"], P, None,
        StepArgs { model: MOE, tp: P, moe: Some((Some(P), None)), ..base("context") },
        StepArgs { model: MOE, tp: 4, moe: Some((Some(P + 1), None)), ..base("context") };
    moe_ep: &["moe_ep"], P, None,
        StepArgs { model: MOE, tp: P, moe: Some((None, Some(P))), ..base("context") },
        StepArgs { model: MOE, tp: 4, moe: Some((None, Some(P + 1))), ..base("context") };
    moe_tp_of_a_dense_model: &["moe_tp"], P, None,
        StepArgs { moe: Some((Some(P), Some(1))), ..base("context") },
        StepArgs { moe: Some((Some(P + 1), Some(1))), ..base("context") };
    moe_ep_of_a_dense_model: &["moe_ep"], P, None,
        StepArgs { moe: Some((Some(1), Some(P))), ..base("generation") },
        StepArgs { moe: Some((Some(1), Some(P + 1))), ..base("generation") };
}

/// A limit is checked before the row's other work: a batch of calls all at
/// the largest batch and isl the limits allow finishes, and one beyond in
/// the middle of a batch fails the query naming it.
#[test]
fn a_call_beyond_a_limit_inside_a_batch_is_named() {
    let rt = runtime();
    let ctx = SessionBuilder::with_tree(crate::common::tree()).build();
    let sql = format!(
        "SELECT step_latency('{DENSE}', '{DB}', 'context', 8, b, 1, 2) FROM (VALUES (1), (2), ({}), (4)) AS t(b)",
        B + 7
    );
    match within(Duration::from_secs(180), &sql.clone(), move || run_sql(&rt, &ctx, &sql)) {
        Outcome::Error(m) => assert!(
            m.contains("step_latency") && m.contains("batch") && m.contains(&(B + 7).to_string()),
            "the error names neither the function, the argument nor the value: {m}"
        ),
        other => panic!("batch = {} inside a batch: {}", B + 7, other.describe()),
    }
}
