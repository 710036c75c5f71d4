//! Python's arithmetic, reproduced where it differs from the obvious `f64`
//! expression. The spec is Python: bit-identical results need its int/float
//! promotion rules, its correctly rounded `int / int`, C `pow` behind `**`
//! and `statistics.median`.

use crate::system::Num;

/// Python's `float // float` for finite operands (CPython's `float_floor_div`).
pub fn py_floordiv(a: f64, b: f64) -> f64 {
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div == 0.0 {
        return 0.0f64.copysign(a / b);
    }
    let floor = div.floor();
    if div - floor > 0.5 { floor + 1.0 } else { floor }
}

/// numpy's `round(x, decimals)` (and so pandas' `DataFrame.round`): scale
/// by `10**decimals`, round half to even, scale back. Not Python's `round`,
/// which rounds the exact decimal value and can differ in the last digit.
pub fn np_round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round_ties_even() / scale
}

/// `a * b` with Python's promotion: int * int stays an exact int, anything
/// involving a float converts the int to the nearest float first.
/// `None` when an exact product does not fit 128 bits.
pub fn py_mul(a: Num, b: Num) -> Option<Num> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.checked_mul(y).map(Num::Int),
        _ => Some(Num::Float(a.as_f64() * b.as_f64())),
    }
}

/// `a / b` (true division) with Python's rules; `None` on division by zero.
pub fn py_true_div(a: Num, b: Num) -> Option<f64> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => int_true_div(x, y),
        _ => {
            let d = b.as_f64();
            (d != 0.0).then(|| a.as_f64() / d)
        }
    }
}

/// Python's `int / int`: the quotient correctly rounded (half to even).
/// Converting both operands to `f64` first rounds twice once either exceeds
/// 2^53, which is where GEMM SOL numerators (`2*m*n*k`) end up for large shapes.
pub fn int_true_div(a: i128, b: i128) -> Option<f64> {
    if b == 0 {
        return None;
    }
    const EXACT: u128 = 1 << 53;
    let (ua, ub) = (a.unsigned_abs(), b.unsigned_abs());
    // Both exact as f64 (and cheap to convert through u64): one rounding.
    let magnitude = if ua <= EXACT && ub <= EXACT { ua as u64 as f64 / ub as u64 as f64 } else { udiv_rounded(ua, ub) };
    Some(if (a < 0) != (b < 0) { -magnitude } else { magnitude })
}

/// Correctly rounded `a / b` for `b > 0`: build an integer quotient with at
/// least 56 significant bits, fold the remainder into its lowest bit (a
/// sticky bit strictly below the rounding bit), and let the u128 -> f64
/// conversion (round half to even) do the single rounding.
fn udiv_rounded(a: u128, b: u128) -> f64 {
    if a == 0 {
        return 0.0;
    }
    const WANT: i32 = 56;
    let bits = |x: u128| 128 - x.leading_zeros() as i32;
    let shift = WANT - (bits(a) - bits(b));
    let (q, r, exp) = if shift <= 0 {
        (a / b, a % b, 0)
    } else if bits(a) + shift <= 127 {
        let x = a << shift;
        (x / b, x % b, -shift)
    } else {
        // Denominator above 2^71: produce the missing quotient bits one at a time.
        let (mut q, mut r) = (a / b, a % b);
        let mut exp = 0;
        while q < 1 << (WANT - 1) {
            let carry = r >> 127 != 0;
            r <<= 1;
            q <<= 1;
            if carry || r >= b {
                r = r.wrapping_sub(b);
                q |= 1;
            }
            exp -= 1;
        }
        (q, r, exp)
    };
    let sticky = u128::from(r != 0);
    (q | sticky) as f64 * pow2(exp)
}

