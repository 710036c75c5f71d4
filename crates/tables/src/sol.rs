//! GEMM speed-of-light latency (docs/spec section 5.2), with Python's arithmetic.

use crate::pymath::{py_mul, py_true_div};
use crate::quant::GemmQuant;
use crate::system::{Num, SystemSpec};

/// Largest GEMM dimension accepted. Keeps `2*m*n*k` (and every other exact
/// product the spec forms) inside i128, where Python would use big ints.
pub const MAX_GEMM_DIM: i64 = 1 << 40;

/// The constants of one (system, quant) pair, resolved once so a query only
/// does the arithmetic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmSol {
    flops: Num,
    memory: Num,
    mem_bw: Num,
    /// `flops` and `mem_bw` as f64 when both are ints below 2^53: then an
    /// int quotient with a numerator below 2^53 is a single f64 division.
    exact: Option<(f64, f64)>,
}

/// Integers up to this convert to f64 exactly.
const EXACT_INT: i64 = 1 << 53;

fn exact_f64(value: Num) -> Option<f64> {
    match value {
        Num::Int(i) if (0..=i128::from(EXACT_INT)).contains(&i) => Some(i as f64),
        _ => None,
    }
}

impl GemmSol {
    /// `flops` follows the quant's compute multiplier: 1 -> bfloat16, 2 -> fp8,
    /// 4 -> fp4 tensor-core flops; a system without that key gets
    /// `bfloat16_tc_flops * multiplier` (an exact int product when the YAML
    /// wrote ints). Errors name the offending field.
    pub fn new(spec: &SystemSpec, quant: GemmQuant) -> Result<GemmSol, String> {
        let compute = quant.compute();
        let listed = match compute {
            1 => Some(spec.bfloat16_tc_flops),
            2 => spec.fp8_tc_flops,
            4 => spec.fp4_tc_flops,
            _ => None,
        };
        let flops = match listed {
            Some(f) => f,
            None => py_mul(spec.bfloat16_tc_flops, Num::Int(i128::from(compute)))
                .ok_or_else(|| "gpu.bfloat16_tc_flops is too large".to_string())?,
        };
        if !is_positive(flops) {
            return Err(format!("the tensor-core flops used by {quant} must be a positive number, found {flops:?}"));
        }
        if !is_positive(spec.mem_bw) {
            return Err(format!("gpu.mem_bw must be a positive number, found {:?}", spec.mem_bw));
        }
        let exact = exact_f64(flops).zip(exact_f64(spec.mem_bw));
        Ok(GemmSol { flops, memory: quant.memory(), mem_bw: spec.mem_bw, exact })
    }

    /// `max(2*m*n*k / flops * 1000, memory * (m*n + m*k + n*k) / mem_bw * 1000)`
    /// evaluated left to right as Python does. For dimensions in
    /// `0..=MAX_GEMM_DIM` the result is finite; far outside it, NaN.
    #[inline]
    pub fn latency_ms(&self, m: i64, n: i64, k: i64) -> f64 {
        self.small_shape(m, n, k).unwrap_or_else(|| self.big_shape(m, n, k))
    }

    /// Python's arithmetic in full: exact int products, correctly rounded
    /// int / int.
    fn big_shape(&self, m: i64, n: i64, k: i64) -> f64 {
        let (m, n, k) = (i128::from(m), i128::from(n), i128::from(k));
        let ops = 2i128.checked_mul(m).and_then(|v| v.checked_mul(n)).and_then(|v| v.checked_mul(k));
        let compute = ops.and_then(|ops| py_true_div(Num::Int(ops), self.flops)).unwrap_or(f64::NAN) * 1000.0;
        let elements = m
            .checked_mul(n)
            .and_then(|mn| mn.checked_add(m.checked_mul(k)?))
            .and_then(|v| v.checked_add(n.checked_mul(k)?));
        let memory = elements
            .and_then(|e| py_mul(self.memory, Num::Int(e)))
            .and_then(|bytes| py_true_div(bytes, self.mem_bw))
            .unwrap_or(f64::NAN)
            * 1000.0;
        // Python's max(a, b) keeps `a` unless `b > a`.
        if memory > compute { memory } else { compute }
    }

