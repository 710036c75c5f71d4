//! A figure drawn with plotters onto any backend (SVG, the terminal), so
//! the three outputs are one picture.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::PlotError;
use crate::data::{Figure, Series};

/// Sizes that differ between a picture and a terminal.
pub(crate) struct Look {
    pub font: u32,
    pub point: u32,
    pub label_area: u32,
    pub margin: u32,
    /// The legend inside the chart (pictures); a terminal prints it below
    /// instead, where it does not cover the data.
    pub legend_inside: bool,
}

/// The legend: each series' name and colour, as the chart draws them.
pub(crate) fn legend(figure: &Figure) -> Vec<(String, (u8, u8, u8))> {
    let rgb = |i: usize| {
        let c = color(i);
        (c.0, c.1, c.2)
    };
    match figure {
        Figure::Pareto { candidates, .. } => {
            candidates.iter().enumerate().map(|(i, s)| (s.name.clone(), rgb(i))).collect()
        }
        Figure::Gemm { series } | Figure::Accuracy { series } => {
            series.iter().enumerate().map(|(i, s)| (s.name.clone(), rgb(i))).collect()
        }
        Figure::Step { bars } => {
            step_ops(bars).into_iter().enumerate().map(|(i, op)| (op.to_string(), rgb(i))).collect()
        }
    }
}

/// Op names in first-appearance order over the bars: one colour each.
fn step_ops(bars: &[crate::data::Bar]) -> Vec<&str> {
    let mut ops: Vec<&str> = Vec::new();
    for b in bars {
        for (op, _) in &b.segments {
            if !ops.contains(&op.as_str()) {
                ops.push(op);
            }
        }
    }
    ops
}

fn err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

fn color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// (min, max) of values, padded so nothing sits on the frame.
fn span(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = 0.0;
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo, hi + (hi - lo) * 0.05)
}

pub(crate) fn draw<DB: DrawingBackend>(
    figure: &Figure,
    root: &DrawingArea<DB, Shift>,
    look: &Look,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    match figure {
        Figure::Pareto { candidates, fronts, best, tpot_limit_x } => {
            pareto(root, look, candidates, fronts, best, *tpot_limit_x)
        }
        Figure::Gemm { series } => gemm(root, look, series),
        Figure::Step { bars } => step(root, look, bars),
        Figure::Accuracy { series } => accuracy(root, look, series),
    }?;
    root.present().map_err(err)
}

/// The series' legend inside the chart (pictures only; a terminal prints
/// it below, see [`legend`]).
fn legend_box<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    look: &Look,
    position: SeriesLabelPosition,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    if !look.legend_inside {
        return Ok(());
    }
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", look.font))
        .draw()
        .map_err(err)
}

fn pareto<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    look: &Look,
    candidates: &[Series],
    fronts: &[Series],
    best: &[crate::data::Label],
    limit_x: Option<f64>,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let all = || candidates.iter().flat_map(|s| s.points.iter());
    let (_, x_max) = span(all().map(|p| p.0).chain(limit_x), true);
    let (_, y_max) = span(all().map(|p| p.1), true);
    let font = ("sans-serif", look.font);
    let mut chart = ChartBuilder::on(root)
        .caption("Pareto frontier", font)
        .margin(look.margin)
        .x_label_area_size(look.label_area)
        .y_label_area_size(look.label_area * 2)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("tokens/s/user")
        .y_desc("tokens/s/gpu_cluster")
        .label_style(font)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    for (i, s) in candidates.iter().enumerate() {
        let c = color(i);
        let size = look.point;
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, size, c.mix(0.35).filled())))
            .map_err(err)?
            .label(format!("{} ({})", s.name, s.points.len()))
            .legend(move |p| Circle::new(p, size, c.filled()));
        if let Some(front) = fronts.iter().find(|f| f.name == s.name) {
            chart.draw_series(LineSeries::new(front.points.iter().copied(), c.stroke_width(2))).map_err(err)?;
            chart.draw_series(front.points.iter().map(|&p| Circle::new(p, size, c.filled()))).map_err(err)?;
        }
    }
    if let Some(x) = limit_x {
        chart
            .draw_series(LineSeries::new([(x, 0.0), (x, y_max)], RED.stroke_width(1)))
            .map_err(err)?
            .label("TPOT limit")
            .legend(|(x, y)| PathElement::new([(x - 8, y), (x + 8, y)], RED));
    }
    chart
        .draw_series(best.iter().map(|l| {
            EmptyElement::at(l.at)
                + Cross::new((0, 0), look.point + 1, BLACK)
                + Text::new(l.text.clone(), (6, -6), font)
        }))
        .map_err(err)?;
    legend_box(&mut chart, look, SeriesLabelPosition::UpperRight)
}

