//! The Grid resolver (docs/spec 7.1): a nested table of `N` integer axes, walked
//! level by level; exact keys collapse a level, other coordinates bracket and
//! blend, ragged brackets keep the survivor corrected by a SOL ratio, and a
//! query past the data is answered by util-hold.
//!
//! Every level keeps its keys in **insertion order** (first appearance in the
//! concatenated source rows) besides a sorted view: the hold's snapping on
//! outer axes breaks distance ties by that order, as the spec's dict does.
//! A grid is built once and immutable afterwards; queries allocate nothing.

use std::fmt;

use crate::pymath::median;

/// How a query was answered (the goldens' `interp_path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GridPath {
    ExactHit,
    Interpolation,
    UtilHold,
}

impl GridPath {
    pub fn name(self) -> &'static str {
        match self {
            GridPath::ExactHit => "exact_hit",
            GridPath::Interpolation => "grid_interpolation",
            GridPath::UtilHold => "grid_util_hold",
        }
    }
}

/// Why a grid has no answer (the spec raises `InterpolationDataNotAvailableError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridMiss {
    /// The table (or the slice) holds no point.
    EmptyTable,
    /// A level of the walk has no keys.
    EmptyBranch { axis: usize },
    /// Both bracketing branches failed without leaving the data range.
    NoUsableBranch { axis: usize },
    /// Util-hold found no boundary point with a positive util.
    NoPositiveAnchor,
    /// Util-hold: the SOL at the query is not positive.
    NonPositiveSol,
}

impl fmt::Display for GridMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GridMiss::EmptyTable => f.write_str("empty table"),
            GridMiss::EmptyBranch { axis } => write!(f, "empty branch at axis {axis}"),
            GridMiss::NoUsableBranch { axis } => write!(f, "no usable branch at axis {axis}"),
            GridMiss::NoPositiveAnchor => f.write_str("no positive-util boundary anchor"),
            GridMiss::NonPositiveSol => f.write_str("non-positive SOL at query"),
        }
    }
}

/// How values are blended along the configured transform axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridConfig {
    /// Axis blended in sqrt space (`(sqrt(a) + (sqrt(b) - sqrt(a)) * w)^2`);
    /// all other axes blend raw.
    pub sqrt_axis: Option<usize>,
    /// Points of the innermost axis the hold takes its median util over.
    pub k_tail: usize,
}

impl GridConfig {
    /// Raw blending everywhere, `k_tail = 1` (all-reduce, NCCL, MoE, generation attention).
    pub const RAW: GridConfig = GridConfig { sqrt_axis: None, k_tail: 1 };
}

/// One level of the nesting.
#[derive(Debug, Clone, Default)]
struct Node {
    /// Keys in insertion order.
    keys: Vec<i64>,
    /// Parallel to `keys`: a node index (inner levels) or a value index (last level).
    children: Vec<u32>,
    /// Positions into `keys`, ordered by key.
    sorted: Vec<u32>,
}

impl Node {
    /// Position (insertion order) of key `c`.
    #[inline]
    fn find(&self, c: i64) -> Option<usize> {
        self.sorted.binary_search_by_key(&c, |&p| self.keys[p as usize]).ok().map(|i| self.sorted[i] as usize)
    }

    /// Where key `c` is: `Ok(position)` (insertion order) when present, else
    /// `Err(rank)`, its place in key order. Tables arrive grouped by their
    /// outer keys and mostly ascending, so the last key inserted and the
    /// largest key are tried before the binary search.
    #[inline]
    fn locate(&self, c: i64) -> Result<usize, usize> {
        if let Some(&last) = self.keys.last() {
            if last == c {
                return Ok(self.keys.len() - 1);
            }
            if let Some(&top) = self.sorted.last()
                && self.keys[top as usize] < c
            {
                return Err(self.sorted.len());
            }
        }
        match self.sorted.binary_search_by_key(&c, |&p| self.keys[p as usize]) {
            Ok(i) => Ok(self.sorted[i] as usize),
            Err(i) => Err(i),
        }
    }

    #[inline]
    fn sorted_key(&self, i: usize) -> i64 {
        self.keys[self.sorted[i] as usize]
    }
}

