//! The sub-kernel tables context parallelism prices with (sglang, `cp > 1`):
//! a context-parallel attention layer is the busiest rank's module at
//! `ceil(isl / cp)` tokens with its super-linear sub-kernels (indexer
//! logits, top-k) swapped for the full sequence's share.
//!
//! | table | files | shape |
//! |---|---|---|
//! | [`Glm5SparseTable`], [`Dsv32SparseTable`] | `{glm5,dsv32}_{mqa_logits,topk}_module_perf`, one version dir | one architecture each, per heads: mqa / top-k last / top-k flat, batch -> (isl, step) |
//! | [`Dsv4CpTable`] | `dsv4_paged_mqa_logits_module_perf` (every source); `dsv4_csa_topk_calib_perf` (own file only) | heads -> tp -> grid (past, seq, batch); heads -> batch -> (isl, step) |
//!
//! The (isl, step) tables are read the way the spec's `_lookup_2d` reads
//! them (families_dsa.md 7): the batch slice of the request's batch, else
//! the nearest collected one (ties to the first collected); then the
//! collected isl itself or the nearest (ties to the smaller, never
//! interpolated; above the largest a miss, since these kernels grow faster
//! than linearly); then the step exactly, or linearly between the nearest
//! steps, held flat outside them.

use foldhash::HashMap;

use crate::cache::{DbKey, Slots, TableCache};
use crate::columns::{Col, Kind, Measured, Rows, scan};
use crate::discovery::DataTree;
use crate::error::{ErrorClass, Result, TablesError};
use crate::grid::{Grid, GridConfig};
use crate::kernels::{DatabaseTable, DsaArch, Origin};
use crate::sources::{
    DSV4_CSA_TOPK_CALIB_FILE, DSV4_PAGED_MQA_FILE, DSV32_DSA_ATTN_FILE, DSV32_MQA_LOGITS_FILE, DSV32_TOPK_FILE,
    GLM5_DSA_ATTN_FILE, GLM5_MQA_LOGITS_FILE, GLM5_TOPK_FILE, TableFile, TableSource, own_file, plan, sibling_file,
};

const NUM_HEADS: Col = Col::int("num_heads").optional();
const TP_SIZE: Col = Col::int("tp_size").optional();
const BATCH_SIZE: Col = Col::int("batch_size");
const ISL: Col = Col::int("isl");
const STEP: Col = Col::int("step");
const SCORE_MODE: Col = Col::text("score_mode").optional();
/// Zero latencies are data here (a top-k over a handful of tokens); NaN and
/// infinities are corrupt.
const LATENCY: Col = Col { name: "latency", kind: Kind::Float, optional: false, measured: Measured::Finite };
/// The MQA file's latency: the spec treats a non-finite chunk as no answer.
const MQA_LATENCY: Col = Col { name: "latency", kind: Kind::Float, optional: true, measured: Measured::No };

/// The paged-MQA-logits kernel runs in chunks of this many tokens, as
/// chunked prefill launches it (families_dsv4.md 5).
const MQA_CHUNK_TOKENS: i64 = 8192;

/// A lookup above the largest collected isl of a sub-kernel table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IslBeyondGrid {
    pub isl: i64,
    pub max: i64,
}

impl std::fmt::Display for IslBeyondGrid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let IslBeyondGrid { isl, max } = *self;
        write!(
            f,
            "DSA CP: isl={isl} exceeds the collected sparse-kernel grid (max isl={max}); mqa/topk scale \
             super-linearly with isl, so clamping the isl axis would silently under-estimate. Re-collect with \
             AIC_CHUNKED_PREFILL_SIZE >= {isl} (docs/CONTEXT_PARALLEL_DSA_MODELING.md \u{a7}9.1)."
        )
    }
}

/// One batch's `{(isl, step): latency}`: per isl (ascending) its steps (ascending).
#[derive(Debug, Default)]
pub struct IslSteps {
    by_isl: Vec<(i64, Vec<(i64, f64)>)>,
}

