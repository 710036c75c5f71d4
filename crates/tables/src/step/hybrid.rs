//! HYBRIDMOE: Llama-4 Scout / Maverick and MiMo-V2-Flash
//! (docs/spec/families_hybrid_vl_databases.md 1). Layers differ in their
//! attention (global, or sliding-window / chunked "SWA") and their FFN (MoE
//! or dense SwiGLU); the spec prices each layer type as one group of ops
//! with the group's layer count, groups in the fixed order global_moe,
//! swa_moe, swa_dense, global_dense. No all-reduce is charged anywhere but
//! the MoE dispatch pair.

use serde_json::Value;

use crate::error::TablesError;
use crate::kernels::MoeShape;
use crate::model::ModelConfig;
use crate::quant::GemmQuant;
use crate::step::model::{ModelDesc, Parallel};
use crate::step::ops::{Op, OpSpec, logits_gemm};
use crate::step::types::{OpKind, Phase, Quants, StepError};

/// The per-layer patterns and the SWA dimension overrides (0 = the model's own).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hybrid {
    /// 1 = global attention, 0 = SWA.
    pub attn: Vec<i64>,
    /// 1 = MoE FFN, 0 = dense.
    pub moe: Vec<i64>,
    pub swa_kv_heads: i64,
    pub swa_head_dim: i64,
    pub swa_v_head_dim: i64,
    pub global_v_head_dim: i64,
    pub window: i64,
    pub dense_inter: i64,
}

fn int_or(cfg: &Value, key: &str, default: i64, path: &std::path::Path) -> Result<i64, StepError> {
    match cfg.get(key) {
        None => Ok(default),
        Some(v) => v.as_i64().ok_or_else(|| {
            StepError::Data(TablesError::document(path, format!("`{key}`: expected an integer, found {v}")))
        }),
    }
}

fn pattern(v: &Value, key: &str, path: &std::path::Path) -> Result<Vec<i64>, StepError> {
    v.as_array()
        .ok_or_else(|| StepError::Data(TablesError::document(path, format!("`{key}` must be a list"))))?
        .iter()
        .map(|x| {
            x.as_i64().ok_or_else(|| {
                StepError::Data(TablesError::document(path, format!("`{key}`: expected integers, found {x}")))
            })
        })
        .collect()
}

impl Hybrid {
    /// The spec's `HybridMoEConfig` of a checkpoint (1.1). MiMo's
    /// `hybrid_layer_pattern` is read with 1 = global, as the spec reads it
    /// (the checkpoint means the opposite; the goldens follow the spec).
    pub fn from_config(cfg: &ModelConfig, layers: i64) -> Result<Hybrid, StepError> {
        let (text, path) = (&cfg.text, cfg.path.as_path());
        let arch = cfg.architecture.as_deref().unwrap_or_default();
        let hybrid = if arch == "MiMoV2FlashForCausalLM" {
            let moe = match text.get("moe_layer_freq") {
                None => Vec::new(),
                Some(v @ Value::Array(_)) => pattern(v, "moe_layer_freq", path)?,
                Some(v) => {
                    let f = v.as_i64().ok_or_else(|| {
                        StepError::Data(TablesError::document(
                            path,
                            format!("`moe_layer_freq`: expected a list or an integer, found {v}"),
                        ))
                    })?;
                    vec![f; usize::try_from(layers).unwrap_or(0)]
                }
            };
            let attn = match text.get("hybrid_layer_pattern") {
                None => Vec::new(),
                Some(v) => pattern(v, "hybrid_layer_pattern", path)?,
            };
            if attn.len() as i64 != layers || moe.len() as i64 != layers {
                return Err(StepError::input(format!(
                    "Hybrid pattern length mismatch for {arch}: expected {layers} entries, got attn={} moe={}",
                    attn.len(),
                    moe.len()
                )));
            }
            if attn.iter().chain(&moe).any(|v| !(0..=1).contains(v)) {
                return Err(StepError::input(format!("Hybrid patterns for {arch} must contain only 0/1 values")));
            }
            Hybrid {
                attn,
                moe,
                swa_kv_heads: int_or(text, "swa_num_key_value_heads", 0, path)?,
                swa_head_dim: int_or(text, "swa_head_dim", 0, path)?,
                swa_v_head_dim: int_or(text, "swa_v_head_dim", 0, path)?,
                global_v_head_dim: int_or(text, "v_head_dim", 0, path)?,
                window: int_or(text, "sliding_window_size", 0, path)?,
                dense_inter: 0,
            }
        } else {
            // Llama-4: even layers local, odd global (1:1, not the real 3:1);
            // layer i is MoE when (i + 1) is a multiple of the interleave step.
            let step = match text.get("interleave_moe_layer_step") {
                None => 1,
                Some(v) => v.as_i64().filter(|s| *s > 0 && !v.is_boolean()).ok_or_else(|| {
                    StepError::input(format!("interleave_moe_layer_step must be a positive integer, got {v}"))
                })?,
            };
            Hybrid {
                attn: (0..layers).map(|i| i % 2).collect(),
                moe: (0..layers).map(|i| i64::from((i + 1) % step == 0)).collect(),
                swa_kv_heads: 0,
                swa_head_dim: 0,
                swa_v_head_dim: 0,
                global_v_head_dim: 0,
                window: int_or(text, "attention_chunk_size", 0, path)?,
                dense_inter: int_or(text, "intermediate_size_mlp", 0, path)?,
            }
        };
        Ok(hybrid)
    }

