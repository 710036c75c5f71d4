//! A query's rows as the data of a figure, read by column name as
//! docs/plots.md lists them: what each plot needs is named once here, so
//! the shell, the tests and the docs agree on it.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;

use crate::PlotError;

/// Which picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pareto,
    Gemm,
    Step,
    Accuracy,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pareto => "pareto",
            Kind::Gemm => "gemm",
            Kind::Step => "step",
            Kind::Accuracy => "accuracy",
        }
    }

    pub fn parse(name: &str) -> Result<Kind, PlotError> {
        match name {
            "pareto" => Ok(Kind::Pareto),
            "gemm" => Ok(Kind::Gemm),
            "step" => Ok(Kind::Step),
            "accuracy" => Ok(Kind::Accuracy),
            other => Err(PlotError::Input(format!("unknown plot '{other}': pareto, gemm, step or accuracy"))),
        }
    }
}

/// One series of points, in the order they are drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Joined by a line (else drawn as points).
    pub line: bool,
}

/// A labelled point (a best config of a search).
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub at: (f64, f64),
    pub text: String,
}

/// One stacked bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub name: String,
    /// (op name, height), bottom to top.
    pub segments: Vec<(String, f64)>,
}

/// What a figure shows, independent of where it is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    Pareto {
        /// Every candidate, a series per mode.
        candidates: Vec<Series>,
        /// The frontier of each mode, joined in x order.
        fronts: Vec<Series>,
        best: Vec<Label>,
        /// tokens/s/user at the TPOT limit.
        tpot_limit_x: Option<f64>,
    },
    Gemm {
        series: Vec<Series>,
    },
    Step {
        bars: Vec<Bar>,
    },
    /// Estimates against measurements: one series per metric, each point
    /// (measured, predicted); on the diagonal the estimate is exact.
    Accuracy {
        series: Vec<Series>,
    },
}

impl Figure {
    /// Reads the rows of a query for `kind`.
    pub fn from_batches(kind: Kind, batches: &[RecordBatch]) -> Result<Figure, PlotError> {
        let table = Table::new(kind, batches)?;
        match kind {
            Kind::Pareto => pareto(&table),
            Kind::Gemm => gemm(&table),
            Kind::Step => step(&table),
            Kind::Accuracy => accuracy(&table),
        }
    }

    /// Series name and point count of everything drawn (bars: one series
    /// per bar with a point per segment), for tests and summaries.
    pub fn summary(&self) -> Vec<(String, usize)> {
        match self {
            Figure::Pareto { candidates, fronts, best, .. } => candidates
                .iter()
                .map(|s| (s.name.clone(), s.points.len()))
                .chain(fronts.iter().map(|s| (format!("{} frontier", s.name), s.points.len())))
                .chain(std::iter::once(("best configs".to_string(), best.len())))
                .collect(),
            Figure::Gemm { series } | Figure::Accuracy { series } => {
                series.iter().map(|s| (s.name.clone(), s.points.len())).collect()
            }
            Figure::Step { bars } => bars.iter().map(|b| (b.name.clone(), b.segments.len())).collect(),
        }
    }
}

/// The columns of a result, each as one array over all its rows.
struct Table {
    kind: Kind,
    rows: usize,
    columns: HashMap<String, ArrayRef>,
}