impl IslSteps {
    fn new(points: &Points) -> IslSteps {
        let mut by_isl: Vec<(i64, Vec<(i64, f64)>)> = Vec::new();
        let mut sorted: Vec<(&(i64, i64), &f64)> = points.iter().collect();
        sorted.sort_unstable_by_key(|(k, _)| **k);
        for (&(isl, step), &latency) in sorted {
            match by_isl.last_mut() {
                Some((i, steps)) if *i == isl => steps.push((step, latency)),
                _ => by_isl.push((isl, vec![(step, latency)])),
            }
        }
        IslSteps { by_isl }
    }

    /// `_lookup_2d(table, isl, step)`: `Ok(None)` for an empty table.
    pub fn lookup(&self, isl: i64, step: i64) -> std::result::Result<Option<f64>, IslBeyondGrid> {
        let Some(&(max, _)) = self.by_isl.last() else { return Ok(None) };
        if isl > max {
            return Err(IslBeyondGrid { isl, max });
        }
        // The first isl >= the request (one exists: isl <= max); the one
        // below it wins a tie of distances.
        let above = self.by_isl.partition_point(|(i, _)| *i < isl);
        let row = match above {
            0 => above,
            _ if self.by_isl[above].0 == isl => above,
            _ if isl - self.by_isl[above - 1].0 <= self.by_isl[above].0 - isl => above - 1,
            _ => above,
        };
        let steps = &self.by_isl[row].1;
        let at = steps.partition_point(|(s, _)| *s < step);
        if let Some(&(s, v)) = steps.get(at)
            && s == step
        {
            return Ok(Some(v));
        }
        // The nearest steps below and above, each the end one where there is none.
        let lo = if at == 0 { steps[0] } else { steps[at - 1] };
        let hi = steps.get(at).copied().unwrap_or(steps[steps.len() - 1]);
        if lo.0 == hi.0 {
            return Ok(Some(lo.1));
        }
        Ok(Some(lo.1 + (hi.1 - lo.1) * (step - lo.0) as f64 / (hi.0 - lo.0) as f64))
    }
}

/// Per collected batch size, in the order first collected.
#[derive(Debug, Default)]
pub struct ByBatch {
    batches: Vec<(i64, IslSteps)>,
}

impl ByBatch {
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The slice of batch `b`, else of the nearest collected batch (the first
    /// collected on a tie); `None` when nothing was collected.
    pub fn slice(&self, b: i64) -> Option<&IslSteps> {
        if let Some((_, t)) = self.batches.iter().find(|(k, _)| *k == b) {
            return Some(t);
        }
        let mut best: Option<&(i64, IslSteps)> = None;
        for entry in &self.batches {
            if best.is_none_or(|(k, _)| (entry.0 - b).abs() < (k - b).abs()) {
                best = Some(entry);
            }
        }
        best.map(|(_, t)| t)
    }
}

/// `{(isl, step): latency}` of one batch as rows arrive.
type Points = HashMap<(i64, i64), f64>;

/// `{batch: {(isl, step): latency}}` as rows arrive, last row wins.
#[derive(Debug, Default)]
struct ByBatchBuilder {
    batches: Vec<(i64, Points)>,
}

impl ByBatchBuilder {
    fn put(&mut self, batch: i64, isl: i64, step: i64, latency: f64) {
        let i = match self.batches.iter().position(|(b, _)| *b == batch) {
            Some(i) => i,
            None => {
                self.batches.push((batch, HashMap::default()));
                self.batches.len() - 1
            }
        };
        self.batches[i].1.insert((isl, step), latency);
    }

    fn build(&self) -> ByBatch {
        ByBatch { batches: self.batches.iter().map(|(b, points)| (*b, IslSteps::new(points))).collect() }
    }
}

/// Which heads a row serves: a file without `num_heads` serves every
/// request; a row with a null count serves none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowHeads {
    Any,
    Is(Option<i64>),
}

impl RowHeads {
    fn of(rows: &Rows, i: usize, present: bool) -> Result<RowHeads> {
        Ok(if present { RowHeads::Is(rows.int(NUM_HEADS)?.get(i)?) } else { RowHeads::Any })
    }