/// A nested table over `N` integer axes (outer to inner) with `f64` leaves.
#[derive(Debug, Clone)]
pub struct Grid<const N: usize> {
    nodes: Vec<Node>,
    values: Vec<f64>,
}

impl<const N: usize> Default for Grid<N> {
    fn default() -> Self {
        Grid { nodes: vec![Node::default()], values: Vec::new() }
    }
}

/// Failure inside the bracketing walk.
#[derive(Debug, Clone, Copy)]
enum Fail {
    OutOfRange,
    Miss(GridMiss),
}

impl<const N: usize> Grid<N> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of stored points.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Inserts a point; a key already present keeps its first value (the
    /// spec's first-wins). Returns whether the key was new.
    pub fn insert(&mut self, coords: [i64; N], value: f64) -> bool {
        self.put(coords, value, false)
    }

    /// Inserts a point; a key already present takes the new value but keeps
    /// its position (a Python dict assigned in place: the MLA module
    /// tables' last-wins). Returns whether the key was new.
    pub fn upsert(&mut self, coords: [i64; N], value: f64) -> bool {
        self.put(coords, value, true)
    }

    fn put(&mut self, coords: [i64; N], value: f64, overwrite: bool) -> bool {
        let mut node = 0usize;
        for (depth, &c) in coords.iter().enumerate() {
            let last = depth + 1 == N;
            let n = &self.nodes[node];
            match n.locate(c) {
                Ok(position) => {
                    let child = n.children[position] as usize;
                    if last {
                        if overwrite {
                            self.values[child] = value;
                        }
                        return false;
                    }
                    node = child;
                }
                Err(i) => {
                    let child = if last {
                        self.values.push(value);
                        self.values.len() - 1
                    } else {
                        self.nodes.push(Node::default());
                        self.nodes.len() - 1
                    };
                    let n = &mut self.nodes[node];
                    n.sorted.insert(i, n.keys.len() as u32);
                    n.keys.push(c);
                    n.children.push(child as u32);
                    if last {
                        return true;
                    }
                    node = child;
                }
            }
        }
        false
    }

    /// Visits every point with its coordinates (insertion order), e.g. to
    /// raise stored latencies to a floor.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&[i64; N], &mut f64)) {
        let mut coords = [0i64; N];
        let Grid { nodes, values } = self;
        walk_mut(nodes, values, 0, 0, &mut coords, &mut f);
    }

    /// The stored value at `coords`, if it is a point of the table.
    pub fn get(&self, coords: &[i64; N]) -> Option<f64> {
        let mut node = 0usize;
        for (depth, &c) in coords.iter().enumerate() {
            let n = &self.nodes[node];
            let child = n.children[n.find(c)?] as usize;
            if depth + 1 == N {
                return Some(self.values[child]);
            }
            node = child;
        }
        None
    }

    /// Keys of the outermost level in insertion order.
    pub fn outer_keys(&self) -> &[i64] {
        &self.nodes[0].keys
    }

    /// Resolves `coords`: exact hit, else bracket and blend, else util-hold.
    /// `sol` is the speed-of-light latency at a point of this grid's axes.
    pub fn resolve(
        &self,
        coords: [i64; N],
        config: GridConfig,
        sol: &impl Fn(&[i64; N]) -> f64,
    ) -> Result<(f64, GridPath), GridMiss> {
        if self.values.is_empty() {
            return Err(GridMiss::EmptyTable);
        }
        if let Some(v) = self.get(&coords) {
            return Ok((v, GridPath::ExactHit));
        }
        match self.interior(0, 0, &coords, config, sol) {
            Ok(v) => Ok((v, GridPath::Interpolation)),
            Err(Fail::Miss(miss)) => Err(miss),
            Err(Fail::OutOfRange) => self.hold(&coords, config, sol).map(|v| (v, GridPath::UtilHold)),
        }
    }

    fn interior(
        &self,
        node: usize,
        depth: usize,
        coords: &[i64; N],
        config: GridConfig,
        sol: &impl Fn(&[i64; N]) -> f64,
    ) -> Result<f64, Fail> {
        let n = &self.nodes[node];
        if n.keys.is_empty() {
            return Err(Fail::Miss(GridMiss::EmptyBranch { axis: depth }));
        }
        let last = depth + 1 == N;
        let descend = |pos: usize| -> Result<f64, Fail> {
            let child = n.children[pos] as usize;
            if last { Ok(self.values[child]) } else { self.interior(child, depth + 1, coords, config, sol) }
        };
        let c = coords[depth];
        if let Some(pos) = n.find(c) {
            return descend(pos);
        }
        let len = n.sorted.len();
        if c < n.sorted_key(0) || c > n.sorted_key(len - 1) {
            return Err(Fail::OutOfRange);
        }
        // bisect_left: first sorted key >= c (c is not a key, so > c).
        let i = n.sorted.partition_point(|&p| n.keys[p as usize] < c);
        let (lo_pos, hi_pos) = (n.sorted[i - 1] as usize, n.sorted[i] as usize);
        let (k_lo, k_hi) = (n.keys[lo_pos], n.keys[hi_pos]);
        let lo = descend(lo_pos);
        let hi = descend(hi_pos);
        match (lo, hi) {
            (Ok(a), Ok(b)) => {
                // Python: w = (c - k_lo) / (k_hi - k_lo) on ints (exact below 2^53).
                let w = (c - k_lo) as f64 / (k_hi - k_lo) as f64;
                Ok(if config.sqrt_axis == Some(depth) {
                    let (sa, sb) = (to_sqrt(a), to_sqrt(b));
                    let v = sa + (sb - sa) * w;
                    v * v
                } else {
                    a + (b - a) * w
                })
            }
            (Ok(v), Err(_)) => Ok(ragged(v, coords, depth, k_lo, sol)),
            (Err(_), Ok(v)) => Ok(ragged(v, coords, depth, k_hi, sol)),
            (Err(a), Err(b)) => {
                if matches!(a, Fail::OutOfRange) || matches!(b, Fail::OutOfRange) {
                    Err(Fail::OutOfRange)
                } else {
                    Err(Fail::Miss(GridMiss::NoUsableBranch { axis: depth }))
                }
            }
        }
    }

    /// Util-hold past the data: snap every outer axis to its key (or the
    /// nearest key, ties to the key inserted first), hold the median util of
    /// the innermost boundary points, divide the query's SOL by it.
    fn hold(&self, coords: &[i64; N], config: GridConfig, sol: &impl Fn(&[i64; N]) -> f64) -> Result<f64, GridMiss> {
        let mut snapped = *coords;
        let mut node = 0usize;
        for (depth, snap) in snapped.iter_mut().enumerate().take(N - 1) {
            let n = &self.nodes[node];
            if n.keys.is_empty() {
                return Err(GridMiss::EmptyBranch { axis: depth });
            }
            let c = coords[depth];
            let pos = n.find(c).unwrap_or_else(|| nearest_first_inserted(&n.keys, c));
            *snap = n.keys[pos];
            node = n.children[pos] as usize;
        }
        let n = &self.nodes[node];
        if n.keys.is_empty() {
            return Err(GridMiss::EmptyBranch { axis: N - 1 });
        }
        let c = coords[N - 1];
        let len = n.sorted.len();
        let k_tail = config.k_tail.clamp(1, len);
        let tail: std::ops::Range<usize> = if c > n.sorted_key(len - 1) {
            len - k_tail..len
        } else if c < n.sorted_key(0) {
            0..k_tail
        } else {
            // Sorted search: on a tie the smaller key (met first) wins.
            let mut best = 0usize;
            for i in 1..len {
                if n.sorted_key(i).abs_diff(c) < n.sorted_key(best).abs_diff(c) {
                    best = i;
                }
            }
            best..best + 1
        };
        let mut utils = [0f64; 8];
        let mut count = 0usize;
        let mut extra: Vec<f64> = Vec::new();
        for i in tail {
            let pos = n.sorted[i] as usize;
            let lat = self.values[n.children[pos] as usize];
            snapped[N - 1] = n.keys[pos];
            let s = sol(&snapped);
            if lat > 0.0 && s > 0.0 {
                if count < utils.len() {
                    utils[count] = s / lat;
                } else {
                    extra.push(s / lat);
                }
                count += 1;
            }
        }
        if count == 0 {
            return Err(GridMiss::NoPositiveAnchor);
        }
        let sol_q = sol(coords);
        if sol_q <= 0.0 {
            return Err(GridMiss::NonPositiveSol);
        }
        let anchor = if extra.is_empty() {
            median(&mut utils[..count])
        } else {
            let mut all: Vec<f64> = utils.to_vec();
            all.extend(extra);
            median(&mut all)
        };
        Ok(sol_q / anchor.unwrap_or(f64::NAN))
    }
}

