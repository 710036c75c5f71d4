//! QWEN35: Qwen3.5 dense and MoE checkpoints, whose layers are either
//! gated-delta-net linear attention or full attention
//! (docs/spec/families_qwen35_gemma4.md 1). The spec prices all GDN layers
//! as one group, then all full-attention layers, each group with the same
//! FFN (dense SwiGLU, or routed experts plus an ungated shared expert).
//! The GDN kernels are looked up at the model's unsharded shape at every tp.

use serde_json::Value;

use crate::error::TablesError;
use crate::kernels::{GdnKernel, GdnShape};
use crate::model::ModelConfig;
use crate::quant::GemmQuant;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpSpec, logits_gemm, p2p, routed_experts};
use crate::step::types::{OpKind, Phase, Quants, StepError};

/// What a Qwen3.5 config adds to the generic fields (1.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Qwen35 {
    /// Layers of type `linear_attention` and `full_attention` (other
    /// values are not counted, as in the spec).
    pub linear: i64,
    pub full: i64,
    /// The unsharded GDN shape (the table's model key).
    pub gdn: GdnShape,
    /// `shared_expert_intermediate_size` (0: no shared expert).
    pub shared_inter: i64,
}

impl Qwen35 {
    pub fn from_config(cfg: &ModelConfig, layers: i64, hidden: i64) -> Result<Qwen35, StepError> {
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
                "Qwen3.5 layer_types length {} != num_hidden_layers {layers}",
                types.len()
            )));
        }
        let required = |key: &str| -> Result<i64, StepError> {
            match text.get(key) {
                Some(v) => v.as_i64().ok_or_else(|| corrupt(format!("`{key}`: expected an integer, found {v}"))),
                None => Err(corrupt(format!("`{key}` is missing (a Qwen3.5 config needs it)"))),
            }
        };
        let count = |name: &str| types.iter().filter(|t| **t == name).count() as i64;
        let shared_inter = match text.get("shared_expert_intermediate_size") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_i64()
                .ok_or_else(|| corrupt(format!("`shared_expert_intermediate_size`: expected an integer, found {v}")))?,
        };
        Ok(Qwen35 {
            linear: count("linear_attention"),
            full: count("full_attention"),
            gdn: GdnShape {
                d_model: hidden,
                k_heads: required("linear_num_key_heads")?,
                k_head_dim: required("linear_key_head_dim")?,
                v_heads: required("linear_num_value_heads")?,
                v_head_dim: required("linear_value_head_dim")?,
                d_conv: required("linear_conv_kernel_dim")?,
            },
            shared_inter,
        })
    }
}

