//! The functions under fuzz, one entry each: how to generate valid, NULL
//! and invalid calls, and what a value must satisfy. Adding a scalar
//! function is adding an entry here and one line in `robustness.rs`'s
//! `scalar_fuzz!` list.

use crate::harness::{Call, Expect, Kind, Pin, Rng, ScalarEntry, Settings, Val};
use crate::world::{MAX_DIM, Model, QUANTS, World, near_miss, weird_text, wild_int};

const GEMM_KINDS: &[Kind] = &[Kind::Text, Kind::Text, Kind::Int, Kind::Int, Kind::Int];
const STEP7: &[Kind] = &[Kind::Text, Kind::Text, Kind::Text, Kind::Int, Kind::Int, Kind::Int, Kind::Int];
const STEP9: &[Kind] =
    &[Kind::Text, Kind::Text, Kind::Text, Kind::Int, Kind::Int, Kind::Int, Kind::Int, Kind::Int, Kind::Int];

/// The documented per-call limits of the step functions.
pub const MAX_BATCH: i64 = 65_536;
pub const MAX_ISL: i64 = 1 << 24;
pub const MAX_OSL: i64 = 1 << 20;
pub const MAX_TOKENS: i64 = 1 << 32;
pub const MAX_PARALLEL: i64 = 4_096;

pub fn gemm_latency() -> ScalarEntry<World> {
    ScalarEntry {
        name: "gemm_latency",
        arities: &[GEMM_KINDS],
        settings: World::settings,
        call: gemm_call,
        invalid: gemm_invalid,
        check: positive_finite,
        batch_rows: 25_000,
    }
}

/// `gemm_sol`'s documentation: max(2mnk / flops, bytes * (mn + mk + nk) / mem_bw) * 1000,
/// with n, k >= 1: strictly positive (and finite on the whole domain).
pub fn gemm_sol() -> ScalarEntry<World> {
    ScalarEntry {
        name: "gemm_sol",
        arities: &[GEMM_KINDS],
        settings: World::settings,
        call: gemm_call,
        invalid: gemm_invalid,
        check: positive_finite,
        batch_rows: 25_000,
    }
}

pub fn step_latency() -> ScalarEntry<World> {
    ScalarEntry {
        name: "step_latency",
        arities: &[STEP7, STEP9],
        settings: World::settings,
        call: step_call,
        invalid: step_invalid,
        check: step_check,
        batch_rows: 10_000,
    }
}

pub fn positive_finite(_call: &Call, v: f64) -> Result<(), String> {
    if v.is_finite() && v > 0.0 { Ok(()) } else { Err("not finite and > 0".into()) }
}

/// TTFT / TPOT: finite and > 0, except the documented TPOT of 0 when
/// `osl <= 1` (no decode step; `StepReport::total_ms`, docs/spec 12).
pub fn step_check(call: &Call, v: f64) -> Result<(), String> {
    let generation = matches!(&call.args[2], Val::Text(Some(p)) if p.eq_ignore_ascii_case("generation"));
    let osl = match call.args[6] {
        Val::Int(Some(o)) => o,
        _ => 2,
    };
    if generation && osl <= 1 {
        return if v == 0.0 { Ok(()) } else { Err(format!("TPOT with osl = {osl} must be 0")) };
    }
    positive_finite(call, v)
}

// ---- GEMM ------------------------------------------------------------------------------------

/// (m, n, k) over the whole valid domain: realistic shapes, measured-site
/// multiples, log-uniform up to 2^40, the extremes, m = 0.
pub fn gemm_shape(rng: &mut Rng) -> (i64, i64, i64) {
    match rng.below(10) {
        0..=3 => (rng.log_range(1, 16_384) - rng.below(2) as i64, rng.log_range(1, 65_536), rng.log_range(1, 65_536)),
        4 | 5 => {
            let site = |rng: &mut Rng| 128 * rng.range(1, 256);
            (rng.log_range(1, 8192), site(rng), site(rng))
        }
        6 | 7 => {
            (rng.log_range(1, MAX_DIM) - rng.below(2) as i64, rng.log_range(1, MAX_DIM), rng.log_range(1, MAX_DIM))
        }
        8 => {
            let m = *rng.pick(&[0, 1, MAX_DIM - 1, MAX_DIM]);
            let edge = |rng: &mut Rng| *rng.pick(&[1, 2, MAX_DIM - 1, MAX_DIM]);
            (m, edge(rng), edge(rng))
        }
        _ => (0, rng.log_range(1, 65_536), rng.log_range(1, 65_536)),
    }
}

