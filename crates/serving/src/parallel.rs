//! A worker's parallelism, and the spec's label for it.
//!
//! Search frames print a worker as `tp8pp1dp1etp1ep8` (dense models whose
//! MoE widths were never set print `etpNoneepNone`; a context-parallel
//! worker ends in `cp2`); any such label, or a
//! bare tensor-parallel degree, names the same deployment here, so a row of
//! a search can be priced again.

use std::fmt;

use crate::error::ServingError;

/// Tensor, pipeline, attention-data and context parallelism plus the MoE widths
/// (`None` where the spec leaves them unset: a dense model, or one of the
/// two to be inferred from `tp * dp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallel {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    /// Context parallelism: a prefill's tokens split over `cp` ranks
    /// (SGLang; decode steps are not split).
    pub cp: u32,
    pub moe_tp: Option<u32>,
    pub moe_ep: Option<u32>,
}

impl Parallel {
    /// `tp` GPUs, no pipeline, attention data or context parallelism.
    pub fn tensor(tp: u32, moe_tp: Option<u32>, moe_ep: Option<u32>) -> Parallel {
        Parallel { tp, pp: 1, dp: 1, cp: 1, moe_tp, moe_ep }
    }

    /// Parses the spec's label: `tp`, `pp`, `dp`, `etp`, `ep` in that order,
    /// each a positive integer (`None` allowed for `etp` / `ep`), and an
    /// optional trailing `cpN` (the spec prints it when N > 1).
    pub fn parse(label: &str) -> Result<Parallel, ServingError> {
        let bad = |why: &str| {
            ServingError::input(format!(
                "invalid parallel '{label}': {why} (expected e.g. 'tp8pp1dp1etp1ep8' or 'tp4pp1dp1etpNoneepNone')"
            ))
        };
        let mut rest = label.trim();
        let tp = field(&mut rest, "tp", false, bad)?.unwrap_or(1);
        let pp = field(&mut rest, "pp", false, bad)?.unwrap_or(1);
        let dp = field(&mut rest, "dp", false, bad)?.unwrap_or(1);
        let moe_tp = field(&mut rest, "etp", true, bad)?;
        let moe_ep = field(&mut rest, "ep", true, bad)?;
        let cp = if rest.is_empty() { 1 } else { field(&mut rest, "cp", false, bad)?.unwrap_or(1) };
        if !rest.is_empty() {
            return Err(bad(&format!("unexpected '{rest}'")));
        }
        Ok(Parallel { tp, pp, dp, cp, moe_tp, moe_ep })
    }

    /// GPUs of one worker: `tp * pp * dp * cp`.
    pub fn gpus(&self) -> u64 {
        u64::from(self.tp) * u64::from(self.pp) * u64::from(self.dp) * u64::from(self.cp)
    }
}

/// Reads `key` and its value off the front of `rest`.
fn field(
    rest: &mut &str,
    key: &str,
    none_ok: bool,
    bad: impl Fn(&str) -> ServingError,
) -> Result<Option<u32>, ServingError> {
    let after_key = rest.strip_prefix(key).ok_or_else(|| bad(&format!("'{key}' expected at '{rest}'")))?;
    if none_ok && let Some(after) = after_key.strip_prefix("None") {
        *rest = after;
        return Ok(None);
    }
    let digits = after_key.bytes().take_while(u8::is_ascii_digit).count();
    let (number, after) = after_key.split_at(digits);
    let value: u32 = number.parse().map_err(|_| bad(&format!("'{key}' needs a positive integer")))?;
    if value == 0 {
        return Err(bad(&format!("'{key}' must be at least 1")));
    }
    *rest = after;
    Ok(Some(value))
}

/// The spec's label, `None` for unset MoE widths.
impl fmt::Display for Parallel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.label(self.moe_tp.map(i64::from), self.moe_ep.map(i64::from)).fmt(f)
    }
}

impl Parallel {
    /// The label with the MoE widths as the spec resolved them (what its
    /// result dicts print: an inferred width filled in, `None` for dense).
    pub fn label(&self, moe_tp: Option<i64>, moe_ep: Option<i64>) -> Label {
        Label { tp: self.tp, pp: self.pp, dp: self.dp, cp: self.cp, moe_tp, moe_ep }
    }
}

/// A parallel label to print: `tp8pp1dp1etp1ep8`, `etpNoneepNone` unset,
/// `cpN` appended when N > 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    tp: u32,
    pp: u32,
    dp: u32,
    cp: u32,
    moe_tp: Option<i64>,
    moe_ep: Option<i64>,
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tp{}pp{}dp{}etp", self.tp, self.pp, self.dp)?;
        match self.moe_tp {
            Some(v) => write!(f, "{v}")?,
            None => f.write_str("None")?,
        }
        f.write_str("ep")?;
        match self.moe_ep {
            Some(v) => write!(f, "{v}")?,
            None => f.write_str("None")?,
        }
        if self.cp > 1 {
            write!(f, "cp{}", self.cp)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip() {
        for label in [
            "tp8pp1dp1etp1ep8",
            "tp4pp1dp1etpNoneepNone",
            "tp1pp2dp4etp2ep4",
            "tp2pp1dp1etpNoneep2",
            "tp1pp1dp1etp1ep4cp4",
        ] {
            let Ok(p) = Parallel::parse(label) else { panic!("{label} did not parse") };
            assert_eq!(p.to_string(), label);
        }
        let Ok(p) = Parallel::parse("tp8pp1dp1etp1ep8cp1") else { panic!("cp1") };
        assert_eq!(p, Parallel { tp: 8, pp: 1, dp: 1, cp: 1, moe_tp: Some(1), moe_ep: Some(8) });
        assert_eq!(p.to_string(), "tp8pp1dp1etp1ep8");
    }

    #[test]
    fn bad_labels_say_why() {
        for (label, why) in [
            ("tp8", "'pp' expected"),
            ("tp0pp1dp1etp1ep1", "'tp' must be at least 1"),
            ("pp1tp8dp1etp1ep8", "'tp' expected"),
            ("tp8pp1dp1etp1ep8cp0", "'cp' must be at least 1"),
            ("tp8pp1dp1etp1ep8x", "'cp' expected"),
            ("tpNonepp1dp1etp1ep1", "'tp' needs a positive integer"),
        ] {
            let Err(e) = Parallel::parse(label) else { panic!("{label} parsed") };
            let text = e.to_string();
            assert!(text.contains(why) && text.contains(label), "{label}: {text}");
        }
    }
}
