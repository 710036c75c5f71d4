//! NEMOTRONNAS: Nemotron-Super's per-layer heterogeneous blocks
//! (docs/spec/families_nemotron.md 2). Each block may drop its attention or
//! its FFN and picks its own KV grouping and FFN width; the spec merges runs
//! of consecutive identical blocks into groups and builds one set of ops per
//! group, so op names repeat down the list and the step sums them per name.

use serde_json::Value;

use crate::error::TablesError;
use crate::model::ModelConfig;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpSpec, logits_gemm, p2p};
use crate::step::types::{OpKind, Phase, Quants, StepError};

/// The attention ops' head size: the spec builds them without one, so they
/// take the op's default whatever the model's head dim (2.4).
const ATTENTION_HEAD_SIZE: i64 = 128;

/// `ffn_mult` when a block names none (2.1).
const DEFAULT_FFN_MULT: f64 = 3.5;

/// One run of consecutive identical blocks (2.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BlockGroup {
    /// Blocks in the run: every op of the group counts them.
    pub blocks: i64,
    /// Query heads per KV head; `None` when the block has no attention.
    pub heads_per_kv: Option<i64>,
    /// The FFN's intermediate size; `None` when the block has no FFN.
    pub ffn_inter: Option<i64>,
}

/// What a NAS config adds: its block groups in layer order. Empty without
/// `block_configs` (and always for `NemotronForCausalLM`): the spec then
/// prices nothing, and the step is 0 ms (2.1).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct NemotronNas {
    pub groups: Vec<BlockGroup>,
}

/// A block's identity as the spec compares them: `(n_heads_in_group,
/// attention no-op, ffn_mult, ffn no-op)`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BlockKey {
    heads_per_kv: Option<i64>,
    attention_off: bool,
    ffn_mult: f64,
    ffn_off: bool,
}

impl NemotronNas {
    pub fn from_config(cfg: &ModelConfig, architecture: &str, hidden: i64) -> Result<NemotronNas, StepError> {
        let corrupt = |what: String| StepError::Data(TablesError::document(&cfg.path, what));
        // Only DeciLM configs are read for blocks (2.1).
        let blocks = match cfg.text.get("block_configs") {
            Some(Value::Array(blocks)) if architecture == "DeciLMForCausalLM" => blocks.as_slice(),
            _ => &[],
        };
        let groups = runs(blocks)
            .map_err(&corrupt)?
            .into_iter()
            .map(|(key, blocks)| {
                let ffn_inter = if key.ffn_off { None } else { Some(ffn_intermediate(key.ffn_mult, hidden)) };
                let heads_per_kv = match (key.attention_off, key.heads_per_kv) {
                    (true, _) => None,
                    (false, Some(g)) if g > 0 => Some(g),
                    (false, other) => {
                        return Err(corrupt(format!(
                            "a block with attention needs a positive `n_heads_in_group`, found {other:?}"
                        )));
                    }
                };
                Ok(BlockGroup { blocks, heads_per_kv, ffn_inter })
            })
            .collect::<Result<_, StepError>>()?;
        Ok(NemotronNas { groups })
    }
}

/// Runs of consecutive blocks with equal keys, with their lengths.
fn runs(blocks: &[Value]) -> Result<Vec<(BlockKey, i64)>, String> {
    let mut runs: Vec<(BlockKey, i64)> = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let key = block_key(block).map_err(|what| format!("block_configs[{index}]: {what}"))?;
        match runs.last_mut() {
            Some((last, count)) if *last == key => *count += 1,
            _ => runs.push((key, 1)),
        }
    }
    Ok(runs)
}

fn block_key(block: &Value) -> Result<BlockKey, String> {
    let section = |name: &str| match block.get(name) {
        None => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v)),
        Some(other) => Err(format!("`{name}` must be an object, found {other}")),
    };
    let (attention, ffn) = (section("attention")?, section("ffn")?);
    let flag = |section: Option<&Value>, name: &str| match section.and_then(|s| s.get("no_op")) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!("`{name}.no_op` must be a boolean, found {other}")),
    };
    let heads_per_kv = match attention.and_then(|a| a.get("n_heads_in_group")) {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(v.as_i64().ok_or_else(|| format!("`attention.n_heads_in_group` must be an integer, found {v}"))?)
        }
    };
    let ffn_mult = match ffn.and_then(|f| f.get("ffn_mult")) {
        None => DEFAULT_FFN_MULT,
        Some(v) => v.as_f64().ok_or_else(|| format!("`ffn.ffn_mult` must be a number, found {v}"))?,
    };
    Ok(BlockKey { heads_per_kv, attention_off: flag(attention, "attention")?, ffn_mult, ffn_off: flag(ffn, "ffn")? })
}

