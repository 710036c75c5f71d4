//! Explaining a GEMM estimate step by step (backs the `gemm_trace` SQL
//! function): which sites were considered, in which order, with which weight.

use std::fmt;

/// What a trace step records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceStage {
    /// The query is a stored point.
    Exact,
    /// Linear interpolation on the query's own site curve.
    Curve,
    /// Util-hold extrapolation on the query's own site curve.
    Hold,
    /// A neighbouring site considered for site transfer.
    Transfer,
    /// The query has no answer; `reason` says why.
    Miss,
    /// The final latency.
    Result,
}

impl TraceStage {
    pub fn name(self) -> &'static str {
        match self {
            TraceStage::Exact => "exact",
            TraceStage::Curve => "curve",
            TraceStage::Hold => "hold",
            TraceStage::Transfer => "transfer",
            TraceStage::Miss => "miss",
            TraceStage::Result => "result",
        }
    }
}

impl fmt::Display for TraceStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of a trace. Fields that do not apply to a stage are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStep {
    pub stage: TraceStage,
    pub site_n: Option<i64>,
    pub site_k: Option<i64>,
    /// Distance in (log2 n, log2 k) space (transfer candidates).
    pub distance: Option<f64>,
    /// Whether the site's curve spans the query's m.
    pub covers_m: Option<bool>,
    /// 1-based position after the stable distance sort.
    pub rank: Option<u32>,
    /// Whether the step contributed to the result.
    pub selected: bool,
    /// `1 / (distance^2 + 1e-12)`.
    pub weight: Option<f64>,
    /// The site's curve evaluated at the query's m.
    pub site_latency_ms: Option<f64>,
    /// SOL at (m, site n, site k).
    pub site_sol_ms: Option<f64>,
    /// `site_sol_ms / site_latency_ms`.
    pub util: Option<f64>,
    pub result_ms: Option<f64>,
    pub reason: Option<String>,
}

impl TraceStep {
    /// A `miss` row with its reason (e.g. a database without the table).
    pub fn miss(reason: String) -> TraceStep {
        let mut step = TraceStep::new(TraceStage::Miss);
        step.reason = Some(reason);
        step
    }

    pub(crate) fn new(stage: TraceStage) -> TraceStep {
        TraceStep {
            stage,
            site_n: None,
            site_k: None,
            distance: None,
            covers_m: None,
            rank: None,
            selected: false,
            weight: None,
            site_latency_ms: None,
            site_sol_ms: None,
            util: None,
            result_ms: None,
            reason: None,
        }
    }
}

/// Receives trace steps from the resolver. The hot path uses [`NoTrace`],
/// whose `ON = false` lets the compiler drop every step construction, so
/// tracing and estimating share one implementation.
pub(crate) trait Tracer {
    const ON: bool;
    fn push(&mut self, step: TraceStep);
}

pub(crate) struct NoTrace;

impl Tracer for NoTrace {
    const ON: bool = false;
    fn push(&mut self, _step: TraceStep) {}
}

impl Tracer for Vec<TraceStep> {
    const ON: bool = true;
    fn push(&mut self, step: TraceStep) {
        Vec::push(self, step);
    }
}