    /// The same expression when every int involved stays below 2^53, where
    /// converting to f64 first is exact and Python's int arithmetic agrees
    /// with plain f64 operations. Most real shapes take this path.
    #[inline]
    fn small_shape(&self, m: i64, n: i64, k: i64) -> Option<f64> {
        let (flops, mem_bw) = self.exact?;
        let small = |v: i64| (-EXACT_INT..=EXACT_INT).contains(&v).then_some(v as f64);
        let ops = small(2i64.checked_mul(m)?.checked_mul(n)?.checked_mul(k)?)?;
        let elements = m.checked_mul(n)?.checked_add(m.checked_mul(k)?)?.checked_add(n.checked_mul(k)?)?;
        let compute = ops / flops * 1000.0;
        let memory = match self.memory {
            Num::Int(bytes) => small(i64::try_from(bytes).ok()?.checked_mul(elements)?)? / mem_bw * 1000.0,
            Num::Float(bytes) => bytes * small(elements)? / mem_bw * 1000.0,
        };
        Some(if memory > compute { memory } else { compute })
    }
}

fn is_positive(value: Num) -> bool {
    match value {
        Num::Int(i) => i > 0,
        Num::Float(f) => f.is_finite() && f > 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_data::h200_spec as h200;

    fn sol(q: GemmQuant, m: i64, n: i64, k: i64) -> f64 {
        GemmSol::new(&h200(), q).map(|s| s.latency_ms(m, n, k)).unwrap_or(f64::NAN)
    }

    /// Expected values from python3 evaluating the spec's expression with ints.
    #[test]
    fn matches_python_on_large_shapes() {
        let cases: &[(GemmQuant, i64, i64, i64, f64)] = &[
            // 2*m*n*k = 2^59 > 2^53: int/int must be correctly rounded.
            (GemmQuant::Bfloat16, 1 << 22, 1 << 18, 1 << 18, 582872.3481328853),
            (GemmQuant::Fp8, 1 << 22, 1 << 18, 1 << 18, 291436.17406644265),
            (GemmQuant::Bfloat16, 2_776_245, 146_315, 123_707, 101618.93057140085),
            (GemmQuant::Fp8, 722_495, 256_897, 165_621, 31082.288669405778),
            // nvfp4 on a system without fp4 flops: bfloat16 * 4; float memory.
            (GemmQuant::Nvfp4, 1, 4096, 4096, 0.0019670399999999998),
            (GemmQuant::Int4Wo, 8, 4096, 14336, 0.006132053333333333),
            (GemmQuant::Bfloat16, 0, 2048, 6144, 0.00524288),
        ];
        for &(q, m, n, k, expected) in cases {
            let got = sol(q, m, n, k);
            assert_eq!(got.to_bits(), expected.to_bits(), "{q} {m} {n} {k}: got {got:?}, python {expected:?}");
        }
    }

    #[test]
    fn small_shape_path_agrees_with_exact_ints() {
        let mut rng = crate::test_rng::XorShift::new(0x2545_f491_4f6c_dd1d);
        let mut next = |bits: u32| (rng.next_u64() >> (64 - bits)) as i64;
        for q in GemmQuant::ALL {
            let Ok(sol) = GemmSol::new(&h200(), q) else { panic!("{q}") };
            let mut fast = 0;
            for _ in 0..100_000 {
                let (m, n, k) = (next(20), next(18) + 1, next(18) + 1);
                if let Some(v) = sol.small_shape(m, n, k) {
                    fast += 1;
                    assert_eq!(v.to_bits(), sol.big_shape(m, n, k).to_bits(), "{q} {m} {n} {k}");
                }
            }
            assert!(fast > 10_000, "{q}: fast path taken {fast} times");
        }
    }

    #[test]
    fn out_of_domain_shapes_do_not_panic() {
        let Ok(sol) = GemmSol::new(&h200(), GemmQuant::Nvfp4) else { panic!() };
        assert!(sol.latency_ms(i64::MAX, i64::MAX, i64::MAX).is_nan());
        assert!(sol.latency_ms(-5, 4096, 4096).is_finite());
    }

    #[test]
    fn rejects_unusable_constants() {
        let mut spec = h200();
        spec.mem_bw = Num::Int(0);
        assert!(GemmSol::new(&spec, GemmQuant::Fp8).is_err());
    }
}