fn walk_mut<const N: usize>(
    nodes: &[Node],
    values: &mut [f64],
    node: usize,
    depth: usize,
    coords: &mut [i64; N],
    f: &mut impl FnMut(&[i64; N], &mut f64),
) {
    let n = &nodes[node];
    for (pos, &key) in n.keys.iter().enumerate() {
        coords[depth] = key;
        let child = n.children[pos] as usize;
        if depth + 1 == N {
            f(coords, &mut values[child]);
        } else {
            walk_mut(nodes, values, child, depth + 1, coords, f);
        }
    }
}

/// Python's `min(node.keys(), key=lambda k: abs(k - c))`: the first key in
/// insertion order among those nearest to `c`.
fn nearest_first_inserted(keys: &[i64], c: i64) -> usize {
    let mut best = 0usize;
    for (i, &k) in keys.iter().enumerate().skip(1) {
        if k.abs_diff(c) < keys[best].abs_diff(c) {
            best = i;
        }
    }
    best
}

/// `math.sqrt(lat) if lat > 0 else 0.0`.
#[inline]
fn to_sqrt(v: f64) -> f64 {
    if v > 0.0 { v.sqrt() } else { 0.0 }
}

/// One bracket branch dropped: hold the survivor's util across this axis,
/// `lat * (SOL(query) / SOL(query with this axis at the survivor's key))`,
/// unless either SOL is unusable (then the survivor as is).
fn ragged<const N: usize>(
    lat: f64,
    coords: &[i64; N],
    depth: usize,
    survivor: i64,
    sol: &impl Fn(&[i64; N]) -> f64,
) -> f64 {
    let mut snapped = *coords;
    snapped[depth] = survivor;
    let (sol_q, sol_s) = (sol(coords), sol(&snapped));
    if sol_q.is_finite() && sol_s.is_finite() && sol_q > 0.0 && sol_s > 0.0 { lat * (sol_q / sol_s) } else { lat }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid2(points: &[([i64; 2], f64)]) -> Grid<2> {
        let mut g = Grid::new();
        for &(c, v) in points {
            g.insert(c, v);
        }
        g
    }

    const NO_SOL: fn(&[i64; 2]) -> f64 = |_| f64::NAN;

    #[test]
    fn first_insert_wins() {
        let mut g: Grid<1> = Grid::new();
        assert!(g.insert([4], 1.0));
        assert!(!g.insert([4], 2.0));
        assert_eq!(g.get(&[4]), Some(1.0));
        assert_eq!(g.len(), 1);
    }

    /// Inserts in ascending, descending, grouped and scattered key orders
    /// (the fast paths of `locate` and the binary search) keep first-wins,
    /// insertion order and key order, checked against a plain map.
    #[test]
    fn inserts_in_any_key_order_match_a_map() {
        let mut rng = crate::test_rng::XorShift::new(0x2545_f491_4f6c_dd1d);
        let mut next = |m: i64| (rng.next_u64() % m as u64) as i64;
        let orders: [Vec<[i64; 2]>; 4] = [
            (0..40).map(|i| [i / 8, i % 8]).collect(),
            (0..40).rev().map(|i| [i / 8, i % 8]).collect(),
            (0..40).map(|i| [i % 5, 40 - i]).collect(),
            (0..200).map(|_| [next(6), next(30)]).collect(),
        ];
        for keys in orders {
            let mut g: Grid<2> = Grid::new();
            let mut reference: std::collections::BTreeMap<[i64; 2], f64> = Default::default();
            let mut outer_first: Vec<i64> = Vec::new();
            for (i, &k) in keys.iter().enumerate() {
                let value = i as f64;
                let new = !reference.contains_key(&k);
                assert_eq!(g.insert(k, value), new, "{k:?}");
                reference.entry(k).or_insert(value);
                if !outer_first.contains(&k[0]) {
                    outer_first.push(k[0]);
                }
            }
            assert_eq!(g.len(), reference.len());
            for (k, v) in &reference {
                assert_eq!(g.get(k), Some(*v), "{k:?}");
            }
            assert_eq!(g.get(&[99, 99]), None);
            assert_eq!(g.outer_keys(), outer_first);
        }
    }

    /// Last-wins keeps the key where it first appeared.
    #[test]
    fn upsert_overwrites_in_place() {
        let mut g: Grid<1> = Grid::new();
        assert!(g.upsert([8], 1.0));
        assert!(g.upsert([2], 3.0));
        assert!(!g.upsert([8], 2.0));
        assert_eq!(g.get(&[8]), Some(2.0));
        assert_eq!(g.outer_keys(), [8, 2]);
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn exact_hit_returns_the_stored_value() {
        let g = grid2(&[([1, 10], 0.5), ([1, 20], 0.7)]);
        assert_eq!(g.resolve([1, 20], GridConfig::RAW, &NO_SOL), Ok((0.7, GridPath::ExactHit)));
    }

    /// Raw blend: 1.0 + (2.0 - 1.0) * (15 - 10) / (20 - 10) = 1.5 exactly.
    #[test]
    fn raw_blend_between_brackets() {
        let mut g: Grid<1> = Grid::new();
        g.insert([20], 2.0);
        g.insert([10], 1.0);
        let sol = |_: &[i64; 1]| f64::NAN;
        assert_eq!(g.resolve([15], GridConfig::RAW, &sol), Ok((1.5, GridPath::Interpolation)));
        // w = 3/10: 1.0 + 1.0 * 0.3 = 1.3 (0.3 is the double nearest 3/10).
        assert_eq!(g.resolve([13], GridConfig::RAW, &sol).map(|r| r.0), Ok(1.3));
    }

    /// Sqrt blend on the configured axis: sqrt(1) = 1, sqrt(9) = 3, w = 1/2
    /// -> (1 + (3 - 1) * 0.5)^2 = 4; a raw blend would give 5.
    #[test]
    fn sqrt_blend_only_on_the_transform_axis() {
        let g = grid2(&[([1, 10], 1.0), ([1, 20], 9.0), ([3, 10], 1.0), ([3, 20], 1.0)]);
        let cfg = GridConfig { sqrt_axis: Some(1), k_tail: 1 };
        assert_eq!(g.resolve([1, 15], cfg, &NO_SOL), Ok((4.0, GridPath::Interpolation)));
        // Axis 0 stays raw: at seq 20, heads 2 blends 9 and 1 -> 5.
        assert_eq!(g.resolve([2, 20], cfg, &NO_SOL), Ok((5.0, GridPath::Interpolation)));
    }

    /// Ragged: heads 3 lacks seq 15's bracket (its seq keys stop at 10), so
    /// only the heads-1 branch survives at 4.0 (sqrt-blended 1 and 9); it is
    /// scaled by SOL(2, 15) / SOL(1, 15) = 30 / 15 = 2 -> 8.
    #[test]
    fn ragged_branch_is_corrected_by_the_sol_ratio() {
        let g = grid2(&[([1, 10], 1.0), ([1, 20], 9.0), ([3, 10], 1.0)]);
        let cfg = GridConfig { sqrt_axis: Some(1), k_tail: 1 };
        let sol = |c: &[i64; 2]| (c[0] * c[1]) as f64;
        assert_eq!(g.resolve([2, 15], cfg, &sol), Ok((8.0, GridPath::Interpolation)));
        // Unusable SOL: the survivor as is.
        assert_eq!(g.resolve([2, 15], cfg, &NO_SOL), Ok((4.0, GridPath::Interpolation)));
    }

    /// Past the innermost range: util of the last point = SOL(100)/lat(100)
    /// = 100 / 4 = 25; the query's SOL 300 / 25 = 12.
    #[test]
    fn util_hold_past_the_innermost_axis() {
        let mut g: Grid<1> = Grid::new();
        g.insert([10], 2.0);
        g.insert([100], 4.0);
        let sol = |c: &[i64; 1]| c[0] as f64;
        assert_eq!(g.resolve([300], GridConfig::RAW, &sol), Ok((12.0, GridPath::UtilHold)));
        // Below: util 10 / 2 = 5 -> SOL(5) / 5 = 1.
        assert_eq!(g.resolve([5], GridConfig::RAW, &sol), Ok((1.0, GridPath::UtilHold)));
        // k_tail 2 takes the median (mean of two): utils 5 and 25 -> 15; 300 / 15 = 20.
        let cfg = GridConfig { sqrt_axis: None, k_tail: 2 };
        assert_eq!(g.resolve([300], cfg, &sol), Ok((20.0, GridPath::UtilHold)));
    }

    /// Outer axis out of range with the inner coordinate inside: the outer
    /// coordinate snaps to the nearest key; on an exact tie (c = 6 between 4
    /// and 8) the key inserted first wins. The inner axis takes its single
    /// nearest key, the smaller one on a tie.
    #[test]
    fn hold_snaps_outer_axes_in_insertion_order() {
        // Heads 8 inserted before heads 4. Heads 6 lies inside [4, 8]; the
        // query leaves the data through the inner axis of both branches.
        let g = grid2(&[([8, 100], 2.0), ([4, 100], 1.0), ([8, 300], 2.0), ([4, 300], 1.0)]);
        let sol = |c: &[i64; 2]| (c[0] * c[1]) as f64;
        // Query (6, 400): inner 400 > 300 in both branches -> out of range ->
        // hold. Heads: |8-6| == |4-6|, 8 was inserted first -> snapped 8.
        // Tail: last key 300, util = 8*300/2 = 1200; SOL(6, 400) = 2400 -> 2.
        assert_eq!(g.resolve([6, 400], GridConfig::RAW, &sol), Ok((2.0, GridPath::UtilHold)));
        // Inserted the other way round, heads 4 wins the tie.
        let g = grid2(&[([4, 100], 1.0), ([8, 100], 2.0), ([4, 300], 3.0), ([8, 300], 2.0)]);
        // util = 4*300/3 = 400; 2400 / 400 = 6.
        assert_eq!(g.resolve([6, 400], GridConfig::RAW, &sol), Ok((6.0, GridPath::UtilHold)));
        // Outer out of range (heads 10 > 8, snapped to 8), inner in range
        // midway between 100 and 300: the smaller key 100 anchors.
        // util = 8*100/2 = 400; SOL(10, 200) = 2000 -> 5.
        assert_eq!(g.resolve([10, 200], GridConfig::RAW, &sol), Ok((5.0, GridPath::UtilHold)));
    }

    #[test]
    fn misses_are_values() {
        let g: Grid<1> = Grid::new();
        let sol = |_: &[i64; 1]| 1.0;
        assert_eq!(g.resolve([1], GridConfig::RAW, &sol), Err(GridMiss::EmptyTable));
        let mut g: Grid<1> = Grid::new();
        g.insert([10], 0.0);
        // Hold with no positive util.
        assert_eq!(g.resolve([20], GridConfig::RAW, &sol), Err(GridMiss::NoPositiveAnchor));
    }

    #[test]
    fn for_each_mut_visits_in_insertion_order() {
        let mut g = grid2(&[([2, 1], 1.0), ([1, 5], 2.0), ([2, 0], 3.0)]);
        let mut seen = Vec::new();
        g.for_each_mut(|c, v| {
            seen.push((*c, *v));
            *v += 10.0;
        });
        assert_eq!(seen, [([2, 1], 1.0), ([2, 0], 3.0), ([1, 5], 2.0)]);
        assert_eq!(g.get(&[2, 0]), Some(13.0));
        assert_eq!(g.outer_keys(), [2, 1]);
    }
}
