//! GEMMA4MIX: Gemma 4, whose layers use sliding-window ("SWA") or global
//! attention, each layer paying a shared dense MLP and the routed experts
//! (docs/spec/families_qwen35_gemma4.md 3). The spec prices the SWA layers
//! as one group, then the global ones (HYBRIDMOE has the opposite order);
//! both attention ops share one name. No all-reduce is charged but the MoE
//! dispatch pair. Context parallelism (sglang, 3.7) splits the token-major
//! context ops, zigzags the attention and closes the list with one KV
//! all-gather per layer type.

use serde_json::Value;

use crate::error::TablesError;
use crate::model::ModelConfig;
use crate::quant::GemmQuant;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpSpec, logits_gemm, p2p, routed_experts};
use crate::step::types::{OpKind, Phase, Quants, StepError};

/// What a Gemma 4 config adds to the generic fields (3.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Gemma4 {
    pub swa_layers: i64,
    pub global_layers: i64,
    pub swa_kv_heads: i64,
    pub swa_head_dim: i64,
    pub global_kv_heads: i64,
    pub global_head_dim: i64,
    pub window: i64,
    /// Global layers share K and V: only their qkv GEMM narrows.
    pub k_eq_v: bool,
    /// No routed experts (no top-k or no experts): the shared MLP alone.
    pub dense: bool,
}

impl Gemma4 {
    pub fn from_config(cfg: &ModelConfig, layers: i64) -> Result<Gemma4, StepError> {
        let (text, path) = (&cfg.text, cfg.path.as_path());
        let corrupt = |what: String| StepError::Data(TablesError::document(path, what));
        let types: Vec<&str> = match text.get("layer_types") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().ok_or_else(|| corrupt(format!("`layer_types`: expected strings, found {v}"))))
                .collect::<Result<_, _>>()?,
            Some(v) => return Err(corrupt(format!("`layer_types` must be a list, found {v}"))),
        };
        if types.len() as i64 != layers {
            return Err(StepError::input(format!(
                "Gemma 4 layer_types length {} != num_hidden_layers {layers}",
                types.len()
            )));
        }
        if types.iter().any(|t| *t != "sliding_attention" && *t != "full_attention") {
            return Err(StepError::input(
                "Gemma 4 layer_types must contain only 'sliding_attention' or 'full_attention'",
            ));
        }
        let int = |key: &str| -> Result<Option<i64>, StepError> {
            match text.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => {
                    v.as_i64().map(Some).ok_or_else(|| corrupt(format!("`{key}`: expected an integer, found {v}")))
                }
            }
        };
        let required =
            |key: &str| int(key)?.ok_or_else(|| corrupt(format!("`{key}` is missing (a Gemma 4 config needs it)")));
        let swa_kv_heads = required("num_key_value_heads")?;
        let swa_head_dim = required("head_dim")?;
        let swa_layers = types.iter().filter(|t| **t == "sliding_attention").count() as i64;
        Ok(Gemma4 {
            swa_layers,
            global_layers: types.len() as i64 - swa_layers,
            swa_kv_heads,
            swa_head_dim,
            global_kv_heads: int("num_global_key_value_heads")?.unwrap_or(swa_kv_heads),
            global_head_dim: int("global_head_dim")?.unwrap_or(swa_head_dim),
            window: int("sliding_window")?.unwrap_or(0),
            k_eq_v: text.get("attention_k_eq_v").is_some_and(truthy),
            dense: false,
        })
    }
}

/// Python's `bool(value)` of a JSON value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// One layer type's op names.
const SWA: [&str; 11] = [
    "swa_attn_norm",
    "swa_qkv_gemm",
    "swa_proj_gemm",
    "swa_ffn_norm",
    "swa_shared_mlp_gate_up_gemm",
    "swa_shared_mlp_act",
    "swa_shared_mlp_down_gemm",
    "swa_router_gemm",
    "swa_moe_pre_dispatch",
    "swa_moe",
    "swa_moe_post_dispatch",
];
const GLOBAL: [&str; 11] = [
    "global_attn_norm",
    "global_qkv_gemm",
    "global_proj_gemm",
    "global_ffn_norm",
    "global_shared_mlp_gate_up_gemm",
    "global_shared_mlp_act",
    "global_shared_mlp_down_gemm",
    "global_router_gemm",
    "global_moe_pre_dispatch",
    "global_moe",
    "global_moe_post_dispatch",
];

