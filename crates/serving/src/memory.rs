//! The spec's memory model of one GPU (`_get_memory_usage`): weights,
//! activations, KV cache, NCCL buffers and other runtime memory, in GiB, and
//! its two checks (OOM, and TRT-LLM's KV budget).
//!
//! The arithmetic follows the spec's expression order; its integer products
//! stay below 2^53, so `f64` reproduces Python's int/float mix exactly.

use aicsql_tables::MemoryInputs;

use crate::backend::Backend;
use crate::error::ServingError;
use crate::parallel::Parallel;

pub(crate) const GIB: f64 = (1u64 << 30) as f64;

/// Memory of one GPU, GiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Memory {
    pub weights: f64,
    pub activations: f64,
    pub kvcache: f64,
    pub nccl: f64,
    pub others: f64,
    pub total: f64,
}

/// `(nccl, others)` are the system's NCCL and runtime memory (bytes);
/// `verified_tokens` is MTP's `nextn + 1` (1 without MTP).
///
/// Where the memory is sized: `batch` sequences of `isl + osl` tokens (or
/// `max_seq_len`), activations for `num_tokens` (0: `(isl - prefix) * batch`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemoryAt {
    pub batch: f64,
    pub isl: f64,
    pub osl: f64,
    pub num_tokens: f64,
    pub prefix: f64,
    pub max_seq_len: Option<f64>,
    /// The image encoder's (weights, activations) in bytes, added after
    /// everything else: not over pp, not times MTP's tokens, no backend
    /// overhead (options.md 4.7).
    pub encoder: Option<(f64, f64)>,
}

impl Memory {
    pub(crate) fn compute(
        backend: Backend,
        m: &MemoryInputs,
        parallel: &Parallel,
        moe_ep: i64,
        (nccl, others): (f64, f64),
        at: MemoryAt,
        verified_tokens: u32,
    ) -> Result<Memory, ServingError> {
        let mut weights = m.weights_bytes / f64::from(parallel.pp);
        let h = m.attention_width as f64;
        let num_tokens = if at.num_tokens == 0.0 { (at.isl - at.prefix) * at.batch } else { at.num_tokens };
        let coefficient = backend.activation_coefficient(m.family, parallel.tp)?;
        let mut activations = 2.0 * num_tokens * h * coefficient;
        if Backend::has_moe_workspace(m.family) && m.experts != 0 {
            let width = backend.moe_workspace_width(m.family, m.attention_width, m.hidden) as f64;
            activations +=
                num_tokens * width * f64::from(parallel.dp) * m.experts as f64 * m.topk as f64 / moe_ep as f64 / 128.0
                    * 4.0;
        }
        let floor = backend.min_activation_bytes();
        if floor > activations {
            activations = floor;
        }
        // MTP verifies `nextn + 1` tokens per step: every estimate's
        // activations scale with them (options.md 2.3 item 4).
        if verified_tokens > 1 {
            activations *= f64::from(verified_tokens);
        }
        let mut others = others;
        if let Some((activation_overhead, others_overhead)) = backend.overheads() {
            activations *= activation_overhead;
            others *= others_overhead;
        }
        let seq_tokens = at.max_seq_len.unwrap_or(at.isl + at.osl).max(0.0);
        let per_sequence = m.kv_bytes_per_sequence(seq_tokens);
        // The spec divides by the CP KV divisor, always 1.
        let kvcache = at.batch * per_sequence;
        if let Some((encoder_weights, encoder_activations)) = at.encoder {
            weights += encoder_weights;
            activations += encoder_activations;
        }
        Ok(Memory {
            total: (weights + activations + kvcache + nccl + others) / GIB,
            weights: weights / GIB,
            activations: activations / GIB,
            kvcache: kvcache / GIB,
            nccl: nccl / GIB,
            others: others / GIB,
        })
    }

    /// The spec's OOM rule: the total reaches the GPU's capacity.
    pub fn fits(&self, mem_capacity_bytes: f64) -> bool {
        self.total < mem_capacity_bytes / GIB
    }

    /// TRT-LLM's KV check: the KV cache exceeds the free-memory fraction of
    /// what the rest leaves (after the allocator's reserve and a tolerance).
    pub(crate) fn exceeds_kv_budget(&self, mem_capacity_bytes: f64, budget: (f64, f64, f64)) -> bool {
        let (fraction, reserved, tolerance) = budget;
        let non_kv = self.total - self.kvcache;
        let available = (mem_capacity_bytes / GIB - non_kv) * fraction * (1.0 - reserved) * (1.0 - tolerance);
        self.kvcache > available
    }
}
