//! The engine-step goldens (`engine_step_goldens.parquet`,
//! `family_step_goldens.parquet`): reading them and comparing a step report
//! with them row by row. Numbers are counted bit-identical / within 1e-12
//! relative / mismatched.

#![allow(dead_code)]

use std::collections::BTreeMap;

use aicsql_tables::{DataTree, OpRow, Phase, RowKind, StepError, StepQuery, StepReport, engine_step, step_latency};

use super::{for_each_golden_batch, tree};

/// One row of an engine-step goldens file (the columns compared here).
#[derive(Debug, Clone)]
pub struct Golden {
    pub config_id: String,
    pub model: String,
    pub system: String,
    pub backend: String,
    pub version: String,
    pub tp: i64,
    pub moe_tp: Option<f64>,
    pub moe_ep: Option<f64>,
    pub batch: i64,
    pub isl: i64,
    pub osl: i64,
    pub stride: i64,
    pub phase: String,
    pub row_kind: String,
    pub op_index: i64,
    pub op_name: String,
    pub op_kind: Option<String>,
    pub count: Option<f64>,
    pub quant: Option<String>,
    pub gen_step_index: Option<f64>,
    pub gen_s: Option<f64>,
    pub gen_repeat: Option<f64>,
    pub lookup_table: Option<String>,
    pub lookup_args: Option<String>,
    pub interp_path: Option<String>,
    pub latency_ms: Option<f64>,
    pub total_ms: Option<f64>,
    pub weighted_total_ms: Option<f64>,
    pub source: Option<String>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub context_latency_ms: Option<f64>,
    pub generation_latency_ms: Option<f64>,
    pub gemm_quant: Option<String>,
    pub kvcache_quant: Option<String>,
    pub fmha_quant: Option<String>,
    pub moe_quant: Option<String>,
    pub error: Option<String>,
    pub wave: i64,
}

/// Every row of the goldens file `name`; `wave` is 0 where the file has no such column.
pub fn goldens(name: &str) -> Vec<Golden> {
    let mut rows = Vec::new();
    for_each_golden_batch(name, |c| {
        let (text, int, float) = (|name: &str| c.text(name), |name: &str| c.int(name), |name: &str| c.float(name));
        let (config_id, model, system, backend, version) =
            (text("config_id"), text("model"), text("system"), text("backend"), text("version"));
        let (tp, moe_tp, moe_ep, b, isl, osl, stride) =
            (int("tp"), float("moe_tp"), float("moe_ep"), int("batch"), int("isl"), int("osl"), int("stride"));
        let (phase, row_kind, op_index, op_name, op_kind, count, quant) = (
            text("phase"),
            text("row_kind"),
            int("op_index"),
            text("op_name"),
            text("op_kind"),
            float("count"),
            text("quant"),
        );
        let (gen_step_index, gen_s, gen_repeat) = (float("gen_step_index"), float("gen_s"), float("gen_repeat"));
        let (lookup_table, lookup_args, interp_path) = (text("lookup_table"), text("lookup_args"), text("interp_path"));
        let (latency_ms, total_ms, weighted_total_ms, source) =
            (float("latency_ms"), float("total_ms"), float("weighted_total_ms"), text("source"));
        let (ttft_ms, tpot_ms, ctx_ms, gen_ms) =
            (float("ttft_ms"), float("tpot_ms"), float("context_latency_ms"), float("generation_latency_ms"));
        let (gq, kq, fq, mq, error) =
            (text("gemm_quant"), text("kvcache_quant"), text("fmha_quant"), text("moe_quant"), text("error"));
        let wave = c.has("wave").then(|| int("wave"));
        let s = |v: Option<String>| v.unwrap_or_default();
        for i in 0..c.rows() {
            rows.push(Golden {
                wave: wave.as_ref().map_or(0, |w| w(i)),
                config_id: s(config_id(i)),
                model: s(model(i)),
                system: s(system(i)),
                backend: s(backend(i)),
                version: s(version(i)),
                tp: tp(i),
                moe_tp: moe_tp(i),
                moe_ep: moe_ep(i),
                batch: b(i),
                isl: isl(i),
                osl: osl(i),
                stride: stride(i),
                phase: s(phase(i)),
                row_kind: s(row_kind(i)),
                op_index: op_index(i),
                op_name: s(op_name(i)),
                op_kind: op_kind(i),
                count: count(i),
                quant: quant(i),
                gen_step_index: gen_step_index(i),
                gen_s: gen_s(i),
                gen_repeat: gen_repeat(i),
                lookup_table: lookup_table(i),
                lookup_args: lookup_args(i),
                interp_path: interp_path(i),
                latency_ms: latency_ms(i),
                total_ms: total_ms(i),
                weighted_total_ms: weighted_total_ms(i),
                source: source(i),
                ttft_ms: ttft_ms(i),
                tpot_ms: tpot_ms(i),
                context_latency_ms: ctx_ms(i),
                generation_latency_ms: gen_ms(i),
                gemm_quant: gq(i),
                kvcache_quant: kq(i),
                fmha_quant: fq(i),
                moe_quant: mq(i),
                error: error(i).filter(|e| !e.is_empty()),
            });
        }
    });
    rows
}