    fn serves(self, heads: i64) -> bool {
        match self {
            RowHeads::Any => true,
            RowHeads::Is(h) => h == Some(heads),
        }
    }
}

/// Whether the file has a `num_heads` column (the spec filters on it only then).
fn has_heads(tree: &DataTree, source: &TableSource) -> Result<bool> {
    Ok(tree.parquet_schema(&source.path)?.index_of(NUM_HEADS.name).is_ok())
}

/// A file without one of its key columns is corrupt, not empty (the spec's
/// loader fails on it), although null cells only skip their row.
fn require_columns(tree: &DataTree, source: &TableSource, cols: &[Col]) -> Result<()> {
    let schema = tree.parquet_schema(&source.path)?;
    match cols.iter().find(|c| schema.index_of(c.name).is_err()) {
        Some(c) => Err(TablesError::corrupt(&source.path, Some(c.name), None, "the table has no such column")),
        None => Ok(()),
    }
}

/// A row of a `(batch, isl, step) -> latency` sub-kernel file.
#[derive(Debug, Clone, Copy)]
struct SparseRow {
    heads: RowHeads,
    batch: i64,
    isl: i64,
    step: i64,
    latency: f64,
}

fn sparse_row(rows: &Rows, i: usize, present: bool) -> Result<SparseRow> {
    Ok(SparseRow {
        heads: RowHeads::of(rows, i, present)?,
        batch: rows.int(BATCH_SIZE)?.req(i)?,
        isl: rows.int(ISL)?.req(i)?,
        step: rows.int(STEP)?.req(i)?,
        latency: rows.float(LATENCY)?.req(i)?,
    })
}

/// The tables of rows serving `heads`, one per distinct head count found
/// (plus the rows of files without the column), and for any other count.
fn per_heads<T>(
    rows: &[(usize, SparseRow)],
    build: impl Fn(&mut dyn Iterator<Item = &(usize, SparseRow)>) -> T,
) -> (Vec<(i64, T)>, T) {
    let mut heads: Vec<i64> = Vec::new();
    for (_, r) in rows {
        if let RowHeads::Is(Some(h)) = r.heads
            && !heads.contains(&h)
        {
            heads.push(h);
        }
    }
    let tables = heads.iter().map(|&h| (h, build(&mut rows.iter().filter(|(_, r)| r.heads.serves(h))))).collect();
    let others = build(&mut rows.iter().filter(|(_, r)| r.heads == RowHeads::Any));
    (tables, others)
}

// ---- DSA (DeepSeek-V3.2, GLM-5.x) ------------------------------------------------------------

/// One architecture's sub-kernel tables at one head count.
#[derive(Debug, Default)]
pub struct DsaSparseKinds {
    pub mqa: ByBatch,
    pub topk_last: ByBatch,
    pub topk_flat: ByBatch,
}

/// The kinds of [`SparseRow`]s of the two DSA files.
const MQA: usize = 0;
const TOPK_LAST: usize = 1;
const TOPK_FLAT: usize = 2;

/// One architecture's DSA sub-kernel tables of a database (families_dsa.md
/// 7): the `{prefix}_mqa_logits` and `{prefix}_topk` files of the one
/// version dir the spec's resolver finds for the first of the prefix's
/// mqa-logits, top-k and dsa-attention files that exists (no union, last
/// row wins); top-k rows of score mode `flat` are the flat kind, all others
/// the last kind. Each architecture loads on its own, as the spec's cache
/// does: one's corrupt file does not stop the other.
#[derive(Debug)]
pub struct DsaSparseTable {
    origin: Origin,
    by_heads: Vec<(i64, DsaSparseKinds)>,
    others: DsaSparseKinds,
}

/// The file prefix of an architecture's sub-kernel tables.
pub fn dsa_sparse_prefix(arch: DsaArch) -> &'static str {
    match arch {
        DsaArch::GlmMoeDsa => "glm5",
        DsaArch::DeepseekV32 => "dsv32",
    }
}

