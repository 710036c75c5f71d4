//! What `gemm_latency` and `gemm_sol` share: the (db, quant, m, n, k)
//! signature, argument checks, per-batch resolution of db and quant, and
//! the row loop.

use std::sync::Arc;

use datafusion::arrow::array::Float64Builder;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, Signature, TypeSignature, Volatility};

use aicsql_tables::{DataTree, GemmQuant};

use crate::args::{Int, Text, coerce};
use crate::config::AicOptions;
use crate::database::{Database, resolve};
use crate::errors::tables_error;

/// Largest dimension accepted; keeps every exact product inside i128.
pub(crate) const MAX_DIM: i64 = aicsql_tables::sol::MAX_GEMM_DIM;

/// `(text, text, bigint, bigint, bigint)`: the exact form is what
/// `SHOW FUNCTIONS` / information_schema list; the user-defined branch
/// (see [`coerce_gemm`]) accepts every string type and any integer.
pub(crate) fn gemm_signature() -> Signature {
    let exact = vec![DataType::Utf8, DataType::Utf8, DataType::Int64, DataType::Int64, DataType::Int64];
    Signature::one_of(vec![TypeSignature::Exact(exact), TypeSignature::UserDefined], Volatility::Stable)
}

pub(crate) fn coerce_gemm(function: &str, arg_types: &[DataType]) -> Result<Vec<DataType>> {
    coerce(function, arg_types, 2, 3)
}

/// The session's `aic.*` settings (defaults when the extension is absent).
pub(crate) fn options(args: &ScalarFunctionArgs) -> Result<AicOptions> {
    AicOptions::from_config(&args.config_options)
}

/// Rejects shapes the spec cannot price: m < 0, n < 1, k < 1 (m = 0 is
/// valid: the spec extrapolates it).
#[inline]
pub(crate) fn check_shape(function: &str, m: i64, n: i64, k: i64) -> Result<()> {
    if !(0..=MAX_DIM).contains(&m) {
        return exec_err!("{function}: m = {m} is out of range (0 <= m <= 2^40)");
    }
    if !(1..=MAX_DIM).contains(&n) {
        return exec_err!("{function}: n = {n} is out of range (1 <= n <= 2^40)");
    }
    if !(1..=MAX_DIM).contains(&k) {
        return exec_err!("{function}: k = {k} is out of range (1 <= k <= 2^40)");
    }
    Ok(())
}

/// Parses a quant argument; the error lists the modes a GEMM table can
/// hold. The spec's table-less `fp8_ootb` (a quant override's name) is not
/// one: a GEMM function given it is refused, not answered with a miss.
pub(crate) fn quant(function: &str, name: &str) -> Result<GemmQuant> {
    let quant = name.parse::<GemmQuant>().map_err(|e| tables_error(function, e))?;
    if !quant.has_tables() {
        return exec_err!(
            "{function}: GEMM quant mode '{name}' has no table in any database (only a quant override may name              it); valid modes: {}",
            GemmQuant::names(&GemmQuant::ALL)
        );
    }
    Ok(quant)
}

/// Resolved (db, quant) pairs of one batch. Lookups compare the argument
/// strings with the last hit, then the few others seen in the batch: no
/// hashing, no allocation unless a new pair appears.
struct Resolved<R> {
    entries: Vec<(String, String, Arc<R>)>,
    last: usize,
}

impl<R> Resolved<R> {
    fn get(&mut self, db: &str, quant: &str, resolve: impl FnOnce() -> Result<R>) -> Result<Arc<R>> {
        if let Some((d, q, r)) = self.entries.get(self.last)
            && d == db
            && q == quant
        {
            return Ok(Arc::clone(r));
        }
        if let Some(i) = self.entries.iter().position(|(d, q, _)| d == db && q == quant) {
            self.last = i;
            return Ok(Arc::clone(&self.entries[i].2));
        }
        let r = Arc::new(resolve()?);
        self.entries.push((db.to_string(), quant.to_string(), Arc::clone(&r)));
        self.last = self.entries.len() - 1;
        Ok(r)
    }
}

/// Evaluates a (db, quant, m, n, k) -> DOUBLE function. `prepare` turns a
/// resolved database and quant into whatever the rows need (done once per
/// distinct pair in the batch); `row` prices one checked shape, returning
/// `None` for NULL. NULL in any argument gives NULL.
pub(crate) fn evaluate<R>(
    function: &str,
    tree: &DataTree,
    args: &ScalarFunctionArgs,
    prepare: impl Fn(&Database, GemmQuant, &AicOptions) -> Result<R>,
    row: impl Fn(&R, i64, i64, i64) -> Result<Option<f64>>,
) -> Result<ColumnarValue> {
    let [db, q, m, n, k] = args.args.as_slice() else {
        return exec_err!("{function} takes 5 arguments, got {}", args.args.len());
    };
    let options = options(args)?;
    let (db, q) = (Text::new(function, 1, db)?, Text::new(function, 2, q)?);
    let (m, n, k) = (Int::new(function, 3, m)?, Int::new(function, 4, n)?, Int::new(function, 5, k)?);
    let mut resolved = Resolved { entries: Vec::new(), last: 0 };
    let mut prepare_pair = |db_arg: &str, quant_arg: &str| {
        resolved.get(db_arg, quant_arg, || {
            let quant = quant(function, quant_arg)?;
            let database = resolve(function, tree, db_arg, &options)?;
            prepare(&database, quant, &options)
        })
    };
    let all_scalar = matches!((&m, &n, &k), (Int::Scalar(_), Int::Scalar(_), Int::Scalar(_)));
    if let (Some(db_value), Some(q_value), true) = (db.scalar(), q.scalar(), all_scalar) {
        let value = match (db_value, q_value, m.get(0), n.get(0), k.get(0)) {
            (Some(d), Some(qn), Some(m), Some(n), Some(k)) => {
                let prepared = prepare_pair(d, qn)?;
                check_shape(function, m, n, k)?;
                row(&prepared, m, n, k)?
            }
            _ => None,
        };
        return Ok(ColumnarValue::Scalar(ScalarValue::Float64(value)));
    }

    let rows = args.number_rows;
    let mut out = Float64Builder::with_capacity(rows);
    // Fast path: one database and quant for the batch, no NULL shapes.
    if let (Some(Some(d)), Some(Some(qn)), Some(dm), Some(dn), Some(dk)) =
        (db.scalar(), q.scalar(), m.dense(), n.dense(), k.dense())
    {
        let prepared = prepare_pair(d, qn)?;
        for i in 0..rows {
            let (m, n, k) = (dm.at(i), dn.at(i), dk.at(i));
            check_shape(function, m, n, k)?;
            out.append_option(row(&prepared, m, n, k)?);
        }
        return Ok(ColumnarValue::Array(Arc::new(out.finish())));
    }
    for i in 0..rows {
        let value = match (db.get(i), q.get(i), m.get(i), n.get(i), k.get(i)) {
            (Some(d), Some(qn), Some(m), Some(n), Some(k)) => {
                let prepared = prepare_pair(d, qn)?;
                check_shape(function, m, n, k)?;
                row(&prepared, m, n, k)?
            }
            _ => None,
        };
        out.append_option(value);
    }
    Ok(ColumnarValue::Array(Arc::new(out.finish())))
}
