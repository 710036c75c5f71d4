//! Qwen3-VL's vision encoder (docs/spec/options.md 4; the spec's
//! `VisionEncoderConfig`, `vit_ops.build_encoder_ops` and the backends'
//! encoder phase): the ViT's dimensions from the checkpoint's
//! `vision_config`, how many tokens an image becomes, and the op list that
//! runs once per prefill before the language model's context phase.
//!
//! The encoder runs in bfloat16 whatever the checkpoint's or the caller's
//! quant modes. Under encoder data parallelism (the default) every rank
//! holds the whole ViT and encodes its share of the images, and the
//! projected embeddings are all-gathered at the end; without it the ViT is
//! sharded over the tensor-parallel ranks like the language model.

use serde_json::Value;

use crate::step::ops::{Op, OpSpec};
use crate::step::types::{OpKind, StepError};

/// The spec's rotary factor of Qwen3-VL's ViT: it only gates the
/// `encoder_rope_apply` op (the vision RoPE rotates the full head).
const PARTIAL_ROTARY_FACTOR: f64 = 0.5;

/// The ViT of a vision-language checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vision {
    pub depth: i64,
    pub hidden: i64,
    pub heads: i64,
    pub inter: i64,
    /// Pixels per patch side.
    pub patch: i64,
    /// Patches merged per side into one language-model token.
    pub merge: i64,
    /// The projector's output width (the language model's hidden size).
    pub out_hidden: i64,
    /// Projector instances: the final merger plus one per deepstack layer.
    pub projectors: i64,
}

/// An image's tokens: after the merge (what the language model reads) and
/// before it (the ViT's patches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageTokens {
    pub post_merge: i64,
    pub pre_merge: i64,
}

impl Vision {
    /// The `vision_config` object of a checkpoint; a missing or non-integer
    /// field is an error naming it (the spec fails with a KeyError).
    pub(crate) fn from_config(v: &Value, path: &std::path::Path) -> Result<Vision, StepError> {
        let field = |name: &str| -> Result<i64, StepError> {
            v.get(name).and_then(Value::as_i64).filter(|&x| x > 0).ok_or_else(|| {
                StepError::Data(crate::error::TablesError::document(
                    path,
                    format!("`vision_config.{name}` must be a positive integer"),
                ))
            })
        };
        let deepstack = match v.get("deepstack_visual_indexes") {
            None | Some(Value::Null) => 0,
            Some(Value::Array(a)) => a.len() as i64,
            Some(other) => {
                return Err(StepError::Data(crate::error::TablesError::document(
                    path,
                    format!("`vision_config.deepstack_visual_indexes` must be a list, found {other}"),
                )));
            }
        };
        // The spec reads it into its config (a KeyError when absent); images only.
        field("temporal_patch_size")?;
        Ok(Vision {
            depth: field("depth")?,
            hidden: field("hidden_size")?,
            heads: field("num_heads")?,
            inter: field("intermediate_size")?,
            patch: field("patch_size")?,
            merge: field("spatial_merge_size")?,
            out_hidden: field("out_hidden_size")?,
            projectors: 1 + deepstack,
        })
    }

    /// Tokens of one `height` x `width` image (options.md 4.3), floored per
    /// side; `None` when either side is 0 or the image is smaller than a
    /// merged patch (the spec's text-only path).
    pub fn image_tokens(&self, height: u32, width: u32) -> Option<ImageTokens> {
        if height == 0 || width == 0 {
            return None;
        }
        let (h, w) = (i64::from(height), i64::from(width));
        let stride = self.patch * self.merge;
        let tokens =
            ImageTokens { post_merge: (h / stride) * (w / stride), pre_merge: (h / self.patch) * (w / self.patch) };
        (tokens.post_merge > 0 && tokens.pre_merge > 0).then_some(tokens)
    }

    /// The encoder's op list on a worker of `tp` GPUs (options.md 4.5): the
    /// ViT blocks and the projector, sharded over `tp` without encoder data
    /// parallelism (which needs the heads and the FFN width divisible by
    /// it), whole with it, plus the final all-gather when `tp > 1`.
    pub(crate) fn ops(&self, tp: i64, encoder_dp: bool) -> Result<Vec<Op>, StepError> {
        let shard = if encoder_dp { 1 } else { tp };
        let mut ops = self.transformer_ops(shard)?;
        ops.extend(self.projector_ops(shard));
        if encoder_dp && tp > 1 {
            ops.push(Op {
                base: "encoder_dp_all_gather",
                kind: OpKind::Nccl,
                count: 1.0,
                spec: OpSpec::CpAllGather {
                    gpus: tp,
                    elements_per_token: (self.out_hidden * self.projectors * tp) as f64,
                },
            });
        }
        Ok(ops)
    }

