//! MTP speculative decoding above the step (docs/spec/options.md 2): the
//! step prices one verification iteration of `nextn + 1` tokens per request
//! (`StepModel::with_nextn`); the average number of accepted draft tokens
//! turns that iteration cost into service metrics here, as the spec's
//! acceptance projection does: TPOT divided by `1 + accepted`, the request
//! rates multiplied by it (capped by Little's law on vLLM), all at the
//! spec's three decimals.

use aicsql_tables::pymath::np_round;

use crate::agg::AggEstimate;
use crate::backend::Backend;
use crate::disagg::StaticRow;
use crate::error::ServingError;

/// The draft depth an estimate asks for: a number, or the checkpoint's own
/// (`num_nextn_predict_layers`, the spec's `nextn = 'auto'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NextN {
    #[default]
    Off,
    Depth(u32),
    Auto,
}

impl NextN {
    /// The depth on a checkpoint whose MTP layers number `checkpoint`.
    pub fn resolve(self, checkpoint: u32) -> u32 {
        match self {
            NextN::Off => 0,
            NextN::Depth(n) => n,
            NextN::Auto => checkpoint,
        }
    }

    /// A depth given as a number: the spec's integer rule (`nextn (1.5) must
    /// be an integer draft length.`, `nextn (-1) must be >= 0.`); `text` is
    /// the value as the user wrote it, for the message.
    pub fn from_number(value: f64, text: &str) -> Result<NextN, String> {
        if !value.is_finite() || value.fract() != 0.0 {
            return Err(format!("nextn ({text}) must be an integer draft length."));
        }
        if value < 0.0 {
            return Err(format!("nextn ({text}) must be >= 0."));
        }
        if value > f64::from(aicsql_tables::limits::MAX_NEXTN) {
            return Err(format!(
                "nextn = {text} exceeds the limit of {} (aicsql bounds the work of one call)",
                aicsql_tables::limits::MAX_NEXTN
            ));
        }
        Ok(match value as u32 {
            0 => NextN::Off,
            n => NextN::Depth(n),
        })
    }

    /// `'auto'` (any case, surrounding blanks ignored) or an integer.
    pub fn parse(text: &str) -> Result<NextN, String> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(NextN::Auto);
        }
        match text.trim().parse::<i64>() {
            Ok(n) => NextN::from_number(n as f64, text),
            Err(_) => match text.trim().parse::<f64>() {
                Ok(x) => NextN::from_number(x, text),
                Err(_) => Err(format!("nextn must be an integer draft length or 'auto', got '{text}'")),
            },
        }
    }
}

/// The accepted draft tokens per step at depth `nextn` (the spec's
/// `normalize_speculative_decoding`): required when `nextn > 0`, within
/// `[0, nextn]`; ignored (0.0) when MTP is off, whatever was given.
pub fn accepted_tokens(nextn: u32, accepted: Option<f64>) -> Result<f64, ServingError> {
    if nextn == 0 {
        return Ok(0.0);
    }
    let Some(a) = accepted else {
        return Err(ServingError::input(format!(
            "nextn={nextn} requires 'nextn_accepted' (average accepted draft tokens per step, 0 <= nextn_accepted \
             <= nextn); there is no built-in acceptance assumption."
        )));
    };
    if !a.is_finite() || !(0.0..=f64::from(nextn)).contains(&a) {
        return Err(ServingError::input(format!(
            "nextn_accepted ({}) must be within [0, nextn={nextn}].",
            aicsql_tables::pymath::py_repr(aicsql_tables::Num::Float(a))
        )));
    }
    Ok(a)
}

fn r3(x: f64) -> f64 {
    np_round(x, 3)
}

