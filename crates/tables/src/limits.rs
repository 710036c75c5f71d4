//! Bounds on the work of one estimate. No real deployment comes near them;
//! they exist so that one call in a SQL scan cannot run for minutes (a
//! decode step costs `osl / 32` sampled steps) or overflow the byte counts
//! the ops form (`tokens * width * 2` must stay inside `i64`). Beyond a
//! limit a call is an error naming the argument and the limit.

/// Requests in one step (`batch`).
pub const MAX_BATCH: u32 = 65_536;
/// Input sequence length (`isl`), tokens: 16 Mi.
pub const MAX_ISL: u32 = 1 << 24;
/// Output sequence length (`osl`), tokens: 1 Mi, i.e. at most 32,768 sampled decode steps.
pub const MAX_OSL: u32 = 1 << 20;
/// Tokens of one context step (`batch * isl`): 4 Gi.
pub const MAX_TOKENS: u64 = 1 << 32;
/// Any one parallel degree (`tp`, `moe_tp`, `moe_ep`), GPUs.
pub const MAX_PARALLEL: u32 = 4_096;
/// MTP draft tokens per decode step (real checkpoints ship 1 to 3 MTP
/// layers; a decode step then verifies `nextn + 1` tokens per request).
pub const MAX_NEXTN: u32 = 64;

/// `value` of `argument` checked against its `limit`.
pub fn check(argument: &str, value: u64, limit: u64) -> Result<(), String> {
    if value > limit {
        return Err(format!("{argument} = {value} exceeds the limit of {limit} (aicsql bounds the work of one call)"));
    }
    Ok(())
}
