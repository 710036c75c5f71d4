//! The search's frame sorts, as pandas 2.3 / numpy 1.26 perform them
//! (docs/spec/search.md 6.1): a single-key `sort_values` is numpy's generic
//! introsort argsort, which is not stable, so the order of tied rows is the
//! algorithm's; a sort on several keys is stable. Ties happen (values are
//! compared after 3-decimal rounding), and the golden frames record the
//! order this algorithm gives them, so it is restated here step by step.

use std::cmp::Ordering;

/// Ranges at most this long (`hi - lo`) are insertion-sorted.
const SMALL_QUICKSORT: usize = 15;

/// numpy's `less` for floats: `a < b`, NaN after everything.
#[inline]
fn less(a: f64, b: f64) -> bool {
    a < b || (b.is_nan() && !a.is_nan())
}

/// numpy's generic `argsort(kind="quicksort")` of `v` (the introsort of
/// `npysort/quicksort.cpp`, not the SIMD one): positions of `v` in
/// ascending order, ties in the order the partitions leave them.
pub(crate) fn np_argsort(v: &[f64]) -> Vec<usize> {
    let mut t: Vec<usize> = (0..v.len()).collect();
    if v.len() < 2 {
        return t;
    }
    let msb = usize::BITS - 1 - v.len().leading_zeros();
    let mut budget = 2 * msb as i64;
    let (mut lo, mut hi) = (0usize, v.len() - 1);
    let mut stack: Vec<(usize, usize, i64)> = Vec::new();
    loop {
        if budget < 0 {
            heapsort(v, &mut t[lo..=hi]);
        } else {
            while hi - lo > SMALL_QUICKSORT {
                let mid = lo + ((hi - lo) >> 1);
                if less(v[t[mid]], v[t[lo]]) {
                    t.swap(mid, lo);
                }
                if less(v[t[hi]], v[t[mid]]) {
                    t.swap(hi, mid);
                }
                if less(v[t[mid]], v[t[lo]]) {
                    t.swap(mid, lo);
                }
                let pivot = v[t[mid]];
                let (mut i, mut j) = (lo, hi - 1);
                t.swap(mid, j);
                loop {
                    i += 1;
                    while less(v[t[i]], pivot) {
                        i += 1;
                    }
                    j -= 1;
                    while less(pivot, v[t[j]]) {
                        j -= 1;
                    }
                    if i >= j {
                        break;
                    }
                    t.swap(i, j);
                }
                t.swap(i, hi - 1);
                // The larger part waits on the stack; the budget shrinks for both.
                budget -= 1;
                if i - lo < hi - i {
                    stack.push((i + 1, hi, budget));
                    hi = i - 1;
                } else {
                    stack.push((lo, i - 1, budget));
                    lo = i + 1;
                }
            }
            for k in lo + 1..=hi {
                let item = t[k];
                let value = v[item];
                let mut j = k;
                while j > lo && less(value, v[t[j - 1]]) {
                    t[j] = t[j - 1];
                    j -= 1;
                }
                t[j] = item;
            }
        }
        match stack.pop() {
            Some((l, h, b)) => (lo, hi, budget) = (l, h, b),
            None => return t,
        }
    }
}

/// numpy's `aheapsort` of the positions `t` by `v` (the introsort's fallback
/// when partitions stop shrinking).
fn heapsort(v: &[f64], t: &mut [usize]) {
    let n = t.len();
    // 1-based heap positions over t[0..n].
    let sift = |t: &mut [usize], mut i: usize, m: usize| {
        let item = t[i - 1];
        let mut j = 2 * i;
        while j <= m {
            if j < m && less(v[t[j - 1]], v[t[j]]) {
                j += 1;
            }
            if less(v[item], v[t[j - 1]]) {
                t[i - 1] = t[j - 1];
                i = j;
                j += j;
            } else {
                break;
            }
        }
        t[i - 1] = item;
    };
    for l in (1..=n / 2).rev() {
        sift(t, l, n);
    }
    let mut m = n;
    while m > 1 {
        t.swap(0, m - 1);
        m -= 1;
        sift(t, 1, m);
    }
}