    /// Layer counts of (global_moe, swa_moe, swa_dense, global_dense).
    fn counts(&self) -> [i64; 4] {
        let mut c = [0; 4];
        for (&a, &m) in self.attn.iter().zip(&self.moe) {
            c[match (a, m) {
                (1, 1) => 0,
                (0, 1) => 1,
                (0, 0) => 2,
                _ => 3,
            }] += 1;
        }
        c
    }
}

/// One layer type's names and attention.
struct Group {
    count: i64,
    /// Names of the group's attention-side ops: attn_norm, qkv_gemm,
    /// proj_gemm, and the norm before the FFN.
    tag: &'static [&'static str; 4],
    /// Names of the FFN ops: router, pre dispatch, moe, post dispatch (MoE),
    /// or gate_up, act, down (dense).
    ffn: &'static [&'static str; 4],
    global: bool,
    moe: bool,
}

const GLOBAL_MOE: [&str; 4] = ["global_attn_norm", "global_qkv_gemm", "global_proj_gemm", "global_moe_norm"];
const SWA_MOE: [&str; 4] = ["swa_attn_norm", "swa_qkv_gemm", "swa_proj_gemm", "swa_moe_norm"];
const SWA_DENSE: [&str; 4] = ["swa_dense_attn_norm", "swa_dense_qkv_gemm", "swa_dense_proj_gemm", "swa_dense_ffn_norm"];
const GLOBAL_DENSE: [&str; 4] =
    ["global_dense_attn_norm", "global_dense_qkv_gemm", "global_dense_proj_gemm", "global_dense_ffn_norm"];
const GLOBAL_FFN: [&str; 4] =
    ["global_router_gemm", "global_moe_pre_dispatch", "global_moe", "global_moe_post_dispatch"];
const SWA_FFN: [&str; 4] = ["swa_router_gemm", "swa_moe_pre_dispatch", "swa_moe", "swa_moe_post_dispatch"];
const GLOBAL_DENSE_FFN: [&str; 4] = ["global_dense_gate_up_gemm", "global_dense_act", "global_dense_down_gemm", ""];
const SWA_DENSE_FFN: [&str; 4] = ["swa_dense_gate_up_gemm", "swa_dense_act", "swa_dense_down_gemm", ""];