/// pandas' `a / b` after `b.replace(0, nan)`: NaN for a zero divisor.
fn div_or_nan(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

/// The aggregated estimate as the spec reports it with `accepted > 0`
/// accepted tokens: every value of its summary row at three decimals, then
/// projected (role `agg`), then at three decimals again. With none accepted
/// the spec returns the raw row, unrounded, and so does this.
pub(crate) fn project_agg(e: &mut AggEstimate, backend: Backend, accepted: f64) {
    if accepted <= 0.0 {
        return;
    }
    // The summary row's float columns, rounded as the frame is.
    for v in [
        &mut e.request_rate,
        &mut e.ttft_ms,
        &mut e.tpot_ms,
        &mut e.request_latency_ms,
        &mut e.encoder_ms,
        &mut e.encoder_memory_gib,
        &mut e.seq_per_s,
        &mut e.seq_per_s_per_gpu,
        &mut e.tokens_per_s,
        &mut e.tokens_per_s_per_gpu,
        &mut e.tokens_per_s_per_user,
        &mut e.memory.total,
        &mut e.balance_score,
        &mut e.num_ctx_reqs,
        &mut e.num_gen_reqs,
        &mut e.num_tokens,
    ] {
        *v = r3(*v);
    }
    let progress = 1.0 + accepted;
    e.tpot_ms /= progress;
    e.request_latency_ms = e.ttft_ms + e.tpot_ms * f64::from(e.osl.saturating_sub(1));
    let ratio = match backend {
        // Little's law caps vLLM's rate: concurrency over the new request
        // latency, clipped to [0, progress]; a zero divisor gives progress.
        Backend::Vllm => {
            let cap = div_or_nan(e.concurrency as f64 * 1000.0, e.request_latency_ms);
            let capped = div_or_nan(cap, e.seq_per_s);
            if capped.is_nan() { progress } else { capped.clamp(0.0, progress) }
        }
        _ => e.seq_per_s * 0.0 + progress,
    };
    for v in [
        &mut e.request_rate,
        &mut e.seq_per_s,
        &mut e.seq_per_s_per_gpu,
        &mut e.tokens_per_s,
        &mut e.tokens_per_s_per_gpu,
    ] {
        *v = r3(*v * ratio);
    }
    e.tokens_per_s_per_user = r3(e.tokens_per_s_per_user * progress);
    e.tpot_ms = r3(e.tpot_ms);
    e.request_latency_ms = r3(e.request_latency_ms);
}

/// A decode worker's row projected (role `decode`, before rate matching):
/// its per-iteration TPOT over `1 + accepted`, its rates times it.
pub(crate) fn project_decode(row: &mut StaticRow, accepted: f64) {
    if accepted <= 0.0 {
        return;
    }
    let progress = 1.0 + accepted;
    row.tpot = r3(row.tpot / progress);
    row.seq_per_s = r3(row.seq_per_s * progress);
    row.worker.seq_per_s_per_worker = row.seq_per_s;
    row.seq_per_s_per_gpu = r3(row.seq_per_s_per_gpu * progress);
    row.tokens_per_s_per_user = r3(row.tokens_per_s_per_user * progress);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_follow_the_spec_rules() {
        assert_eq!(NextN::parse("auto"), Ok(NextN::Auto));
        assert_eq!(NextN::parse(" AUTO "), Ok(NextN::Auto));
        assert_eq!(NextN::parse("0"), Ok(NextN::Off));
        assert_eq!(NextN::parse("3"), Ok(NextN::Depth(3)));
        assert_eq!(NextN::from_number(2.0, "2.0"), Ok(NextN::Depth(2)));
        assert_eq!(NextN::from_number(1.5, "1.5"), Err("nextn (1.5) must be an integer draft length.".into()));
        assert_eq!(NextN::from_number(-1.0, "-1"), Err("nextn (-1) must be >= 0.".into()));
        assert!(NextN::parse("two").is_err());
        assert_eq!(NextN::Auto.resolve(1), 1);
        assert_eq!(NextN::Depth(2).resolve(1), 2);
    }

    #[test]
    fn acceptance_is_required_and_bounded() {
        assert_eq!(accepted_tokens(0, Some(5.0)).ok(), Some(0.0));
        assert_eq!(accepted_tokens(2, Some(1.4)).ok(), Some(1.4));
        assert_eq!(accepted_tokens(2, Some(2.0)).ok(), Some(2.0));
        let text = |r: Result<f64, ServingError>| r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(text(accepted_tokens(2, None)).starts_with("nextn=2 requires 'nextn_accepted'"));
        assert_eq!(text(accepted_tokens(2, Some(2.5))), "nextn_accepted (2.5) must be within [0, nextn=2].");
        assert_eq!(text(accepted_tokens(1, Some(-0.1))), "nextn_accepted (-0.1) must be within [0, nextn=1].");
        assert!(accepted_tokens(1, Some(f64::NAN)).is_err());
    }
}