/// pandas' single-key `sort_values(ascending=...)` (`nargsort`): NaNs last
/// in their original order; descending reverses the values, argsorts them
/// ascending and reverses the result.
pub(crate) fn pandas_order(values: &[f64], ascending: bool) -> Vec<usize> {
    let (mut idx, nans): (Vec<usize>, Vec<usize>) = (0..values.len()).partition(|&i| !values[i].is_nan());
    if !ascending {
        idx.reverse();
    }
    let keys: Vec<f64> = idx.iter().map(|&i| values[i]).collect();
    let mut order: Vec<usize> = np_argsort(&keys).into_iter().map(|k| idx[k]).collect();
    if !ascending {
        order.reverse();
    }
    order.extend(nans);
    order
}

/// A stable sort of `0..n` by `cmp` (pandas' multi-key `sort_values`).
pub(crate) fn stable_order(n: usize, cmp: impl Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// Descending by `f64` (larger first), NaN last; for [`stable_order`].
pub(crate) fn desc(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (true, true) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(v: &[f64], order: &[usize]) -> bool {
        order.windows(2).all(|w| !less(v[w[1]], v[w[0]]))
    }

    #[test]
    fn sorts_and_permutes() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for n in [0usize, 1, 2, 15, 16, 17, 18, 100, 1000, 5000] {
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Few distinct values: many ties.
                    (state % 50) as f64 / 4.0
                })
                .collect();
            let order = np_argsort(&v);
            let mut seen = order.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n {n}");
            assert!(sorted(&v, &order), "n {n}");
            let d = pandas_order(&v, false);
            assert!(d.windows(2).all(|w| v[w[0]] >= v[w[1]]), "n {n}");
        }
    }

    /// What numpy 1.26.4 prints for `np.argsort(v, kind="quicksort")` with
    /// its SIMD sorts disabled (`NPY_DISABLE_CPU_FEATURES="AVX512F ..."`):
    /// 20 values of 3 kinds, and 300 quarters in 0..6 drawn by numpy.
    #[test]
    fn ties_follow_numpy() {
        let v = [3.0, 1.0, 2.0, 1.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0, 3.0];
        assert_eq!(np_argsort(&v), [9, 1, 3, 6, 18, 15, 12, 2, 17, 5, 8, 11, 14, 16, 0, 10, 7, 4, 13, 19]);
        let w: Vec<f64> = TIED.iter().map(|&q| f64::from(q) / 4.0).collect();
        let want: Vec<usize> = NUMPY_ORDER.iter().map(|&i| usize::from(i)).collect();
        assert_eq!(np_argsort(&w), want);
    }

    const TIED: [u8; 300] = [
        15, 22, 19, 5, 7, 21, 0, 20, 19, 11, 7, 6, 6, 11, 12, 13, 24, 19, 15, 24, 5, 4, 15, 1, 0, 12, 11, 22, 15, 12,
        12, 6, 0, 4, 17, 5, 9, 0, 20, 3, 6, 22, 12, 21, 15, 18, 2, 13, 12, 21, 9, 14, 1, 9, 8, 3, 20, 9, 24, 14, 15,
        15, 16, 3, 11, 5, 10, 2, 24, 5, 16, 7, 21, 16, 3, 21, 23, 22, 14, 3, 4, 23, 13, 4, 22, 16, 14, 9, 10, 5, 0, 21,
        11, 13, 8, 18, 0, 9, 0, 3, 24, 16, 10, 13, 21, 8, 14, 17, 8, 12, 19, 22, 3, 23, 0, 18, 20, 3, 10, 20, 0, 15,
        19, 12, 18, 5, 4, 9, 4, 8, 23, 14, 8, 6, 23, 11, 24, 12, 13, 22, 18, 14, 10, 21, 10, 23, 1, 10, 12, 23, 6, 20,
        16, 17, 15, 24, 8, 9, 5, 1, 5, 22, 21, 2, 15, 11, 14, 16, 7, 24, 11, 15, 15, 4, 1, 10, 19, 20, 18, 2, 22, 20,
        21, 13, 22, 1, 0, 0, 6, 6, 4, 14, 0, 14, 4, 16, 0, 7, 23, 13, 20, 16, 15, 4, 14, 0, 20, 24, 21, 1, 8, 7, 2, 15,
        19, 7, 21, 19, 3, 19, 22, 4, 14, 15, 15, 2, 16, 15, 20, 20, 8, 18, 21, 22, 4, 0, 16, 5, 14, 23, 9, 6, 11, 16,
        2, 9, 3, 16, 20, 9, 9, 13, 5, 6, 8, 11, 2, 18, 14, 7, 1, 19, 3, 3, 3, 2, 22, 6, 7, 20, 15, 4, 10, 22, 9, 17, 2,
        18, 19, 20, 16, 9, 1, 12, 18, 4, 6, 13, 18, 22, 3, 4, 19, 16, 18, 24, 23, 21, 19, 9,
    ];
    const NUMPY_ORDER: [u16; 300] = [
        96, 24, 98, 196, 90, 205, 192, 235, 187, 32, 120, 6, 114, 186, 37, 185, 23, 146, 52, 209, 282, 260, 159, 174,
        212, 46, 67, 179, 276, 244, 163, 256, 225, 265, 55, 99, 262, 79, 63, 246, 263, 264, 74, 218, 39, 117, 290, 112,
        291, 173, 285, 190, 80, 83, 203, 194, 271, 128, 126, 33, 234, 221, 21, 158, 160, 237, 125, 252, 69, 89, 3, 35,
        65, 20, 253, 40, 31, 133, 150, 267, 12, 189, 188, 286, 11, 241, 197, 10, 168, 211, 268, 4, 215, 259, 71, 94,
        54, 254, 230, 156, 108, 129, 132, 210, 105, 127, 274, 245, 281, 157, 249, 250, 87, 36, 299, 240, 57, 50, 53,
        97, 147, 144, 142, 272, 102, 88, 118, 175, 66, 64, 13, 255, 165, 26, 92, 242, 170, 9, 135, 42, 283, 148, 14,
        30, 109, 29, 123, 48, 137, 25, 287, 15, 251, 93, 82, 47, 183, 103, 138, 199, 166, 131, 106, 78, 141, 191, 204,
        258, 193, 59, 51, 238, 86, 222, 223, 202, 227, 213, 270, 224, 0, 28, 22, 154, 44, 121, 60, 164, 61, 172, 171,
        18, 62, 280, 70, 226, 73, 236, 101, 243, 247, 85, 152, 167, 293, 201, 195, 107, 275, 153, 34, 115, 45, 231,
        124, 95, 284, 140, 277, 178, 294, 257, 288, 176, 2, 292, 110, 17, 261, 219, 122, 217, 214, 278, 298, 8, 56, 38,
        269, 279, 248, 7, 181, 151, 206, 119, 200, 177, 116, 229, 228, 143, 208, 91, 5, 162, 216, 43, 49, 182, 232,
        297, 72, 104, 75, 84, 161, 77, 139, 273, 27, 1, 111, 184, 41, 266, 220, 233, 289, 180, 198, 296, 149, 81, 239,
        134, 130, 113, 145, 76, 16, 295, 100, 58, 169, 19, 155, 207, 68, 136,
    ];

    #[test]
    fn heapsort_sorts() {
        let v: Vec<f64> = (0..40).map(|i| ((i * 7919) % 41) as f64).collect();
        let mut t: Vec<usize> = (0..40).collect();
        heapsort(&v, &mut t);
        assert!(sorted(&v, &t));
    }

    #[test]
    fn nans_go_last() {
        let v = [2.0, f64::NAN, 1.0, f64::NAN, 3.0];
        assert_eq!(pandas_order(&v, true), vec![2, 0, 4, 1, 3]);
        assert_eq!(pandas_order(&v, false), vec![4, 0, 2, 1, 3]);
    }
}