#[derive(Debug, Default)]
pub struct Counts {
    pub bit_identical: usize,
    pub within_1e12: usize,
    pub mismatched: usize,
    pub errors_matched: usize,
    pub failures: Vec<String>,
}

impl Counts {
    fn number(&mut self, what: &str, want: Option<f64>, have: Option<f64>) {
        match (want, have) {
            (None, None) => {}
            (Some(w), Some(h)) if w.to_bits() == h.to_bits() => self.bit_identical += 1,
            (Some(w), Some(h)) if w == h || ((h - w) / w).abs() <= 1e-12 => {
                self.within_1e12 += 1;
                self.failures.push(format!("{what}: {h:?} vs spec {w:?} (within 1e-12)"));
            }
            (w, h) => {
                self.mismatched += 1;
                self.failures.push(format!("{what}: {h:?} vs spec {w:?}"));
            }
        }
    }

    fn text(&mut self, what: &str, want: Option<&str>, have: Option<&str>) {
        let norm = |v: Option<&str>| v.filter(|s| !s.is_empty()).map(str::to_string);
        if norm(want) != norm(have) {
            self.mismatched += 1;
            self.failures.push(format!("{what}: {have:?} vs spec {want:?}"));
        }
    }
}

pub fn query(g: &Golden, phase: Phase) -> StepQuery {
    assert_eq!(g.stride, 32, "{}: only the default stride is implemented", g.config_id);
    let u = |v: i64| u32::try_from(v).unwrap_or_else(|_| panic!("{}: {v} out of range", g.config_id));
    StepQuery {
        model: g.model.clone(),
        system: g.system.clone(),
        backend: g.backend.clone(),
        version: g.version.clone(),
        phase,
        tp: u(g.tp),
        batch: u(g.batch),
        isl: u(g.isl),
        osl: u(g.osl),
        moe_tp: g.moe_tp.map(|v| v as u32),
        moe_ep: g.moe_ep.map(|v| v as u32),
        shared_layer: true,
    }
}

/// Compares one golden row with the report's matching row.
fn compare_op(c: &mut Counts, at: &str, g: &Golden, r: &OpRow, lookups: bool) {
    c.text(&format!("{at} op_name"), Some(&g.op_name), Some(&r.op_name));
    c.text(&format!("{at} op_kind"), g.op_kind.as_deref(), r.op_kind.map(|k| k.name()));
    c.text(&format!("{at} quant"), g.quant.as_deref(), Some(&r.quant));
    c.text(&format!("{at} source"), g.source.as_deref(), Some(r.source));
    if lookups {
        c.text(&format!("{at} lookup_table"), g.lookup_table.as_deref(), r.lookup.map(|l| l.table()));
        let args = r.lookup.map(|l| l.args_json());
        c.text(&format!("{at} lookup_args"), g.lookup_args.as_deref(), args.as_deref());
        c.text(&format!("{at} interp_path"), g.interp_path.as_deref(), r.interp_path.as_deref());
    }
    if g.count != r.count {
        c.mismatched += 1;
        c.failures.push(format!("{at} count: {:?} vs spec {:?}", r.count, g.count));
    }
    c.number(&format!("{at} latency_ms"), g.latency_ms, r.latency_ms);
    c.number(&format!("{at} total_ms"), g.total_ms, Some(r.total_ms));
    c.number(&format!("{at} weighted_total_ms"), g.weighted_total_ms, Some(r.weighted_total_ms));
}