fn gemm_call(w: &World, rng: &mut Rng, settings: &Settings, _arity: usize, pin: &mut Pin) -> Call {
    let (db, quant) = match pin {
        Pin::Use(v) => (v[0].clone(), v[1].clone()),
        _ => {
            let (arg, full) = w.valid_db(rng, settings);
            let q = w.quant_for(rng, &full);
            if *pin == Pin::Choose {
                *pin = Pin::Use(vec![Val::text(&arg), Val::text(&q)]);
            }
            (Val::text(arg), Val::text(q))
        }
    };
    let (m, n, k) = gemm_shape(rng);
    let mut args = vec![db, quant, Val::int(m), Val::int(n), Val::int(k)];
    let mut expect = Expect::Answer;
    if rng.one_in(40) {
        // NULL in: NULL out, whatever else the call holds.
        let pinned = matches!(pin, Pin::Use(_));
        let at = if pinned { 2 + rng.below(3) as usize } else { rng.below(5) as usize };
        args[at] = if at < 2 { Val::Text(None) } else { Val::Int(None) };
        // Sometimes the other arguments are nonsense too: NULL still wins.
        if rng.one_in(3) && !pinned {
            let other = (at + 1 + rng.below(4) as usize) % 5;
            args[other] = if other < 2 {
                Val::text(weird_text(rng))
            } else {
                Val::int(wild_int(rng).saturating_abs().saturating_neg().saturating_sub(1))
            };
        }
        expect = Expect::Null;
    }
    Call { args, expect }
}

fn gemm_invalid(w: &World, rng: &mut Rng, settings: &Settings, _arity: usize) -> Call {
    let (db_arg, full) = w.valid_db(rng, settings);
    let (m, n, k) = gemm_shape(rng);
    let mut args = vec![Val::text(&db_arg), Val::text(w.quant_for(rng, &full)), Val::int(m), Val::int(n), Val::int(k)];
    let needles: Vec<String>;
    match rng.below(6) {
        0 => {
            let q = if rng.one_in(2) {
                weird_text(rng)
            } else {
                {
                    let q = *rng.pick(&QUANTS);
                    near_miss(rng, q)
                }
            };
            let q = if QUANTS.contains(&q.as_str()) { format!("{q}?") } else { q };
            needles = vec![q.clone()];
            args[1] = Val::text(q);
        }
        1 => {
            let (s, b, v) = rng.pick(&w.gemm_dbs).clone();
            let bad = match rng.below(7) {
                0 => weird_text(rng),
                1 => near_miss(rng, &format!("{s}/{b}/{v}")),
                2 => format!("no_such_system/{b}/{v}"),
                3 => format!("{s}/no-such-backend/{v}"),
                4 => format!("{s}/{b}/0.0.0.bogus"),
                5 => format!("{s}/{b}/{v}/extra"),
                // A prefix the settings cannot complete.
                _ if settings.backend.trim().is_empty() => s.clone(),
                _ => format!("{s}/{b}/"),
            };
            let bad = if w.all_gemm_dbs.iter().any(|(s, b, v)| bad == format!("{s}/{b}/{v}")) {
                format!("{bad}!")
            } else {
                bad
            };
            needles = vec![bad.clone()];
            args[0] = Val::text(bad);
        }
        2 => {
            let m = if rng.one_in(2) { -rng.log_range(1, i64::MAX) } else { rng.range(MAX_DIM + 1, i64::MAX) };
            needles = vec![m.to_string()];
            args[2] = Val::int(m);
        }
        3 | 4 => {
            let at = 3 + rng.below(2) as usize;
            let v = match rng.below(3) {
                0 => 0,
                1 => -rng.log_range(1, i64::MAX),
                _ => rng.range(MAX_DIM + 1, i64::MAX),
            };
            needles = vec![v.to_string()];
            args[at] = Val::int(v);
        }
        _ => {
            // The extremes of i64 anywhere.
            let at = 2 + rng.below(3) as usize;
            let v = *rng.pick(&[i64::MIN, i64::MAX, i64::MIN + 1, -1]);
            needles = vec![v.to_string()];
            args[at] = Val::int(v);
        }
    }
    Call { args, expect: Expect::Invalid(needles) }
}