fn load_arch(
    tree: &DataTree,
    db: (&str, &str, &str),
    [mqa_file, topk_file, attn_file]: [&'static TableFile; 3],
) -> Result<DsaSparseTable> {
    let mut sources = Vec::new();
    let origin = |sources| Origin { db: format!("{}/{}/{}", db.0, db.1, db.2), sources };
    let anchor = [mqa_file, topk_file, attn_file].into_iter().find_map(|f| own_file(tree, f, db.0, db.1, db.2));
    let Some(dir) = anchor.as_ref().and_then(|a| a.path.parent().map(std::path::Path::to_path_buf)) else {
        return Ok(DsaSparseTable { origin: origin(sources), by_heads: Vec::new(), others: DsaSparseKinds::default() });
    };
    let mut rows: Vec<(usize, SparseRow)> = Vec::new();
    for (file, is_topk) in [(mqa_file, false), (topk_file, true)] {
        let Some(mut source) = sibling_file(tree, file, db, &dir) else { continue };
        let present = has_heads(tree, &source)?;
        let cols = [NUM_HEADS, BATCH_SIZE, ISL, STEP, LATENCY, SCORE_MODE];
        let before = rows.len();
        scan(tree, &source, &cols, |batch| {
            let modes = batch.text(SCORE_MODE)?;
            for i in 0..batch.len() {
                let row = sparse_row(batch, i, present)?;
                let kind = match (is_topk, modes.get(i)?) {
                    (false, _) => MQA,
                    (true, Some("flat")) => TOPK_FLAT,
                    (true, _) => TOPK_LAST,
                };
                rows.push((kind, row));
            }
            Ok(())
        })?;
        source.new_keys = rows.len() - before;
        sources.push(source);
    }
    let (by_heads, others) = per_heads(&rows, |it| {
        let mut kinds: [ByBatchBuilder; 3] = Default::default();
        for (kind, r) in it {
            kinds[*kind].put(r.batch, r.isl, r.step, r.latency);
        }
        DsaSparseKinds {
            mqa: kinds[MQA].build(),
            topk_last: kinds[TOPK_LAST].build(),
            topk_flat: kinds[TOPK_FLAT].build(),
        }
    });
    Ok(DsaSparseTable { origin: origin(sources), by_heads, others })
}

impl DsaSparseTable {
    /// The tables at `heads` local attention heads.
    pub fn kinds(&self, heads: i64) -> &DsaSparseKinds {
        self.by_heads.iter().find(|(h, _)| *h == heads).map_or(&self.others, |(_, k)| k)
    }

    /// `system/backend/version`.
    pub fn db(&self) -> &str {
        &self.origin.db
    }
}

macro_rules! dsa_sparse_table {
    ($(#[$doc:meta])* $name:ident, $slot:ident, $files:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name(pub DsaSparseTable);

        impl DatabaseTable for $name {
            fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
                &cache.$slot
            }

            fn origin(&self) -> &Origin {
                &self.0.origin
            }

            fn load(tree: &DataTree, system: &str, backend: &str, version: &str, _shared: bool) -> Result<Self> {
                load_arch(tree, (system, backend, version), $files).map($name)
            }
        }
    };
}

dsa_sparse_table!(
    /// GLM-5.x's (`GlmMoeDsaForCausalLM`) `glm5_*` sub-kernel tables.
    Glm5SparseTable,
    glm5_sparse,
    [&GLM5_MQA_LOGITS_FILE, &GLM5_TOPK_FILE, &GLM5_DSA_ATTN_FILE]
);
dsa_sparse_table!(
    /// DeepSeek-V3.2's `dsv32_*` sub-kernel tables (none published).
    Dsv32SparseTable,
    dsv32_sparse,
    [&DSV32_MQA_LOGITS_FILE, &DSV32_TOPK_FILE, &DSV32_DSA_ATTN_FILE]
);

// ---- DeepSeek-V4 ------------------------------------------------------------------------------

/// DeepSeek-V4's context-parallel sub-kernels (families_dsv4.md 5): the
/// paged-MQA-logits grids and the absolute `v1_top_last` top-k latencies.
#[derive(Debug)]
pub struct Dsv4CpTable {
    origin: Origin,
    /// Per native head count: per collected tp (first collected first) a
    /// grid over (past KV, sequence, batch); every source, last row wins.
    mqa: HashMap<i64, Vec<(i64, Grid<3>)>>,
    /// Per native head count, the database's own calibration file's
    /// `v1_top_last` rows; `top_last_any` when the file has no head column.
    top_last: Vec<(i64, ByBatch)>,
    top_last_any: ByBatch,
}

impl DatabaseTable for Dsv4CpTable {
    fn slots(cache: &TableCache) -> &Slots<(DbKey, bool), Self> {
        &cache.dsv4_cp
    }

    fn origin(&self) -> &Origin {
        &self.origin
    }

    fn load(tree: &DataTree, system: &str, backend: &str, version: &str, shared_layer: bool) -> Result<Self> {
        let mut sources = match plan(tree, &DSV4_PAGED_MQA_FILE, system, backend, version, shared_layer) {
            Ok(sources) => sources,
            Err(e) if e.class() == ErrorClass::Miss => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut mqa: HashMap<i64, Vec<(i64, Grid<3>)>> = HashMap::default();
        let mqa_cols = [NUM_HEADS, TP_SIZE, BATCH_SIZE.optional(), ISL.optional(), STEP.optional(), MQA_LATENCY];
        for source in &mut sources {
            require_columns(tree, source, &mqa_cols)?;
            let mut added = 0usize;
            scan(tree, source, &mqa_cols, |rows| {
                let (heads, tps) = (rows.int(NUM_HEADS)?, rows.int(TP_SIZE)?);
                let (batches, isls, steps) =
                    (rows.int(BATCH_SIZE.optional())?, rows.int(ISL.optional())?, rows.int(STEP.optional())?);
                let latencies = rows.float(MQA_LATENCY)?;
                for i in 0..rows.len() {
                    // The generic sparse loader skips rows with a missing key or latency (3.4).
                    let (Some(h), Some(tp), Some(b), Some(isl), Some(step), Some(latency)) =
                        (heads.get(i)?, tps.get(i)?, batches.get(i)?, isls.get(i)?, steps.get(i)?, latencies.get(i)?)
                    else {
                        continue;
                    };
                    let per_tp = mqa.entry(h).or_default();
                    let t = match per_tp.iter().position(|(k, _)| *k == tp) {
                        Some(t) => t,
                        None => {
                            per_tp.push((tp, Grid::new()));
                            per_tp.len() - 1
                        }
                    };
                    if per_tp[t].1.upsert([step, isl, b], latency) {
                        added += 1;
                    }
                }
                Ok(())
            })?;
            source.new_keys = added;
        }
        let (mut top_last, mut top_last_any) = (Vec::new(), ByBatch::default());
        if let Some(mut source) = own_file(tree, &DSV4_CSA_TOPK_CALIB_FILE, system, backend, version) {
            let present = has_heads(tree, &source)?;
            let mut rows: Vec<(usize, SparseRow)> = Vec::new();
            // The spec reads `score_mode` by name (a file without it is
            // corrupt); a null mode is not `v1_top_last`.
            require_columns(tree, &source, &[SCORE_MODE])?;
            let cols = [NUM_HEADS, SCORE_MODE, BATCH_SIZE, ISL, STEP, LATENCY];
            scan(tree, &source, &cols, |batch| {
                let (modes, heads) = (batch.text(SCORE_MODE)?, batch.int(NUM_HEADS)?);
                for i in 0..batch.len() {
                    // Rows without a head count or of another mode serve no lookup.
                    if present && heads.get(i)?.is_none() || modes.get(i)? != Some("v1_top_last") {
                        continue;
                    }
                    rows.push((0, sparse_row(batch, i, present)?));
                }
                Ok(())
            })?;
            source.new_keys = rows.len();
            (top_last, top_last_any) = per_heads(&rows, |it| {
                let mut b = ByBatchBuilder::default();
                for (_, r) in it {
                    b.put(r.batch, r.isl, r.step, r.latency);
                }
                b.build()
            });
            sources.push(source);
        }
        let origin = Origin { db: format!("{system}/{backend}/{version}"), sources };
        Ok(Dsv4CpTable { origin, mqa, top_last, top_last_any })
    }
}

impl Dsv4CpTable {
    /// The paged-MQA-logits kernel over `isl` tokens after `past` cached
    /// ones, summed over chunks of 8192 tokens; `None` when the table has
    /// no grid for the heads (at `tp`, else tp 1) or any chunk no answer.
    pub fn mqa(&self, b: i64, isl: i64, past: i64, tp: i64, native_heads: i64) -> Option<f64> {
        let per_tp = self.mqa.get(&native_heads)?;
        let grid = per_tp.iter().find(|(t, _)| *t == tp).or_else(|| per_tp.iter().find(|(t, _)| *t == 1))?;
        let grid = &grid.1;
        if grid.is_empty() {
            return None;
        }
        // Scored pairs of a causal chunk after `past` tokens.
        let sol = |c: &[i64; 3]| c[2] as f64 * (c[0] as f64 * c[1] as f64 + (c[1] * c[1]) as f64 / 2.0);
        let mut total = 0.0;
        let mut offset = 0;
        while offset < isl {
            let chunk = MQA_CHUNK_TOKENS.min(isl - offset);
            let (latency, _) = grid.resolve([past + offset, chunk, b], GridConfig::RAW, &sol).ok()?;
            if !latency.is_finite() {
                return None;
            }
            total += latency;
            offset += MQA_CHUNK_TOKENS;
        }
        Some(total)
    }

    /// The absolute `v1_top_last` top-k latency at (isl, step) for batch `b`.
    pub fn top_last(
        &self,
        isl: i64,
        step: i64,
        native_heads: i64,
        b: i64,
    ) -> std::result::Result<Option<f64>, IslBeyondGrid> {
        let by_batch = self.top_last.iter().find(|(h, _)| *h == native_heads).map_or(&self.top_last_any, |(_, t)| t);
        match by_batch.slice(b) {
            Some(t) => t.lookup(isl, step),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(points: &[((i64, i64), f64)]) -> IslSteps {
        IslSteps::new(&points.iter().copied().collect())
    }

    /// `_lookup_2d`: nearest isl (ties to the smaller), exact step, linear
    /// between steps, flat outside, a miss above the largest isl.
    #[test]
    fn lookup_2d() {
        let t = table(&[((1024, 0), 1.0), ((1024, 1000), 3.0), ((2048, 0), 10.0), ((4096, 0), 20.0)]);
        assert_eq!(t.lookup(1024, 0), Ok(Some(1.0)));
        assert_eq!(t.lookup(1024, 250), Ok(Some(1.0 + (3.0 - 1.0) * 250.0 / 1000.0)));
        assert_eq!(t.lookup(1024, 5000), Ok(Some(3.0)));
        assert_eq!(t.lookup(1536, 0), Ok(Some(1.0)), "a tie goes to the smaller isl");
        assert_eq!(t.lookup(1537, 0), Ok(Some(10.0)));
        assert_eq!(t.lookup(1, 0), Ok(Some(1.0)));
        assert_eq!(t.lookup(4097, 0), Err(IslBeyondGrid { isl: 4097, max: 4096 }));
        assert_eq!(IslSteps::default().lookup(4097, 0), Ok(None));
    }

    /// The batch slice: exact, else nearest, a tie to the first collected.
    #[test]
    fn batch_slice() {
        let mut b = ByBatchBuilder::default();
        b.put(4, 1, 0, 4.0);
        b.put(2, 1, 0, 2.0);
        b.put(8, 1, 0, 8.0);
        b.put(2, 1, 0, 2.5);
        let by = b.build();
        let at = |batch| by.slice(batch).and_then(|t| t.lookup(1, 0).ok().flatten());
        assert_eq!(at(2), Some(2.5), "the last row wins");
        assert_eq!(at(3), Some(4.0), "4 was collected before 2");
        assert_eq!(at(7), Some(8.0));
        assert_eq!(ByBatch::default().slice(1).map(|_| ()), None);
    }
}