fn gemm<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, look: &Look, series: &[Series]) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x_lo = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_hi = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let y_lo = all().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let y_hi = all().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    if !(x_lo.is_finite() && y_lo.is_finite()) {
        return Err(PlotError::Input("plot gemm: no row with m > 0 and latency_ms > 0".into()));
    }
    let font = ("sans-serif", look.font);
    let mut chart = ChartBuilder::on(root)
        .caption("GEMM latency against m", font)
        .margin(look.margin)
        .x_label_area_size(look.label_area)
        .y_label_area_size(look.label_area * 2)
        .build_cartesian_2d((x_lo * 0.8..x_hi * 1.25).log_scale(), (y_lo * 0.8..y_hi * 1.25).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("m (tokens)")
        .y_desc("latency (ms)")
        .label_style(font)
        .y_label_formatter(&|v| format!("{v:.3}"))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let size = look.point;
        if s.line {
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new([(x - 8, y), (x + 8, y)], c.stroke_width(2)));
        } else {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, size, c.filled())))
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |p| Circle::new(p, size, c.filled()));
        }
    }
    legend_box(&mut chart, look, SeriesLabelPosition::UpperLeft)
}

fn step<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    look: &Look,
    bars: &[crate::data::Bar],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let totals: Vec<f64> = bars.iter().map(|b| b.segments.iter().map(|s| s.1).sum()).collect();
    let (_, y_max) = span(totals.iter().copied(), true);
    let ops = step_ops(bars);
    let font = ("sans-serif", look.font);
    let n = bars.len() as i32;
    let mut chart = ChartBuilder::on(root)
        .caption("Engine step per op", font)
        .margin(look.margin)
        .x_label_area_size(look.label_area)
        .y_label_area_size(look.label_area * 2)
        .build_cartesian_2d(-0.5..(f64::from(n) - 0.5), 0.0..y_max)
        .map_err(err)?;
    let names: Vec<String> = bars.iter().map(|b| b.name.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("ms")
        .label_style(font)
        .x_labels(2 * bars.len() + 1)
        // A bar's name under its centre (whole x values), nothing elsewhere.
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() > 1e-6 || i < 0.0 {
                String::new()
            } else {
                names.get(i as usize).cloned().unwrap_or_default()
            }
        })
        .draw()
        .map_err(err)?;
    for (k, op) in ops.iter().enumerate() {
        let c = color(k);
        let mut rects = Vec::new();
        for (i, b) in bars.iter().enumerate() {
            let mut base = 0.0;
            for (name, h) in &b.segments {
                if name == op {
                    let x = i as f64;
                    rects.push(Rectangle::new([(x - 0.35, base), (x + 0.35, base + h)], c.filled()));
                }
                base += h;
            }
        }
        chart
            .draw_series(rects)
            .map_err(err)?
            .label((*op).to_string())
            .legend(move |(x, y)| Rectangle::new([(x - 5, y - 4), (x + 5, y + 4)], c.filled()));
    }
    legend_box(&mut chart, look, SeriesLabelPosition::UpperRight)
}

/// Predicted against measured on log axes (TTFT and TPOT differ by orders
/// of magnitude), with the diagonal where the estimate equals the
/// measurement and the lines of a factor of two either side.
fn accuracy<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, look: &Look, series: &[Series]) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let all = || series.iter().flat_map(|s| s.points.iter()).flat_map(|p| [p.0, p.1]);
    let lo = all().fold(f64::INFINITY, f64::min);
    let hi = all().fold(f64::NEG_INFINITY, f64::max);
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(PlotError::Input("plot accuracy: no point to draw".into()));
    }
    let (lo, hi) = (lo / 1.5, hi * 1.5);
    let font = ("sans-serif", look.font);
    let mut chart = ChartBuilder::on(root)
        .caption("Estimated against measured", font)
        .margin(look.margin)
        .x_label_area_size(look.label_area)
        .y_label_area_size(look.label_area * 2)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("measured (ms)")
        .y_desc("estimated (ms)")
        .label_style(font)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new([(lo, lo), (hi, hi)], BLACK.stroke_width(1)))
        .map_err(err)?
        .label("estimate = measurement")
        .legend(|(x, y)| PathElement::new([(x - 8, y), (x + 8, y)], BLACK));
    let faint = BLACK.mix(0.3);
    // y = 2x and y = x / 2, each cut to the square [lo, hi]^2 (plotters
    // clamps a point outside the range, which would bend the line).
    for (start, end) in [((lo, lo * 2.0), (hi / 2.0, hi)), ((lo * 2.0, lo), (hi, hi / 2.0))] {
        chart.draw_series(LineSeries::new([start, end], faint.stroke_width(1))).map_err(err)?;
    }
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let size = look.point + 1;
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, size, c.filled())))
            .map_err(err)?
            .label(format!("{} ({})", s.name, s.points.len()))
            .legend(move |p| Circle::new(p, size, c.filled()));
    }
    legend_box(&mut chart, look, SeriesLabelPosition::UpperLeft)
}