// ---- steps -------------------------------------------------------------------------------------------

fn model<'a>(w: &'a World, name: &str) -> &'a Model {
    w.models.iter().find(|m| m.name == name).expect("a model of the world")
}

fn divisors(n: i64) -> Vec<i64> {
    (1..=n.clamp(1, MAX_PARALLEL)).filter(|d| n % d == 0).collect()
}

/// A (model, database) pair a probe accepted, with the database argument
/// (maybe a prefix the settings complete) and its backend.
fn step_pair(w: &World, rng: &mut Rng, settings: &Settings, moe_args: bool) -> (String, String, String) {
    for _ in 0..1000 {
        let (arg, full) = w.valid_db(rng, settings);
        let backend = full.split('/').nth(1).expect("backend").to_string();
        let ok: Vec<&String> =
            w.step_ok.iter().filter(|(m, b)| *b == backend && (moe_args || !model(w, m).moe)).map(|(m, _)| m).collect();
        if !ok.is_empty() {
            return (rng.pick(&ok).to_string(), arg, backend);
        }
    }
    panic!("no model is accepted on any database: {:?}", w.step_refused);
}

fn phase_text(rng: &mut Rng, generation: bool) -> String {
    let p = if generation { "generation" } else { "context" };
    match rng.below(6) {
        0 => p.to_uppercase(),
        1 => {
            let mut c = p.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
        }
        _ => p.to_string(),
    }
}

/// tp, and (moe_tp, moe_ep) consistent with it for a MoE model.
fn parallelism(rng: &mut Rng, m: &Model, backend: &str, nine: bool) -> (i64, Option<i64>, Option<i64>) {
    let divs = divisors(m.heads);
    let tp = if rng.one_in(3) { *rng.pick(&divs) } else { *rng.pick(&divs[..divs.len().min(4)]) };
    if !nine {
        return (tp, None, None);
    }
    if !m.moe {
        // Dense models ignore both (any value inside the limits, or NULL).
        let any = |rng: &mut Rng| if rng.one_in(3) { None } else { Some(rng.range(0, MAX_PARALLEL)) };
        return (tp, any(rng), any(rng));
    }
    let split: Vec<(i64, i64)> = divisors(tp)
        .into_iter()
        .map(|a| (a, tp / a))
        .filter(|&(a, b)| !(backend == "vllm" && a > 1 && b > 1))
        .filter(|&(a, b)| b <= m.experts && !(m.fp8_block && (m.moe_inter / a) % 128 != 0))
        .collect();
    if split.is_empty() {
        return parallelism(rng, m, backend, nine);
    }
    let (a, b) = *rng.pick(&split);
    match rng.below(3) {
        0 if b == 1 => (tp, Some(a), None),
        1 if a == 1 => (tp, None, Some(b)),
        _ => (tp, Some(a), Some(b)),
    }
}

/// (batch, isl, osl) inside the documented limits; mostly realistic, some
/// at the edges, rarely a very long generation (its cost is osl / 32 steps).
pub fn step_sizes(rng: &mut Rng) -> (i64, i64, i64) {
    let (batch, isl) = match rng.below(10) {
        0..=5 => (rng.log_range(1, 256), rng.log_range(1, 8192)),
        6 | 7 => {
            let b = rng.log_range(1, MAX_BATCH);
            (b, rng.log_range(1, MAX_ISL.min(MAX_TOKENS / b)))
        }
        8 => (*rng.pick(&[1, MAX_BATCH]), *rng.pick(&[1, 2, MAX_TOKENS / MAX_BATCH])),
        _ => (rng.log_range(1, 64), *rng.pick(&[1, MAX_ISL / 2, MAX_ISL])),
    };
    let osl = if rng.one_in(4000) { rng.log_range(1, MAX_OSL) } else { rng.log_range(1, 1024) };
    (batch, isl, osl)
}

