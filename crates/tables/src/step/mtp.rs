//! MTP speculative decoding in the step (docs/spec/options.md 2.3): a
//! decode iteration runs `L + nextn` layers' worth of work, so every
//! generation op counts `mtp = (nextn + L) / L` times its plain count, and
//! verifies `nextn + 1` tokens per request. Context ops are never scaled.
//!
//! The spec writes each op's count as one expression per family file; for
//! every family aicsql prices, each is `plain * mtp` or provably the same
//! double (GPT-OSS's windowed attention is `L * mtp / 2`, and halving is
//! exact), so one rule scales them all. Composite ops (a fallback, an
//! overlap) carry a count of 1 that the spec never applies: their inner ops
//! carry the scaled counts. (TRT-LLM's wide-EP DeepSeek models, not priced
//! yet, write `L * mtp * 0.9`, which is not `(L * 0.9) * mtp`.)

use crate::model::ModelConfig;
use crate::step::model::ModelDesc;
use crate::step::ops::{Op, OpSpec};
use crate::step::types::StepError;

/// The checkpoint's MTP layers, `num_nextn_predict_layers` of the language
/// model's config (0 when absent or null): what `nextn = 'auto'` resolves to.
pub(crate) fn checkpoint_depth(cfg: &ModelConfig) -> Result<u32, StepError> {
    let layers = cfg.int("num_nextn_predict_layers").map_err(|e| StepError::input(e.to_string()))?.unwrap_or(0);
    u32::try_from(layers).map_err(|_| {
        StepError::input(format!(
            "{}: num_nextn_predict_layers = {layers} is not a number of layers",
            cfg.path.display()
        ))
    })
}

/// The spec's `mtp_scale_factor`: `(nextn + L) / L` in floating point, 1.0
/// without MTP.
pub(crate) fn scale_factor(nextn: u32, layers: i64) -> f64 {
    if nextn == 0 { 1.0 } else { (f64::from(nextn) + layers as f64) / layers as f64 }
}

/// Scales the counts of a generation op list (`ops` and the inner ops of
/// its composites) for `nextn` draft tokens, each in the association order
/// of the spec's expression for it.
pub(crate) fn scale_generation_counts(model: &ModelDesc, nextn: u32, ops: &mut [Op], subs: &mut [Op]) {
    if nextn == 0 {
        return;
    }
    let mtp = scale_factor(nextn, model.layers);
    for op in ops.iter_mut().chain(subs.iter_mut()) {
        if !matches!(op.spec, OpSpec::Fallback { .. } | OpSpec::Overlap { .. }) {
            op.count *= mtp;
        }
    }
}
