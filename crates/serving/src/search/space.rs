//! The parallel layouts the search tries (docs/spec/search.md 1.5, 1.6):
//! the candidate lists per model kind, backend and system, under the GPU
//! budget, enumerated in the spec's loop order.

use crate::backend::Backend;
use crate::parallel::Parallel;

/// The degrees every list starts from.
const X: [u32; 4] = [1, 2, 4, 8];
/// Dense models on GB200 / GB300 also try 16 GPUs.
const X_NVL: [u32; 5] = [1, 2, 4, 8, 16];

/// What the search space depends on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpaceOf<'a> {
    pub is_moe: bool,
    pub backend: Backend,
    /// The agg and prefill workers' system.
    pub system: &'a str,
    /// The decode workers' system (the prefill's unless the deployment is
    /// heterogeneous, docs/spec/experiments.md 1.6).
    pub decode_system: &'a str,
    /// The model declares context parallelism on this backend.
    pub cp: bool,
    pub total_gpus: u32,
    /// `cli recommend` (docs/spec/experiments.md 4.4): every role's worker
    /// sizes are the powers of two up to the budget, and a disaggregated
    /// replica spans at most this many GPUs (a node).
    pub recommend_node_gpus: Option<u32>,
}

/// The layouts of each role and the deployment sizes a disaggregated
/// deployment may have.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Space {
    pub agg: Vec<Parallel>,
    pub prefill: Vec<Parallel>,
    pub decode: Vec<Parallel>,
    /// `1, 2, 4, 8, 16, 24, ..., 128` up to `min(total_gpus, 128)`: a
    /// deployment's GPU count must be one of these (not merely fewer).
    pub deployments: Vec<u64>,
}

/// One role's lists.
struct Lists {
    num_gpu: Vec<u32>,
    tp: Vec<u32>,
    dp: Vec<u32>,
    moe_tp: Vec<u32>,
    moe_ep: Vec<u32>,
    cp: Vec<u32>,
}