/// 2^e for the exponents `udiv_rounded` produces (normal range).
fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// Python's `x ** 2` for a float: CPython calls C `pow(x, 2.0)`, and glibc's
/// `pow` is not always the correctly rounded square (it differs from `x * x`
/// for about one value in a thousand, enough to reorder GEMM sites).
///
/// glibc's `pow` computes `exp(y * log x)` to within ~0.011 ulp plus a term
/// proportional to `|y * log x|` (below 0.01 ulp for `|x|` in 2^-100..2^100)
/// before its final rounding. So when the exact square lies within 0.475 ulp
/// of `x * x` (0.235 ulp just below a power of two, where the spacing halves)
/// both round to the same double; only near-midpoint squares (about one in
/// twenty) pay for the library call. Measured: the first disagreement appears
/// at 0.495 ulp.
pub fn py_square(x: f64) -> f64 {
    let p = x * x;
    if x == 0.0 {
        return p;
    }
    if !(pow2(-100)..pow2(100)).contains(&x.abs()) {
        return libm_pow2(x);
    }
    let err = square_error(x, p);
    let bits = p.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let at_binade_edge = bits & ((1 << 52) - 1) == 0 && err < 0.0;
    let ulp = pow2(exponent - 1023 - 52);
    let tolerance = if at_binade_edge { 0.235 } else { 0.475 };
    if err.abs() <= tolerance * ulp { p } else { libm_pow2(x) }
}

/// `x * x - p` exactly, for `p = x * x` rounded (Dekker's product; no FMA needed).
fn square_error(x: f64, p: f64) -> f64 {
    const SPLIT: f64 = 134_217_729.0; // 2^27 + 1
    let c = SPLIT * x;
    let hi = c - (c - x);
    let lo = x - hi;
    ((hi * hi - p) + 2.0 * hi * lo) + lo * lo
}

/// C `pow(x, 2.0)`. The exponent goes through `black_box` so the compiler
/// cannot rewrite the call into `x * x`.
fn libm_pow2(x: f64) -> f64 {
    x.powf(std::hint::black_box(2.0))
}