/// Op names of one layer group: (attention side) and (FFN side).
struct Names {
    gdn: [&'static str; 6],
    full: [&'static str; 5],
    dense: [&'static str; 5],
    moe: [&'static str; 8],
}

const GDN_NAMES: Names = Names {
    gdn: ["gdn_norm", "gdn_in_proj_gemm", "gdn_conv1d", "gdn_scan", "gdn_out_proj_gemm", "gdn_ar"],
    full: ["", "", "", "", ""],
    dense: ["gdn_ffn_norm", "gdn_gate_ffn1_gemm", "gdn_act_gate", "gdn_ffn2_gemm", "gdn_ffn_ar"],
    moe: [
        "gdn_ffn_norm",
        "gdn_router_gemm",
        "gdn_moe_pre_dispatch",
        "gdn_moe",
        "gdn_moe_post_dispatch",
        "gdn_shared_up_gemm",
        "gdn_shared_relu2",
        "gdn_shared_down_gemm",
    ],
};

const FULL_NAMES: Names = Names {
    gdn: ["", "", "", "", "", ""],
    full: ["full_attn_norm", "qkv_gemm", "attention", "proj_gemm", "full_ar"],
    dense: ["full_ffn_norm", "full_gate_ffn1_gemm", "full_act_gate", "full_ffn2_gemm", "full_ffn_ar"],
    moe: [
        "full_ffn_norm",
        "full_router_gemm",
        "full_moe_pre_dispatch",
        "full_moe",
        "full_moe_post_dispatch",
        "full_shared_up_gemm",
        "full_shared_relu2",
        "full_shared_down_gemm",
    ],
};

/// The op list of `phase` (1.4 / 1.5).
pub(crate) fn op_list(model: &ModelDesc, q: &Qwen35, par: &Parallel, quants: &Quants, phase: Phase) -> Vec<Op> {
    let (h, tp) = (model.hidden, par.tp);
    let (n, n_kv, d) = (par.n, par.n_kv, model.head_dim);
    let op = |base, kind, count: f64, spec| Op { base, kind, count, spec };
    let gemm = |n: i64, k: i64, lp: bool| OpSpec::Gemm {
        n,
        k,
        quant: quants.gemm,
        m_is_batch: false,
        low_precision_input: lp,
    };
    let norm = OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h };
    let all_reduce = OpSpec::AllReduce { tp, hidden: h };
    let GdnShape { k_heads: nk, k_head_dim: hk, v_heads: nv, v_head_dim: hv, .. } = q.gdn;
    let context = phase == Phase::Context;

    let mut ops = vec![
        op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab / tp }),
        op("embedding_ar", OpKind::CustomAllReduce, 1.0, all_reduce),
    ];
    let ffn = |ops: &mut Vec<Op>, names: &Names, c: f64| {
        if model.experts == 0 {
            let (i2, i1) = ((2 * model.inter) / tp, model.inter / tp);
            ops.extend([
                op(names.dense[0], OpKind::ElementWise, c, norm),
                op(names.dense[1], OpKind::Gemm, c, gemm(i2, h, false)),
                op(names.dense[2], OpKind::ElementWise, c, OpSpec::ElementWise { dim_in: i2, dim_out: i1 }),
                op(names.dense[3], OpKind::Gemm, c, gemm(h, i1, true)),
                op(names.dense[4], OpKind::CustomAllReduce, c, all_reduce),
            ]);
            return;
        }
        ops.push(op(names.moe[0], OpKind::ElementWise, c, norm));
        if model.experts >= 128 {
            let router = OpSpec::Gemm {
                n: model.experts,
                k: h,
                quant: GemmQuant::Bfloat16,
                m_is_batch: false,
                low_precision_input: false,
            };
            ops.push(op(names.moe[1], OpKind::Gemm, c, router));
        }
        let moe = [names.moe[2], names.moe[3], names.moe[4]];
        ops.extend(routed_experts(moe, c, model, par, quants, (h, true), phase));
        if q.shared_inter > 0 {
            let s = q.shared_inter / tp;
            ops.extend([
                op(names.moe[5], OpKind::Gemm, c, gemm(s, h, false)),
                op(names.moe[6], OpKind::ElementWise, c, OpSpec::ElementWise { dim_in: s, dim_out: s }),
                op(names.moe[7], OpKind::Gemm, c, gemm(h, s, true)),
            ]);
        }
    };

    if q.linear > 0 {
        let (c, names) = (q.linear as f64, &GDN_NAMES);
        let kernel = |k| OpSpec::Gdn { kernel: k, shape: q.gdn };
        let (conv, scan, scan_name) = if context {
            (GdnKernel::ConvFn, GdnKernel::ChunkScan, names.gdn[3])
        } else {
            (GdnKernel::ConvUpdate, GdnKernel::Recurrence, "gdn_recurrence")
        };
        ops.extend([
            op(names.gdn[0], OpKind::ElementWise, c, norm),
            // The spec's "Q + K + V + gate + beta", its beta another key width.
            op(names.gdn[1], OpKind::Gemm, c, gemm((3 * nk * hk + 2 * nv * hv) / tp, h, false)),
            op(names.gdn[2], OpKind::GdnKernel, c, kernel(conv)),
            op(scan_name, OpKind::GdnKernel, c, kernel(scan)),
            op(names.gdn[4], OpKind::Gemm, c, gemm(h, (nv * hv) / tp, true)),
            op(names.gdn[5], OpKind::CustomAllReduce, c, all_reduce),
        ]);
        ffn(&mut ops, names, c);
    }
    if q.full > 0 {
        let (c, names) = (q.full as f64, &FULL_NAMES);
        let attention = if context {
            OpSpec::ContextAttention {
                n,
                n_kv,
                head_dim: d,
                window: 0,
                kv: quants.kv,
                fmha: quants.fmha,
                qk_norm: false,
            }
        } else {
            OpSpec::GenerationAttention { n, n_kv, head_dim: d, window: 0, kv: quants.kv }
        };
        let kind = if context { OpKind::ContextAttention } else { OpKind::GenerationAttention };
        ops.extend([
            op(names.full[0], OpKind::ElementWise, c, norm),
            op(names.full[1], OpKind::Gemm, c, gemm(n * d + n_kv * d * 2, h, false)),
            op(names.full[2], kind, c, attention),
            op(names.full[3], OpKind::Gemm, c, gemm(h, n * d, true)),
            op(names.full[4], OpKind::CustomAllReduce, c, all_reduce),
        ]);
        ffn(&mut ops, names, c);
    }
    ops.push(logits_gemm(model, tp, phase));
    ops.push(p2p(par, h));
    ops
}
