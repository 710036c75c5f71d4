//! NEMOTRONH: Nemotron-H hybrids of Mamba-2, attention, MoE and dense-MLP
//! layers (docs/spec/families_nemotron.md 1). The layer pattern decides
//! everything: the spec prices each layer type as one group, in the fixed
//! order Mamba, attention, MoE, MLP. The Mamba-2 kernels are looked up at
//! the model's unsharded dimensions at every tp; the experts are not gated.

use serde_json::Value;

use crate::error::TablesError;
use crate::kernels::{Mamba2Kernel, Mamba2Shape};
use crate::model::ModelConfig;
use crate::quant::GemmQuant;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpSpec, logits_gemm, p2p, routed_experts};
use crate::step::types::{OpKind, Phase, Quants, StepError};

/// What a Nemotron-H config adds to the generic fields (1.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NemotronH {
    /// Layers per type: Mamba (`M`), MoE (`E`), attention (`*`), MLP (`-`).
    pub mamba: i64,
    pub moe: i64,
    pub attention: i64,
    pub mlp: i64,
    /// The pattern's length (the layer count when the config names none).
    pub pattern_len: i64,
    /// The unsharded Mamba-2 dimensions (the table's model key, `d_model` = hidden).
    pub mamba_shape: Mamba2Shape,
    /// `moe_shared_expert_intermediate_size` (0 when absent).
    pub shared_inter: i64,
    /// `moe_latent_size` (0: experts at the hidden width).
    pub latent: i64,
}

const BLOCK_TYPES: [(&str, char); 10] = [
    ("*", '*'),
    ("-", '-'),
    ("E", 'E'),
    ("M", 'M'),
    ("attention", '*'),
    ("dense", '-'),
    ("ffn", '-'),
    ("mamba", 'M'),
    ("mlp", '-'),
    ("moe", 'E'),
];