/// The FFN width of a block: `int(2 * mult * h / 3)` in floats, truncated,
/// then rounded up to a multiple of 256 (2.3).
fn ffn_intermediate(mult: f64, hidden: i64) -> i64 {
    let t = ((2.0 * mult) * hidden as f64 / 3.0) as i64;
    if t % 256 == 0 { t } else { t + 256 - t % 256 }
}

/// The op list of `phase` (2.4 / 2.5): per group attention and FFN blocks
/// with their all-reduces inside, no embedding all-reduce, the hand-off
/// before the logits, counts without an MTP factor.
pub(crate) fn op_list(model: &ModelDesc, nas: &NemotronNas, par: &Parallel, quants: &Quants, phase: Phase) -> Vec<Op> {
    if nas.groups.is_empty() {
        return Vec::new();
    }
    let (h, tp, d) = (model.hidden, par.tp, model.head_dim);
    let context = phase == Phase::Context;
    let op = |base, kind, count: f64, spec| Op { base, kind, count, spec };
    let gemm =
        |n: i64, k: i64| OpSpec::Gemm { n, k, quant: quants.gemm, m_is_batch: false, low_precision_input: false };
    let norm = OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h };
    let all_reduce = OpSpec::AllReduce { tp, hidden: h };
    let attention_width = (model.heads * d) / tp;

    let mut ops = vec![op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab })];
    for group in &nas.groups {
        let c = group.blocks as f64;
        if let Some(heads_per_kv) = group.heads_per_kv {
            let kv_heads = model.heads / heads_per_kv;
            let n_kv = (kv_heads + tp - 1) / tp;
            let (n, head_dim) = (par.n, ATTENTION_HEAD_SIZE);
            let attention = if context {
                let spec = OpSpec::ContextAttention {
                    n,
                    n_kv,
                    head_dim,
                    window: 0,
                    kv: quants.kv,
                    fmha: quants.fmha,
                    qk_norm: false,
                };
                op("attention", OpKind::ContextAttention, c, spec)
            } else {
                let spec = OpSpec::GenerationAttention { n, n_kv, head_dim, window: 0, kv: quants.kv };
                op("attention", OpKind::GenerationAttention, c, spec)
            };
            ops.extend([
                op("add_norm_1", OpKind::ElementWise, c, norm),
                op("qkv_gemm", OpKind::Gemm, c, gemm(attention_width + d * n_kv * 2, h)),
                attention,
                op("proj_gemm", OpKind::Gemm, c, gemm(h, attention_width)),
                op("ar_1", OpKind::CustomAllReduce, c, all_reduce),
            ]);
        }
        if let Some(inter) = group.ffn_inter {
            let gate = (2 * inter) / tp;
            let down = inter / tp;
            ops.extend([
                op("add_norm_2", OpKind::ElementWise, c, norm),
                op("gate_ffn1_gemm", OpKind::Gemm, c, gemm(gate, h)),
                op("act_gate", OpKind::ElementWise, c, OpSpec::ElementWise { dim_in: gate, dim_out: down }),
                op("ffn2_gemm", OpKind::Gemm, c, gemm(h, down)),
                op("ar_2", OpKind::CustomAllReduce, c, all_reduce),
            ]);
        }
    }
    ops.push(p2p(par, h));
    ops.push(logits_gemm(model, tp, phase));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The widths of 2.3 at h = 8192, the 0.5 and 1.0 cases rounded up.
    #[test]
    fn ffn_widths_round_up_to_256() {
        let widths: Vec<i64> =
            [0.5, 1.0, 1.3125, 2.625, 3.28125, 5.25].iter().map(|&m| ffn_intermediate(m, 8192)).collect();
        assert_eq!(widths, [2816, 5632, 7168, 14336, 17920, 28672]);
    }

    #[test]
    fn only_consecutive_equal_blocks_merge() {
        let blocks: Vec<Value> = [(Some(8), false, 5.25), (Some(8), false, 5.25), (None, true, 1.0), (Some(8), false, 5.25)]
            .iter()
            .map(|&(g, off, mult)| {
                serde_json::json!({"attention": {"n_heads_in_group": g, "no_op": off}, "ffn": {"ffn_mult": mult}})
            })
            .collect();
        let merged = runs(&blocks).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(merged.iter().map(|(_, c)| *c).collect::<Vec<_>>(), [2, 1, 1]);
        // An integer and a float multiplier compare equal, as in Python.
        let a = block_key(&serde_json::json!({"ffn": {"ffn_mult": 1}})).unwrap_or_else(|e| panic!("{e}"));
        let b = block_key(&serde_json::json!({"ffn": {"ffn_mult": 1.0}})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b);
        let bad = runs(&[serde_json::json!({}), serde_json::json!({"attention": {"n_heads_in_group": "8"}})]);
        let err = bad.err().unwrap_or_default();
        assert!(err.contains("block_configs[1]") && err.contains("n_heads_in_group"), "{err}");
    }
}