impl SpaceOf<'_> {
    pub fn build(&self) -> Space {
        let powers: Vec<u32> = (0..32).map(|i| 1u32 << i).take_while(|&g| g <= self.total_gpus).collect();
        let within = |v: &[u32]| match self.recommend_node_gpus {
            Some(_) => powers.clone(),
            None => v.iter().copied().filter(|&g| g <= self.total_gpus).collect::<Vec<u32>>(),
        };
        // The dense widening is decided per role by its system's exact name.
        let lists = |cp_allowed: bool, system: &str| {
            let nvl = matches!(system, "gb200" | "gb300");
            let dense_gpus: &[u32] = if nvl { &X_NVL } else { &X };
            let cp = if cp_allowed && self.cp { X.to_vec() } else { vec![1] };
            if self.is_moe {
                Lists {
                    num_gpu: within(&X),
                    tp: X.to_vec(),
                    dp: X.to_vec(),
                    moe_tp: X.to_vec(),
                    moe_ep: X.to_vec(),
                    cp,
                }
            } else {
                Lists {
                    num_gpu: within(dense_gpus),
                    tp: dense_gpus.to_vec(),
                    dp: vec![1],
                    moe_tp: vec![1],
                    moe_ep: vec![1],
                    cp,
                }
            }
        };
        let cap = self.recommend_node_gpus.unwrap_or(self.total_gpus).min(128);
        let deployments =
            [1u64, 2, 4, 8].into_iter().chain((16..=128).step_by(8)).filter(|&g| g <= u64::from(cap)).collect();
        Space {
            agg: self.enumerate(&lists(true, self.system)),
            prefill: self.enumerate(&lists(true, self.system)),
            decode: self.enumerate(&lists(false, self.decode_system)),
            deployments,
        }
    }

    /// `enumerate_parallel_config`: tp, pp, then (MoE) dp, moe_tp, moe_ep,
    /// cp, each ascending; a layout whose GPUs are in `num_gpu` and whose
    /// widths match, minus what the backend cannot run.
    fn enumerate(&self, l: &Lists) -> Vec<Parallel> {
        let mut out = Vec::new();
        let pp = 1u32;
        for &tp in &l.tp {
            if self.is_moe {
                for &dp in &l.dp {
                    for &moe_tp in &l.moe_tp {
                        for &moe_ep in &l.moe_ep {
                            for &cp in &l.cp {
                                let keep = l.num_gpu.contains(&(dp * tp * pp * cp))
                                    && dp * tp * cp == moe_tp * moe_ep
                                    && match self.backend {
                                        Backend::Trtllm => !(dp > 1 && tp > 1),
                                        Backend::Vllm => !(moe_tp > 1 && moe_ep > 1),
                                        Backend::Sglang => true,
                                    };
                                if keep {
                                    out.push(Parallel { tp, pp, dp, cp, moe_tp: Some(moe_tp), moe_ep: Some(moe_ep) });
                                }
                            }
                        }
                    }
                }
            } else {
                for &cp in &l.cp {
                    if l.num_gpu.contains(&(tp * pp * cp)) {
                        out.push(Parallel { tp, pp, dp: 1, cp, moe_tp: Some(1), moe_ep: Some(1) });
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(v: &[Parallel]) -> Vec<String> {
        v.iter().map(|p| p.to_string()).collect()
    }

    /// docs/spec/search.md 1.6: the goldens' layouts.
    #[test]
    fn golden_spaces() {
        let dense = SpaceOf {
            is_moe: false,
            backend: Backend::Vllm,
            system: "h200_sxm",
            decode_system: "h200_sxm",
            cp: false,
            total_gpus: 4,
            recommend_node_gpus: None,
        };
        let s = dense.build();
        assert_eq!(labels(&s.agg), ["tp1pp1dp1etp1ep1", "tp2pp1dp1etp1ep1", "tp4pp1dp1etp1ep1"]);
        assert_eq!(s.decode, s.agg);
        assert_eq!(s.deployments, [1, 2, 4]);

        let moe = SpaceOf {
            is_moe: true,
            backend: Backend::Sglang,
            system: "gb200",
            decode_system: "gb200",
            cp: true,
            total_gpus: 8,
            recommend_node_gpus: None,
        };
        let s = moe.build();
        assert_eq!(s.agg.len(), 65);
        assert_eq!(
            labels(&s.agg[..5]),
            [
                "tp1pp1dp1etp1ep1",
                "tp1pp1dp1etp1ep2cp2",
                "tp1pp1dp1etp1ep4cp4",
                "tp1pp1dp1etp1ep8cp8",
                "tp1pp1dp1etp2ep1cp2"
            ]
        );
        let per_tp = |tp: u32| s.agg.iter().filter(|p| p.tp == tp).count();
        assert_eq!([per_tp(1), per_tp(2), per_tp(4), per_tp(8)], [30, 20, 11, 4]);
        assert_eq!(s.decode.len(), 30);
        assert_eq!(labels(&s.decode[..3]), ["tp1pp1dp1etp1ep1", "tp1pp1dp2etp1ep2", "tp1pp1dp2etp2ep1"]);
        assert_eq!(s.decode.last().map(|p| p.to_string()).as_deref(), Some("tp8pp1dp1etp8ep1"));
        assert_eq!(s.deployments, [1, 2, 4, 8]);
    }

    /// experiments.md 1.6: the dense GB200 / GB300 widening is per role.
    #[test]
    fn heterogeneous_roles_widen_apart() {
        let of = |system, decode_system| SpaceOf {
            is_moe: false,
            backend: Backend::Trtllm,
            system,
            decode_system,
            cp: false,
            total_gpus: 16,
            recommend_node_gpus: None,
        };
        let s = of("h200_sxm", "gb200").build();
        assert_eq!(labels(&s.prefill).last().map(String::as_str), Some("tp8pp1dp1etp1ep1"));
        assert_eq!(labels(&s.agg), labels(&s.prefill));
        assert_eq!(labels(&s.decode).last().map(String::as_str), Some("tp16pp1dp1etp1ep1"));
        let s = of("gb300", "h100_sxm").build();
        assert_eq!((s.prefill.len(), s.decode.len()), (5, 4));
    }
}