/// `statistics.median`: sorts, takes the middle value, or the mean of the two
/// middle values for an even count. `None` for no values.
pub fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Python's `repr` of the small numbers the spec prints in its messages
/// (shortest round-trip digits, `2.0` for an integral float).
pub fn py_repr(value: Num) -> String {
    match value {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format!("{f:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quotients computed with python3 (`repr(a / b)` on ints). The GEMM-shaped
    /// cases (`2*m*n*k / flops`) are ones where `float(a) / float(b)` is one ulp off.
    #[test]
    fn int_division_matches_python() {
        let gemm = |m: i128, n: i128, k: i128| 2 * m * n * k;
        let cases: &[(i128, i128, f64)] = &[
            (1, 3, 0.3333333333333333),
            (-7, 2, -3.5),
            (9_007_199_254_740_993, 3, 3002399751580331.0),
            (gemm(3_236_881, 183_979, 213_688), 935_601_069_927_397, 272.0285004938213),
            (gemm(2_776_245, 146_315, 123_707), 989_000_000_000_000, 101.61893057140085),
            (gemm(1_993_433, 157_857, 229_348), 2_500_000_000_000_000, 57.736497259536954),
            (gemm(2_960_473, 184_852, 146_237), 1_871_202_139_854_795, 85.53656734569599),
            (gemm(722_495, 256_897, 165_621), 1_978_000_000_000_000, 31.082288669405777),
            (gemm(1 << 22, 1 << 18, 1 << 18), 989_000_000_000_000, 582.8723481328852),
            ((1 << 121) + 12345, 467_800_534_963_698, 5.682883607168452e21),
            (123_456_789_012_345_678_901_234_567, 1_000_000_007, 1.2345678814814816e17),
            (10_000_000_000_000_000_000_000_001, 10_000_000_000_000_000_000_000_000, 1.0),
            // Denominators above 2^71 take the bit-by-bit path.
            ((1 << 126) + 5, (1 << 100) + 1, 67108864.0),
            ((1 << 126) + 3 * (1 << 75) + 1, (1 << 80) + 7, 70368744177664.1),
        ];
        for &(a, b, expected) in cases {
            let got = int_true_div(a, b).expect("non-zero divisor");
            assert_eq!(got.to_bits(), expected.to_bits(), "{a} / {b}: got {got:?}, python {expected:?}");
            assert_eq!(int_true_div(-a, b), Some(-expected));
        }
        assert_eq!(int_true_div(1, 0), None);
    }

    #[test]
    fn square_matches_python_pow() {
        // python3: x = log2(a) - log2(b) with x**2 != x*x; expected = x**2.
        let cases: &[(f64, f64)] = &[
            (-7.109088504615556, 50.53913936645705),
            (1.840824531525712, 3.388634955866857),
            (0.6220340999863794, 0.38692642154586504),
            (-0.8791334613535113, 0.7728756428714058),
            (0.4420958670609778, 0.19544875567239778),
            (-2.5486059677088164, 6.495392378640992),
            (0.26303440583379434, 0.06918709865233721),
        ];
        for &(x, expected) in cases {
            assert_eq!(py_square(x).to_bits(), expected.to_bits(), "{x:?}");
        }
    }

    /// The fast path must never disagree with the library call it stands for.
    #[test]
    fn square_fast_path_agrees_with_pow() {
        let mut rng = crate::test_rng::XorShift::new(0x9e37_79b9_7f4a_7c15u64);
        let mut next = || rng.next_u64();
        for _ in 0..300_000 {
            let a = ((next() % (1 << 40)) + 1) as f64;
            let b = ((next() % (1 << 40)) + 1) as f64;
            let x = a.log2() - b.log2();
            assert_eq!(py_square(x).to_bits(), libm_pow2(x).to_bits(), "{x:?}");
            let d = (x * x + 0.5).sqrt();
            assert_eq!(py_square(d).to_bits(), libm_pow2(d).to_bits(), "{d:?}");
        }
        for x in [0.0, -0.0, 1.0, 2.0, 0.5, 1e-300, 1e300, f64::MIN_POSITIVE] {
            assert_eq!(py_square(x).to_bits(), libm_pow2(x).to_bits(), "{x:?}");
        }
    }

    /// The fast path's margin: squares whose error lies just inside the
    /// 0.475 ulp tolerance must still be what `pow` returns.
    #[test]
    fn square_tolerance_band_agrees_with_pow() {
        let mut rng = crate::test_rng::XorShift::new(0x0123_4567_89ab_cdefu64);
        let mut next = || rng.next_u64();
        let mut in_band = 0;
        while in_band < 20_000 {
            let x = f64::from_bits(next() >> 12 | 0x3ff0_0000_0000_0000) * ((next() % 64) as f64 + 0.5);
            let p = x * x;
            let ulp = pow2(((p.to_bits() >> 52) & 0x7ff) as i32 - 1023 - 52);
            let err = (square_error(x, p) / ulp).abs();
            if (0.44..=0.475).contains(&err) {
                in_band += 1;
                assert_eq!(p.to_bits(), libm_pow2(x).to_bits(), "{x:?} (error {err} ulp)");
            }
        }
    }

    #[test]
    fn median_like_statistics_module() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0]), Some(3.0));
        assert_eq!(median(&mut [0.1, 0.2]), Some(0.15000000000000002));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn repr_like_python() {
        assert_eq!(py_repr(Num::Int(1)), "1");
        assert_eq!(py_repr(Num::Float(0.5625)), "0.5625");
        assert_eq!(py_repr(Num::Float(0.5)), "0.5");
        assert_eq!(py_repr(Num::Float(2.0)), "2.0");
    }

    #[test]
    fn floordiv_is_pythons_and_round_is_numpys() {
        assert_eq!(py_floordiv(7.0, 2.0), 3.0);
        assert_eq!(py_floordiv(-7.0, 2.0), -4.0);
        assert_eq!(py_floordiv(7.5, 0.5), 15.0);
        assert_eq!(py_floordiv(1.0, 0.1), 9.0); // Python: 1.0 // 0.1 == 9.0 (fmod 0.1 - 2^-56)
        assert_eq!(py_floordiv(0.1, 0.01), 10.0);
        assert_eq!(py_floordiv(-7.5, 2.0), -4.0);
        // numpy rounds x * 1000: 2.0005 * 1000 = 2000.5000000000002 -> 2.001,
        // 0.0625 * 1000 = 62.5 -> 62 (ties to even); Python's round(1.0015, 3)
        // is 1.001 (the double is below 1.0015), numpy's 1.002 (1001.5 -> 1002).
        assert_eq!(np_round(2.0005, 3), 2.001);
        assert_eq!(np_round(0.0625, 3), 0.062);
        assert_eq!(np_round(1.0015, 3), 1.002);
    }
}