    fn transformer_ops(&self, tp: i64) -> Result<Vec<Op>, StepError> {
        let (depth, h, n, inter) = (self.depth as f64, self.hidden, self.heads, self.inter);
        let d = h / n;
        if tp > 1 {
            if n % tp != 0 {
                return Err(StepError::Refused(format!("ViT num_heads ({n}) must be divisible by tp_size ({tp})")));
            }
            if inter % tp != 0 {
                return Err(StepError::Refused(format!(
                    "ViT intermediate_size ({inter}) must be divisible by tp_size ({tp})"
                )));
            }
        }
        let op = |base, kind, spec| Op { base, kind, count: depth, spec };
        let elementwise = |dim: i64| OpSpec::ElementWise { dim_in: dim, dim_out: dim };
        let mut ops = vec![
            op("encoder_add_norm_1", OpKind::ElementWise, elementwise(2 * h)),
            op("encoder_qkv_gemm", OpKind::Gemm, gemm(3 * n * d / tp, h, false)),
            op("encoder_attention", OpKind::EncoderAttention, OpSpec::EncoderAttention { n: n / tp, head_dim: d }),
            op("encoder_proj_gemm", OpKind::Gemm, gemm(h, n * d / tp, true)),
            op("encoder_ar_1", OpKind::CustomAllReduce, OpSpec::AllReduce { tp, hidden: h }),
            op("encoder_add_norm_2", OpKind::ElementWise, elementwise(2 * h)),
            op("encoder_ffn1_gemm", OpKind::Gemm, gemm(inter / tp, h, false)),
            op("encoder_act", OpKind::ElementWise, elementwise(inter / tp)),
            op("encoder_ffn2_gemm", OpKind::Gemm, gemm(h, inter / tp, true)),
            op("encoder_ar_2", OpKind::CustomAllReduce, OpSpec::AllReduce { tp, hidden: h }),
        ];
        if PARTIAL_ROTARY_FACTOR > 0.0 {
            ops.push(op("encoder_rope_apply", OpKind::ElementWise, elementwise(6 * (n / tp) * d)));
        }
        Ok(ops)
    }

    /// Qwen3-VL's two-layer merger: a row-parallel first layer and its
    /// activation, a column-parallel second layer, the all-reduce.
    fn projector_ops(&self, tp: i64) -> Vec<Op> {
        let merged = self.hidden * self.merge * self.merge;
        let op = |base, kind, spec| Op { base, kind, count: self.projectors as f64, spec };
        vec![
            op("encoder_projector_fc0_gemm", OpKind::Gemm, gemm(merged / tp, merged, false)),
            op(
                "encoder_projector_fc0_act",
                OpKind::ElementWise,
                OpSpec::ElementWise { dim_in: merged / tp, dim_out: merged / tp },
            ),
            op("encoder_projector_fc1_gemm", OpKind::Gemm, gemm(self.out_hidden, merged / tp, false)),
            op("encoder_projector_ar", OpKind::CustomAllReduce, OpSpec::AllReduce { tp, hidden: self.out_hidden }),
        ]
    }
}

fn gemm(n: i64, k: i64, low_precision_input: bool) -> OpSpec {
    OpSpec::Gemm { n, k, quant: crate::quant::GemmQuant::Bfloat16, m_is_batch: false, low_precision_input }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen3-VL-8B's ViT (its checkpoint's `vision_config`).
    fn qwen3_vl_8b() -> Vision {
        let config = serde_json::json!({
            "deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
            "num_heads": 16, "out_hidden_size": 4096, "patch_size": 16, "spatial_merge_size": 2,
            "temporal_patch_size": 2
        });
        Vision::from_config(&config, std::path::Path::new("config.json")).expect("a valid vision_config")
    }

    #[test]
    fn an_image_becomes_merged_tokens() {
        let v = qwen3_vl_8b();
        assert_eq!(v.projectors, 4);
        // options.md 4.3: a 448 x 448 image is 784 patches, 196 tokens after the 2 x 2 merge.
        assert_eq!(v.image_tokens(448, 448), Some(ImageTokens { post_merge: 196, pre_merge: 784 }));
        assert_eq!(v.image_tokens(1024, 768), Some(ImageTokens { post_merge: 32 * 24, pre_merge: 64 * 48 }));
        // Smaller than a merged patch, or a side of 0: the text-only path.
        assert_eq!(v.image_tokens(10, 10), None);
        assert_eq!(v.image_tokens(0, 448), None);
    }

    #[test]
    fn the_encoder_op_list() {
        let v = qwen3_vl_8b();
        let names = |ops: &[Op]| ops.iter().map(|o| o.base).collect::<Vec<_>>();
        // Encoder DP on 2 GPUs: the whole ViT (11 block ops, 4 projector ops) and the all-gather.
        let dp = v.ops(2, true).expect("builds");
        assert_eq!(dp.len(), 16);
        assert_eq!(dp.last().map(|o| o.base), Some("encoder_dp_all_gather"));
        let Some(OpSpec::Gemm { n, k, .. }) = dp.iter().find(|o| o.base == "encoder_qkv_gemm").map(|o| o.spec) else {
            panic!("no qkv GEMM: {:?}", names(&dp))
        };
        assert_eq!((n, k), (3 * 1152, 1152));
        // Sharded over 2: no all-gather, the GEMMs split; 3 does not divide 16 heads.
        let tp = v.ops(2, false).expect("builds");
        assert_eq!(tp.len(), 15);
        let Some(OpSpec::EncoderAttention { n, head_dim }) =
            tp.iter().find(|o| o.base == "encoder_attention").map(|o| o.spec)
        else {
            panic!("no attention: {:?}", names(&tp))
        };
        assert_eq!((n, head_dim), (8, 72));
        let refused = v.ops(3, false).expect_err("16 heads over 3");
        assert!(refused.to_string().contains("ViT num_heads (16) must be divisible by tp_size (3)"), "{refused}");
        assert!(v.ops(3, true).is_ok(), "encoder DP shards no weights");
    }

    #[test]
    fn a_broken_vision_config_names_the_field() {
        let config = serde_json::json!({"depth": 27, "hidden_size": 1152});
        let e = Vision::from_config(&config, std::path::Path::new("x_config.json")).expect_err("incomplete");
        assert!(e.to_string().contains("vision_config.temporal_patch_size"), "{e}");
    }
}