impl Table {
    fn new(kind: Kind, batches: &[RecordBatch]) -> Result<Table, PlotError> {
        let rows = batches.iter().map(RecordBatch::num_rows).sum();
        let mut columns = HashMap::new();
        if let Some(first) = batches.first() {
            for (i, field) in first.schema().fields().iter().enumerate() {
                let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(i).as_ref()).collect();
                let joined = arrow::compute::concat(&parts).map_err(|e| PlotError::Input(e.to_string()))?;
                columns.insert(field.name().clone(), joined);
            }
        }
        Ok(Table { kind, rows, columns })
    }

    fn column(&self, name: &str, to: &DataType) -> Result<Option<ArrayRef>, PlotError> {
        let Some(array) = self.columns.get(name) else { return Ok(None) };
        cast(array, to)
            .map(Some)
            .map_err(|e| PlotError::Input(format!("plot {}: column {name} is not {to}: {e}", self.kind.name())))
    }

    fn required(&self, name: &str, to: &DataType) -> Result<ArrayRef, PlotError> {
        self.column(name, to)?.ok_or_else(|| {
            let mut have: Vec<&str> = self.columns.keys().map(String::as_str).collect();
            have.sort_unstable();
            PlotError::Input(format!(
                "plot {} needs a column named {name} (the query has: {}); see docs/plots.md",
                self.kind.name(),
                have.join(", ")
            ))
        })
    }

    fn floats(&self, name: &str, required: bool) -> Result<Option<Vec<Option<f64>>>, PlotError> {
        let array = if required {
            Some(self.required(name, &DataType::Float64)?)
        } else {
            self.column(name, &DataType::Float64)?
        };
        Ok(array.map(|a| {
            let a = a.as_primitive::<arrow::datatypes::Float64Type>();
            (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i))).collect()
        }))
    }

    fn texts(&self, name: &str, required: bool) -> Result<Option<Vec<Option<String>>>, PlotError> {
        let array =
            if required { Some(self.required(name, &DataType::Utf8)?) } else { self.column(name, &DataType::Utf8)? };
        Ok(array.map(|a| {
            let a = a.as_string::<i32>();
            (0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())).collect()
        }))
    }

    fn bools(&self, name: &str) -> Result<Option<Vec<bool>>, PlotError> {
        Ok(self.column(name, &DataType::Boolean)?.map(|a| {
            let a = a.as_boolean();
            (0..a.len()).map(|i| a.is_valid(i) && a.value(i)).collect()
        }))
    }

    fn need_rows(&self) -> Result<(), PlotError> {
        if self.rows == 0 {
            return Err(PlotError::Input(format!("plot {}: the query returned no rows", self.kind.name())));
        }
        Ok(())
    }
}

/// Values a row must have: NULL x or y means the row is not drawn.
fn point(x: Option<f64>, y: Option<f64>) -> Option<(f64, f64)> {
    Some((x?, y?)).filter(|(x, y)| x.is_finite() && y.is_finite())
}

/// Series in first-appearance order of their names.
fn group<T>(names: impl Iterator<Item = String>, values: impl Iterator<Item = T>) -> Vec<(String, Vec<T>)> {
    let mut out: Vec<(String, Vec<T>)> = Vec::new();
    for (name, value) in names.zip(values) {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(value),
            None => out.push((name, vec![value])),
        }
    }
    out
}

fn pareto(t: &Table) -> Result<Figure, PlotError> {
    t.need_rows()?;
    let x = t.floats("tokens_per_s_per_user", true)?.unwrap_or_default();
    let y = t.floats("tokens_per_s_per_gpu_cluster", true)?.unwrap_or_default();
    let mode = t.texts("mode", false)?;
    let front = t.bools("pareto")?;
    let rank = t.floats("best_rank", false)?;
    let parallel = t.texts("parallel", false)?;
    let limit = t.floats("tpot_limit_ms", false)?;
    let mode_of = |i: usize| mode.as_ref().and_then(|m| m[i].clone()).unwrap_or_else(|| "candidates".to_string());
    let rows: Vec<usize> = (0..t.rows).filter(|&i| point(x[i], y[i]).is_some()).collect();
    let pt = |i: usize| point(x[i], y[i]).unwrap_or_default();
    let candidates = group(rows.iter().map(|&i| mode_of(i)), rows.iter().map(|&i| pt(i)))
        .into_iter()
        .map(|(name, points)| Series { name, points, line: false })
        .collect();
    let on_front: Vec<usize> = rows.iter().copied().filter(|&i| front.as_ref().is_some_and(|f| f[i])).collect();
    let fronts = group(on_front.iter().map(|&i| mode_of(i)), on_front.iter().map(|&i| pt(i)))
        .into_iter()
        .map(|(name, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { name, points, line: true }
        })
        .collect();
    let mut best: Vec<(f64, Label)> = rows
        .iter()
        .filter_map(|&i| {
            let r = rank.as_ref()?[i]?;
            let label = parallel.as_ref().and_then(|p| p[i].clone()).unwrap_or_default();
            let text = if mode.is_some() { format!("#{r} {} {label}", mode_of(i)) } else { format!("#{r} {label}") };
            Some((r, Label { at: pt(i), text: text.trim_end().to_string() }))
        })
        .collect();
    best.sort_by(|a, b| a.0.total_cmp(&b.0));
    let tpot_limit_x = limit.and_then(|l| l.into_iter().flatten().find(|v| *v > 0.0)).map(|ms| 1000.0 / ms);
    Ok(Figure::Pareto { candidates, fronts, best: best.into_iter().map(|(_, l)| l).collect(), tpot_limit_x })
}