fn step_call(w: &World, rng: &mut Rng, settings: &Settings, arity: usize, pin: &mut Pin) -> Call {
    let nine = arity == 1;
    let (model_name, db, phase) = match pin {
        Pin::Use(v) => {
            let t = |i: usize| match &v[i] {
                Val::Text(Some(s)) => s.clone(),
                _ => unreachable!("pinned text"),
            };
            (t(0), t(1), t(2))
        }
        _ => {
            let (m, db, _) = step_pair(w, rng, settings, nine);
            let generation = rng.one_in(2);
            let phase = phase_text(rng, generation);
            if *pin == Pin::Choose {
                *pin = Pin::Use(vec![Val::text(&m), Val::text(&db), Val::text(&phase)]);
            }
            (m, db, phase)
        }
    };
    let backend = resolved_backend(&db, settings);
    let m = model(w, &model_name);
    let (tp, moe_tp, moe_ep) = parallelism(rng, m, &backend, nine);
    let (batch, isl, osl) = step_sizes(rng);
    let mut args = vec![
        Val::text(model_name),
        Val::text(db),
        Val::text(phase),
        Val::int(tp),
        Val::int(batch),
        Val::int(isl),
        Val::int(osl),
    ];
    if nine {
        args.push(Val::Int(moe_tp));
        args.push(Val::Int(moe_ep));
    }
    let mut expect = Expect::Answer;
    if rng.one_in(40) {
        let pinned = matches!(pin, Pin::Use(_));
        let at = if pinned { 3 + rng.below(4) as usize } else { rng.below(7) as usize };
        args[at] = if at < 3 { Val::Text(None) } else { Val::Int(None) };
        expect = Expect::Null;
    }
    Call { args, expect }
}

/// The backend a database argument resolves to.
fn resolved_backend(db: &str, settings: &Settings) -> String {
    match db.split('/').nth(1) {
        Some(b) => b.to_string(),
        None => settings.backend.trim().to_string(),
    }
}