/// The op list of `phase` (1.4 / 1.5).
pub(crate) fn op_list(model: &ModelDesc, hybrid: &Hybrid, par: &Parallel, quants: &Quants, phase: Phase) -> Vec<Op> {
    let (h, tp) = (model.hidden, par.tp);
    let d = model.head_dim;
    let or = |v: i64, default: i64| if v > 0 { v } else { default };
    let swa_kv = or(hybrid.swa_kv_heads, model.kv_heads);
    let swa_hd = or(hybrid.swa_head_dim, d);
    let swa_vhd = or(hybrid.swa_v_head_dim, d);
    let glob_vhd = or(hybrid.global_v_head_dim, d);
    let swa_nkv = (swa_kv + tp - 1).div_euclid(tp);
    let glob_nkv = (model.kv_heads + tp - 1).div_euclid(tp);
    let dense_ipt = or(hybrid.dense_inter, model.inter) / tp;
    let n = model.heads / tp;
    let op = |base, kind, count: f64, spec| Op { base, kind, count, spec };
    let gemm = |n: i64, k: i64, quant: GemmQuant, lp: bool| OpSpec::Gemm {
        n,
        k,
        quant,
        m_is_batch: false,
        low_precision_input: lp,
    };
    let norm = OpSpec::ElementWise { dim_in: 2 * h, dim_out: 2 * h };
    let counts = hybrid.counts();
    let groups = [
        Group { count: counts[0], tag: &GLOBAL_MOE, ffn: &GLOBAL_FFN, global: true, moe: true },
        Group { count: counts[1], tag: &SWA_MOE, ffn: &SWA_FFN, global: false, moe: true },
        Group { count: counts[2], tag: &SWA_DENSE, ffn: &SWA_DENSE_FFN, global: false, moe: false },
        Group { count: counts[3], tag: &GLOBAL_DENSE, ffn: &GLOBAL_DENSE_FFN, global: true, moe: false },
    ];
    let mut ops = vec![op("embedding", OpKind::Embedding, 1.0, OpSpec::Embedding { hidden: h, rows: model.vocab })];
    for g in groups.iter().filter(|g| g.count > 0) {
        let c = g.count as f64;
        let (n_kv, head, v_head, window) =
            if g.global { (glob_nkv, d, glob_vhd, 0) } else { (swa_nkv, swa_hd, swa_vhd, hybrid.window) };
        let qkv = model.heads * head / tp + n_kv * (head + v_head);
        let proj_k = model.heads * v_head / tp;
        let attention = match phase {
            Phase::Context => op(
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
            ),
            Phase::Generation => op(
                "attention",
                OpKind::GenerationAttention,
                c,
                OpSpec::GenerationAttention { n, n_kv, head_dim: head, window, kv: quants.kv },
            ),
        };
        ops.extend([
            op(g.tag[0], OpKind::ElementWise, c, norm),
            op(g.tag[1], OpKind::Gemm, c, gemm(qkv, h, quants.gemm, false)),
            attention,
            op(g.tag[2], OpKind::Gemm, c, gemm(h, proj_k, quants.gemm, true)),
            op(g.tag[3], OpKind::ElementWise, c, norm),
        ]);
        if g.moe {
            if model.experts >= 128 {
                ops.push(op(g.ffn[0], OpKind::Gemm, c, gemm(model.experts, h, GemmQuant::Bfloat16, false)));
            }
            let dispatch = |pre| OpSpec::MoeDispatch {
                hidden: h,
                moe_tp: par.moe_tp,
                moe_ep: par.moe_ep,
                dp: par.dp,
                // Context parallelism reaches both phases' exchanges; only
                // the context step's is a context one.
                cp: par.cp,
                context: phase == Phase::Context,
                pre,
                quant: None,
            };
            ops.extend([
                op(g.ffn[1], OpKind::MoEDispatch, c, dispatch(true)),
                op(
                    g.ffn[2],
                    OpKind::MoE,
                    c,
                    OpSpec::Moe {
                        shape: MoeShape {
                            hidden: h,
                            inter: model.moe_inter,
                            topk: model.topk,
                            experts: model.experts,
                            moe_tp: par.moe_tp,
                            moe_ep: par.moe_ep,
                            quant: quants.moe,
                            gated: true,
                            distribution: model.distribution,
                        },
                        dp: par.dp,
                    },
                ),
                op(g.ffn[3], OpKind::MoEDispatch, c, dispatch(false)),
            ]);
        } else {
            ops.extend([
                op(g.ffn[0], OpKind::Gemm, c, gemm(2 * dense_ipt, h, quants.gemm, false)),
                op(g.ffn[1], OpKind::ElementWise, c, OpSpec::ElementWise { dim_in: 2 * dense_ipt, dim_out: dense_ipt }),
                op(g.ffn[2], OpKind::Gemm, c, gemm(h, dense_ipt, quants.gemm, true)),
            ]);
        }
    }
    ops.push(logits_gemm(model, tp, phase));
    ops.push(crate::step::ops::p2p(par, h));
    if phase == Phase::Context && par.cp > 1 {
        // One KV all-gather per layer type, after the whole list: each type's
        // own KV width, sized by the full new-token count (the window caps
        // what is kept, not what is gathered). Integer bytes, then halves.
        let gather = |base, layers: i64, n_kv: i64, k_head: i64, v_head: i64| Op {
            base,
            kind: OpKind::Nccl,
            count: layers as f64,
            spec: OpSpec::CpAllGather {
                gpus: par.cp,
                elements_per_token: (n_kv * (k_head + v_head) * quants.kv.memory()) as f64 / 2.0,
            },
        };
        let (global, swa) = (counts[0] + counts[3], counts[1] + counts[2]);
        if global > 0 {
            ops.push(gather("cp_all_gather_global", global, glob_nkv, d, glob_vhd));
        }
        if swa > 0 {
            ops.push(gather("cp_all_gather_swa", swa, swa_nkv, swa_hd, swa_vhd));
        }
    }
    ops
}