fn gemm(t: &Table) -> Result<Figure, PlotError> {
    t.need_rows()?;
    let names = t.texts("series", true)?.unwrap_or_default();
    let m = t.floats("m", true)?.unwrap_or_default();
    let ms = t.floats("latency_ms", true)?.unwrap_or_default();
    let style = t.texts("style", false)?;
    // Log axes: only positive values can be drawn.
    let rows: Vec<usize> =
        (0..t.rows).filter(|&i| point(m[i], ms[i]).is_some_and(|(x, y)| x > 0.0 && y > 0.0)).collect();
    let name = |i: usize| names[i].clone().unwrap_or_else(|| "(null)".to_string());
    let line_of = |i: usize| style.as_ref().and_then(|s| s[i].as_deref()) == Some("line");
    let series = group(
        rows.iter().map(|&i| name(i)),
        rows.iter().map(|&i| (point(m[i], ms[i]).unwrap_or_default(), line_of(i))),
    )
    .into_iter()
    .map(|(name, points)| {
        let line = points.iter().any(|(_, l)| *l);
        let mut points: Vec<(f64, f64)> = points.into_iter().map(|(p, _)| p).collect();
        if line {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Series { name, points, line }
    })
    .collect();
    Ok(Figure::Gemm { series })
}

fn step(t: &Table) -> Result<Figure, PlotError> {
    t.need_rows()?;
    let bar = t.texts("bar", true)?.unwrap_or_default();
    let op = t.texts("op_name", true)?.unwrap_or_default();
    let ms = t.floats("latency_ms", true)?.unwrap_or_default();
    let rows = (0..t.rows).filter(|&i| ms[i].is_some_and(|v| v.is_finite() && v >= 0.0));
    let rows: Vec<usize> = rows.collect();
    let bars = group(
        rows.iter().map(|&i| bar[i].clone().unwrap_or_default()),
        rows.iter().map(|&i| (op[i].clone().unwrap_or_default(), ms[i].unwrap_or_default())),
    )
    .into_iter()
    .map(|(name, segments)| Bar { name, segments })
    .collect();
    Ok(Figure::Step { bars })
}

/// The metrics an accuracy plot draws: (series name, measured column,
/// predicted column), as `queries/accuracy/silicon_refs.sql` names them.
const ACCURACY_METRICS: [(&str, &str, &str); 2] =
    [("TTFT", "silicon_ttft_ms", "predicted_ttft_ms"), ("TPOT", "silicon_tpot_ms", "predicted_tpot_ms")];

fn accuracy(t: &Table) -> Result<Figure, PlotError> {
    t.need_rows()?;
    let mut series = Vec::new();
    for (name, measured, predicted) in ACCURACY_METRICS {
        let x = t.floats(measured, true)?.unwrap_or_default();
        let y = t.floats(predicted, true)?.unwrap_or_default();
        // Log axes: a point without a prediction (a miss) or a non-positive value is not drawn.
        let points: Vec<(f64, f64)> =
            x.into_iter().zip(y).filter_map(|(x, y)| point(x, y)).filter(|(x, y)| *x > 0.0 && *y > 0.0).collect();
        series.push(Series { name: name.to_string(), points, line: false });
    }
    if series.iter().all(|s| s.points.is_empty()) {
        return Err(PlotError::Input(
            "plot accuracy: no row with a positive measured and predicted value (every point a miss?)".into(),
        ));
    }
    Ok(Figure::Accuracy { series })
}