fn step_invalid(w: &World, rng: &mut Rng, settings: &Settings, arity: usize) -> Call {
    let nine = arity == 1;
    let mut call = step_call(w, rng, settings, arity, &mut Pin::Off);
    // Undo a planted NULL: an invalid call has every required argument.
    if call.expect == Expect::Null {
        call = step_call(w, rng, settings, arity, &mut Pin::Off);
        while call.expect == Expect::Null {
            call = step_call(w, rng, settings, arity, &mut Pin::Off);
        }
    }
    let mut args = call.args;
    let model_name = match &args[0] {
        Val::Text(Some(s)) => s.clone(),
        _ => unreachable!(),
    };
    let backend = match &args[1] {
        Val::Text(Some(db)) => resolved_backend(db, settings),
        _ => unreachable!(),
    };
    let m = model(w, &model_name).clone();
    let needles: Vec<String>;
    let choice = rng.below(if nine { 12 } else { 10 });
    match choice {
        0 => {
            // A model the functions cannot price: unknown, or an unsupported family / checkpoint.
            // Refused by the probe on this backend (a family the step does
            // not build, a checkpoint it refuses).
            let unsupported: Vec<&Model> =
                w.models.iter().filter(|x| w.step_refused.contains_key(&(x.name.clone(), backend.clone()))).collect();
            let bad = match rng.below(3) {
                0 if !unsupported.is_empty() => rng.pick(&unsupported).name.clone(),
                1 => near_miss(rng, &model_name),
                _ => weird_text(rng),
            };
            let bad = if w.models.iter().any(|x| x.name == bad) && !unsupported.iter().any(|x| x.name == bad) {
                format!("{bad}?")
            } else {
                bad
            };
            needles = vec![bad.clone()];
            args[0] = Val::text(bad);
        }
        1 => {
            let bad = if rng.one_in(2) { weird_text(rng) } else { format!("no_such_system/{backend}/0.19.0") };
            needles = vec![bad.clone()];
            args[1] = Val::text(bad);
        }
        2 => {
            let bad = match rng.below(3) {
                0 => near_miss(rng, "context"),
                1 => rng.pick(&["prefill", "decode", "ctx", "gen", ""]).to_string(),
                _ => weird_text(rng),
            };
            let bad =
                if ["context", "generation"].contains(&bad.to_lowercase().as_str()) { format!("{bad}!") } else { bad };
            needles = vec![bad.clone()];
            args[2] = Val::text(bad);
        }
        3 => {
            // tp: 0, negative, not dividing the heads, or beyond the limit.
            let (v, needle) = match rng.below(4) {
                0 => (0, "tp".to_string()),
                1 => {
                    let v = -rng.log_range(1, i64::MAX);
                    (v, v.to_string())
                }
                2 => {
                    let v = (1..=MAX_PARALLEL).find(|d| m.heads % d != 0 && rng.one_in(3)).unwrap_or(m.heads + 1);
                    (v, v.to_string())
                }
                _ => {
                    let v = rng.range(MAX_PARALLEL + 1, i64::MAX);
                    (v, "tp".to_string())
                }
            };
            needles = vec![needle];
            args[3] = Val::int(v);
        }
        4..=6 => {
            // batch / isl / osl: negative, zero (batch, isl), beyond the limit.
            let at = 4 + (choice - 4) as usize;
            let (name, limit) = [("batch", MAX_BATCH), ("isl", MAX_ISL), ("osl", MAX_OSL)][at - 4];
            let (v, needle) = match rng.below(3) {
                0 if at < 6 => (0, name.to_string()),
                1 => {
                    let v = -rng.log_range(1, i64::MAX);
                    (v, v.to_string())
                }
                _ => (if rng.one_in(2) { limit + 1 } else { rng.range(limit + 1, i64::MAX) }, name.to_string()),
            };
            needles = vec![needle];
            args[at] = Val::int(v);
            if at == 4 {
                // Keep batch * isl inside its own limit where batch alone is at fault.
                args[5] = Val::int(1);
            }
        }
        7 => {
            // batch * isl beyond 2^32 tokens, each inside its own limit.
            let batch = rng.range(257, MAX_BATCH);
            let isl = rng.range(MAX_TOKENS / batch + 1, MAX_ISL);
            needles = vec!["batch".into(), "isl".into()];
            args[4] = Val::int(batch);
            args[5] = Val::int(isl);
        }
        8 if !nine && w.step_ok.iter().any(|(x, b)| *b == backend && model(w, x).moe) => {
            // A MoE model called with 7 arguments: moe_tp / moe_ep are required.
            let moe: Vec<&String> =
                w.step_ok.iter().filter(|(x, b)| *b == backend && model(w, x).moe).map(|(x, _)| x).collect();
            args[0] = Val::text(rng.pick(&moe).as_str());
            args[3] = Val::int(1);
            needles = vec!["moe_tp".into(), "moe_ep".into()];
        }
        8 | 9 => {
            // An i64 extreme in any integer argument.
            let at = 3 + rng.below(4) as usize;
            let v = *rng.pick(&[i64::MIN, i64::MAX, i64::MIN + 1, u32::MAX as i64 + 1]);
            needles = vec![v.to_string(), ["tp", "batch", "isl", "osl"][at - 3].to_string()];
            args[at] = Val::int(v);
        }
        _ => {
            // moe_tp / moe_ep: negative, beyond the limit, or (MoE) inconsistent with tp.
            let at = 7 + rng.below(2) as usize;
            let name = ["moe_tp", "moe_ep"][at - 7];
            let tp = match args[3] {
                Val::Int(Some(t)) => t,
                _ => 1,
            };
            let (v, needle) = match rng.below(3) {
                0 => {
                    let v = -rng.log_range(1, i64::MAX);
                    (v, v.to_string())
                }
                1 => (rng.range(MAX_PARALLEL + 1, i64::MAX), name.to_string()),
                _ if m.moe => {
                    // Both given, product != tp.
                    args[15 - at] = Val::int(1);
                    (tp + 1, name.to_string())
                }
                _ => (MAX_PARALLEL + 1, name.to_string()),
            };
            needles = vec![needle, "moe".to_string()];
            args[at] = Val::int(v);
        }
    }
    Call { args, expect: Expect::Invalid(needles) }
}