impl NemotronH {
    pub fn from_config(cfg: &ModelConfig, hidden: i64) -> Result<NemotronH, StepError> {
        let (text, path) = (&cfg.text, cfg.path.as_path());
        let corrupt = |what: String| StepError::Data(TablesError::document(path, what));
        let pattern: String = match (text.get("hybrid_override_pattern"), text.get("layers_block_type")) {
            (Some(Value::String(p)), _) => p.clone(),
            (_, Some(Value::Array(blocks))) => blocks
                .iter()
                .map(|b| {
                    let name = b.as_str().unwrap_or_default();
                    BLOCK_TYPES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c).ok_or_else(|| {
                        let supported: Vec<&str> = BLOCK_TYPES.iter().map(|(n, _)| *n).collect();
                        StepError::input(format!(
                            "Unsupported NemotronH layer block type '{}'. Supported values: {}",
                            b.as_str().map_or_else(|| b.to_string(), str::to_string),
                            supported.join(", ")
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(StepError::input(
                    "NemotronH config must define 'hybrid_override_pattern' or 'layers_block_type'.",
                ));
            }
        };
        let int = |key: &str| -> Result<Option<i64>, StepError> {
            match text.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => {
                    v.as_i64().map(Some).ok_or_else(|| corrupt(format!("`{key}`: expected an integer, found {v}")))
                }
            }
        };
        let required =
            |key: &str| int(key)?.ok_or_else(|| corrupt(format!("`{key}` is missing (a Nemotron-H config needs it)")));
        let count = |c: char| pattern.chars().filter(|x| *x == c).count() as i64;
        // Absent means 0; a null only matters (and fails, as in the spec)
        // where MoE layers need the width.
        let shared_inter = match text.get("moe_shared_expert_intermediate_size") {
            None => Some(0),
            Some(_) => int("moe_shared_expert_intermediate_size")?,
        };
        let shared_inter = match shared_inter {
            Some(width) => width,
            None if count('E') == 0 => 0,
            None => {
                return Err(StepError::input(
                    "NemotronH: moe_shared_expert_intermediate_size is null, but the pattern has MoE layers",
                ));
            }
        };
        Ok(NemotronH {
            mamba: count('M'),
            moe: count('E'),
            attention: count('*'),
            mlp: count('-'),
            pattern_len: pattern.chars().count() as i64,
            mamba_shape: Mamba2Shape {
                d_model: hidden,
                d_state: required("ssm_state_size")?,
                d_conv: required("conv_kernel")?,
                heads: required("mamba_num_heads")?,
                head_dim: required("mamba_head_dim")?,
                groups: required("n_groups")?,
                chunk: required("chunk_size")?,
            },
            shared_inter,
            latent: int("moe_latent_size")?.unwrap_or(0),
        })
    }
}

/// The op list of `phase` (1.4 / 1.5).
pub(crate) fn op_list(model: &ModelDesc, nh: &NemotronH, par: &Parallel, quants: &Quants, phase: Phase) -> Vec<Op> {
    let (h, tp, d) = (model.hidden, par.tp, model.head_dim);
    let (n, n_kv) = (par.n, par.n_kv);
    let context = phase == Phase::Context;
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
    let shape = nh.mamba_shape;

    let mut ops = vec![op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab })];
    if nh.mamba > 0 {
        let c = nh.mamba as f64;
        let heads = shape.heads / tp;
        let inner = heads * shape.head_dim;
        let in_proj = 2 * inner + 2 * (shape.groups / tp) * shape.d_state + heads;
        let (conv, scan) = if context {
            (Mamba2Kernel::ConvFn, Mamba2Kernel::ChunkScan)
        } else {
            (Mamba2Kernel::ConvUpdate, Mamba2Kernel::StateUpdate)
        };
        ops.extend([
            op("mamba_norm", OpKind::ElementWise, c, norm),
            op("mamba_in_proj_gemm", OpKind::Gemm, c, gemm(in_proj, h, false)),
            op("mamba_conv1d", OpKind::Mamba2Kernel, c, OpSpec::Mamba2 { kernel: conv, shape }),
            op("mamba_ssm", OpKind::Mamba2Kernel, c, OpSpec::Mamba2 { kernel: scan, shape }),
            op("mamba_out_proj_gemm", OpKind::Gemm, c, gemm(h, inner, false)),
            op("mamba_ar", OpKind::CustomAllReduce, c, all_reduce),
        ]);
    }
    if nh.attention > 0 {
        let c = nh.attention as f64;
        let width = (model.heads * d) / tp;
        let attention = if context {
            let spec = OpSpec::ContextAttention {
                n,
                n_kv,
                head_dim: d,
                window: 0,
                kv: quants.kv,
                fmha: quants.fmha,
                qk_norm: false,
            };
            op("attention", OpKind::ContextAttention, c, spec)
        } else {
            let spec = OpSpec::GenerationAttention { n, n_kv, head_dim: d, window: 0, kv: quants.kv };
            op("attention", OpKind::GenerationAttention, c, spec)
        };
        ops.extend([
            op("attn_norm", OpKind::ElementWise, c, norm),
            op("qkv_gemm", OpKind::Gemm, c, gemm(width + d * n_kv * 2, h, false)),
            attention,
            op("proj_gemm", OpKind::Gemm, c, gemm(h, width, true)),
            op("attn_ar", OpKind::CustomAllReduce, c, all_reduce),
        ]);
    }
    if nh.moe > 0 {
        let c = nh.moe as f64;
        let shared = nh.shared_inter / tp;
        let moe_hidden = if nh.latent > 0 { nh.latent } else { h };
        let router = OpSpec::Gemm {
            n: model.experts,
            k: h,
            quant: GemmQuant::Bfloat16,
            m_is_batch: false,
            low_precision_input: false,
        };
        ops.extend([
            op("moe_norm", OpKind::ElementWise, c, norm),
            op("shared_up_gemm", OpKind::Gemm, c, gemm(shared, h, false)),
            op("shared_relu2", OpKind::ElementWise, c, OpSpec::ElementWise { dim_in: shared, dim_out: shared }),
            op("shared_down_gemm", OpKind::Gemm, c, gemm(h, shared, true)),
            op("router_gemm", OpKind::Gemm, c, router),
        ]);
        if nh.latent > 0 {
            ops.push(op("fc1_latent_proj_gemm", OpKind::Gemm, c, gemm(nh.latent / tp, h, false)));
        }
        let moe = ["moe_pre_dispatch", "moe", "moe_post_dispatch"];
        ops.extend(routed_experts(moe, c, model, par, quants, (moe_hidden, false), phase));
        if nh.latent > 0 {
            ops.push(op("fc2_latent_proj_gemm", OpKind::Gemm, c, gemm(h, nh.latent / tp, true)));
        }
        ops.push(op("moe_ar", OpKind::CustomAllReduce, c, all_reduce));
    }
    if nh.mlp > 0 {
        let c = nh.mlp as f64;
        let inter = model.inter / tp;
        ops.extend([
            op("mlp_norm", OpKind::ElementWise, c, norm),
            op("mlp_up_gemm", OpKind::Gemm, c, gemm(inter, h, false)),
            op("mlp_relu2", OpKind::ElementWise, c, OpSpec::ElementWise { dim_in: inter, dim_out: inter }),
            op("mlp_down_gemm", OpKind::Gemm, c, gemm(h, inter, false)),
            op("mlp_ar", OpKind::CustomAllReduce, c, all_reduce),
        ]);
    }
    // The hand-off before the logits, unlike LLAMA's list.
    ops.push(p2p(par, h));
    ops.push(logits_gemm(model, tp, phase));
    ops
}