/// The op list of `phase` (3.4 / 3.5).
pub(crate) fn op_list(model: &ModelDesc, g: &Gemma4, par: &Parallel, quants: &Quants, phase: Phase) -> Vec<Op> {
    let (h, tp, heads) = (model.hidden, par.tp, model.heads);
    let op = |base, kind, count: f64, spec| Op { base, kind, count, spec };
    let gemm = |n: i64, k: i64, lp: bool| OpSpec::Gemm {
        n,
        k,
        quant: quants.gemm,
        m_is_batch: false,
        low_precision_input: lp,
    };
    let norm = OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h };
    let n = heads / tp;
    let dense_ipt = model.inter / tp;
    let context = phase == Phase::Context;
    let ceil = |a: i64| (a + tp - 1).div_euclid(tp);

    let mut ops = vec![op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab })];
    for (names, count, global) in [(&SWA, g.swa_layers, false), (&GLOBAL, g.global_layers, true)] {
        if count == 0 {
            continue;
        }
        let c = count as f64;
        let (n_kv, head, window) = if global {
            (ceil(g.global_kv_heads), g.global_head_dim, 0)
        } else {
            (ceil(g.swa_kv_heads), g.swa_head_dim, g.window)
        };
        let kv_width = if global && g.k_eq_v { n_kv * head } else { n_kv * head * 2 };
        let attention = if context {
            op(
                "attention",
                OpKind::ContextAttention,
                c,
                OpSpec::ContextAttention {
                    n,
                    n_kv,
                    head_dim: head,
                    window,
                    kv: quants.kv,
                    fmha: quants.fmha,
                    qk_norm: false,
                },
            )
        } else {
            op(
                "attention",
                OpKind::GenerationAttention,
                c,
                OpSpec::GenerationAttention { n, n_kv, head_dim: head, window, kv: quants.kv },
            )
        };
        ops.extend([
            op(names[0], OpKind::ElementWise, c, norm),
            op(names[1], OpKind::Gemm, c, gemm((heads * head) / tp + kv_width, h, false)),
            attention,
            op(names[2], OpKind::Gemm, c, gemm(h, (heads * head) / tp, true)),
            op(names[3], OpKind::ElementWise, c, norm),
            op(names[4], OpKind::Gemm, c, gemm(2 * dense_ipt, h, false)),
            op(names[5], OpKind::ElementWise, c, OpSpec::ElementWise { dim_in: 2 * dense_ipt, dim_out: dense_ipt }),
            op(names[6], OpKind::Gemm, c, gemm(h, dense_ipt, true)),
        ]);
        if g.dense {
            continue;
        }
        if model.experts >= 128 {
            let router = OpSpec::Gemm {
                n: model.experts,
                k: h,
                quant: GemmQuant::Bfloat16,
                m_is_batch: false,
                low_precision_input: false,
            };
            ops.push(op(names[7], OpKind::Gemm, c, router));
        }
        ops.extend(routed_experts([names[8], names[9], names[10]], c, model, par, quants, (h, true), phase));
    }
    ops.push(logits_gemm(model, tp, phase));
    ops.push(p2p(par, h));
    if context && par.cp > 1 {
        // SGLang's context parallelism gathers each layer's K and V over the
        // cp ranks: one all-gather per layer type, SWA first, in half
        // elements, not window-capped (3.7).
        let kv_bytes = quants.kv.memory();
        for (base, count, n_kv, head) in [
            ("cp_all_gather_swa", g.swa_layers, ceil(g.swa_kv_heads), g.swa_head_dim),
            ("cp_all_gather_global", g.global_layers, ceil(g.global_kv_heads), g.global_head_dim),
        ] {
            if count > 0 {
                let elements_per_token = (n_kv * head * 2 * kv_bytes) as f64 / 2.0;
                ops.push(op(
                    base,
                    OpKind::Nccl,
                    count as f64,
                    OpSpec::CpAllGather { gpus: par.cp, elements_per_token },
                ));
            }
        }
    }
    ops
}