pub fn compare_phase(c: &mut Counts, rows: &[&Golden], report: &StepReport, phase: Phase, lookups: bool) {
    let key = |kind: RowKind, index: i64, step: Option<u32>| (kind == RowKind::GenStepTotal, index, step);
    let by_key: BTreeMap<_, &OpRow> =
        report.rows.iter().map(|r| (key(r.row_kind, i64::from(r.op_index), r.gen_step_index), r)).collect();
    let mut matched = 0usize;
    for g in rows {
        let at = format!("{} {} {} #{} step {:?}", g.config_id, g.phase, g.op_name, g.op_index, g.gen_step_index);
        let step = g.gen_step_index.map(|v| v as u32);
        match g.row_kind.as_str() {
            "op" | "gen_step_total" => {
                let kind = if g.row_kind == "op" { RowKind::Op } else { RowKind::GenStepTotal };
                let Some(r) = by_key.get(&key(kind, g.op_index, step)) else {
                    c.mismatched += 1;
                    c.failures.push(format!("{at}: no such row in the report"));
                    continue;
                };
                matched += 1;
                if kind == RowKind::Op {
                    compare_op(c, &at, g, r, lookups);
                } else {
                    c.number(&format!("{at} total_ms"), g.total_ms, Some(r.total_ms));
                    c.number(&format!("{at} weighted_total_ms"), g.weighted_total_ms, Some(r.weighted_total_ms));
                }
                if kind == RowKind::GenStepTotal || r.gen_s.is_some() {
                    let same = r.gen_s.map(f64::from) == g.gen_s && r.gen_repeat.map(f64::from) == g.gen_repeat;
                    if !same {
                        c.mismatched += 1;
                        c.failures.push(format!("{at}: gen_s/repeat {:?}/{:?}", r.gen_s, r.gen_repeat));
                    }
                }
            }
            "step_total" => {
                c.number(&format!("{at} total_ms"), g.total_ms, Some(report.phase_latency_ms));
                match phase {
                    Phase::Context => {
                        c.number(&format!("{at} ttft_ms"), g.ttft_ms, Some(report.total_ms));
                        c.number(
                            &format!("{at} context_latency_ms"),
                            g.context_latency_ms,
                            Some(report.phase_latency_ms),
                        );
                    }
                    Phase::Generation => {
                        c.number(&format!("{at} tpot_ms"), g.tpot_ms, Some(report.total_ms));
                        c.number(
                            &format!("{at} generation_latency_ms"),
                            g.generation_latency_ms,
                            Some(report.phase_latency_ms),
                        );
                    }
                }
                let q = report.quants;
                c.text(&format!("{at} gemm_quant"), g.gemm_quant.as_deref(), Some(q.gemm.name()));
                c.text(&format!("{at} kvcache_quant"), g.kvcache_quant.as_deref(), Some(q.kv.name()));
                c.text(&format!("{at} fmha_quant"), g.fmha_quant.as_deref(), Some(q.fmha.name()));
                c.text(&format!("{at} moe_quant"), g.moe_quant.as_deref(), Some(q.moe.name()));
            }
            other => panic!("{at}: unknown row_kind {other}"),
        }
    }
    if matched != report.rows.len() {
        c.mismatched += 1;
        c.failures.push(format!(
            "{} {:?}: report has {} rows, goldens {matched}",
            rows[0].config_id,
            phase,
            report.rows.len()
        ));
    }
}

/// An error golden: our step must fail at the same lookup.
pub fn compare_error(c: &mut Counts, g: &Golden, spec_error: &str, ours: Result<StepReport, StepError>) {
    let at = format!("{} {}", g.config_id, g.phase);
    match ours {
        Err(StepError::Miss { op, lookup, message }) => {
            let method = lookup.map(|l| l.method()).unwrap_or("");
            let named = !method.is_empty() && spec_error.contains(method) || spec_error.contains(&op);
            if named {
                c.errors_matched += 1;
            } else {
                c.mismatched += 1;
                c.failures.push(format!("{at}: our miss at {op} ({method}: {message}) vs spec error {spec_error:?}"));
            }
        }
        Err(other) => {
            c.mismatched += 1;
            c.failures.push(format!("{at}: our error {other} vs spec error {spec_error:?}"));
        }
        Ok(report) => {
            c.mismatched += 1;
            c.failures.push(format!("{at}: estimated {} where the spec fails ({spec_error:?})", report.total_ms));
        }
    }
}

/// Runs every (config, phase) of `rows` on the Rust path and compares.
/// `lookups`: also compare the first lookup and interpolation path columns
/// (the family goldens record lookups as JSON instead). Returns the counts
/// and the number of error goldens.
pub fn run(rows: &[Golden], lookups: bool) -> (Counts, usize, usize) {
    run_on(tree(), rows, lookups)
}

/// [`run`] on another mounted tree (a mirror of a remote one, say).
pub fn run_on(tree: &DataTree, rows: &[Golden], lookups: bool) -> (Counts, usize, usize) {
    let mut groups: Vec<((String, String), Vec<&Golden>)> = Vec::new();
    for g in rows {
        let key = (g.config_id.clone(), g.phase.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, rows)) => rows.push(g),
            None => groups.push((key, vec![g])),
        }
    }
    let mut c = Counts::default();
    let mut error_goldens = 0usize;
    for ((config, phase_name), rows) in &groups {
        let phase = match phase_name.as_str() {
            "context" => Phase::Context,
            "generation" => Phase::Generation,
            other => panic!("{config}: unknown phase {other}"),
        };
        let q = query(rows[0], phase);
        let ours = engine_step(tree, &q);
        if let Some(spec_error) = rows.iter().find_map(|g| g.error.clone()) {
            error_goldens += 1;
            compare_error(&mut c, rows[0], &spec_error, ours);
            continue;
        }
        match ours {
            Ok(report) => {
                compare_phase(&mut c, rows, &report, phase, lookups);
                // The fast path gives the same bits.
                match step_latency(tree, &q) {
                    Ok(v) if v.to_bits() == report.total_ms.to_bits() => {}
                    other => {
                        c.mismatched += 1;
                        c.failures
                            .push(format!("{config} {phase_name}: step_latency {other:?} vs {}", report.total_ms));
                    }
                }
            }
            Err(e) => {
                c.mismatched += 1;
                c.failures.push(format!("{config} {phase_name}: {e}"));
            }
        }
    }
    (c, groups.len(), error_goldens)
}
