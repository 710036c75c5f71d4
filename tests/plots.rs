//! The four plots from the real queries of queries/plot/: each read as a
//! figure (its series and points checked against what the query must
//! give), written as SVG and PNG, and drawn in a terminal.

mod common;

use std::path::PathBuf;

use aicsql::SessionBuilder;
use aicsql_plot::{Figure, Kind};

/// The figure of queries/plot/<kind>.sql, run after the files `before`
/// (paths from the repository root) in one session, as `aicsql plot` runs them.
async fn figure_after(kind: Kind, before: &[&str]) -> Figure {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let plot = format!("queries/plot/{}.sql", kind.name());
    let ctx = SessionBuilder::with_tree(common::tree()).build();
    let mut last = Vec::new();
    for file in before.iter().copied().chain([plot.as_str()]) {
        let sql = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        last = aicsql::run_statements(&ctx, &sql)
            .await
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .pop()
            .expect("a statement");
    }
    Figure::from_batches(kind, &last).unwrap_or_else(|e| panic!("{e}"))
}

async fn figure(kind: Kind) -> Figure {
    figure_after(kind, &[]).await
}

/// Writes SVG and PNG and draws in a terminal; every output is real.
fn draw_everywhere(figure: &Figure, name: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    for ext in ["svg", "png"] {
        let path = dir.path().join(format!("{name}.{ext}"));
        aicsql_plot::write(figure, &path).unwrap_or_else(|e| panic!("{e}"));
        let bytes = std::fs::read(&path).expect("written");
        let magic: &[u8] = if ext == "svg" { b"<svg" } else { b"\x89PNG" };
        assert!(bytes.len() > 5_000 && bytes.starts_with(magic), "{name}.{ext}: {} bytes", bytes.len());
    }
    let text = aicsql_plot::to_terminal(figure, 100, 30, false).expect("terminal");
    assert!(text.lines().count() >= 30 && text.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)), "{text}");
}

#[tokio::test]
async fn pareto_of_the_llama_search() {
    let f = figure(Kind::Pareto).await;
    // The golden case's frames: 341 agg and 24 disagg candidates, 41 and 15
    // on the frontier, 3 + 2 best configs, the TPOT limit of 50 ms.
    assert_eq!(
        f.summary(),
        [("agg", 341), ("disagg", 24), ("agg frontier", 41), ("disagg frontier", 15), ("best configs", 5)]
            .map(|(n, c)| (n.to_string(), c))
    );
    let Figure::Pareto { fronts, best, tpot_limit_x, .. } = &f else { panic!("{f:?}") };
    assert_eq!(*tpot_limit_x, Some(20.0));
    assert!(fronts.iter().all(|s| s.points.windows(2).all(|w| w[0].0 <= w[1].0)), "frontiers in x order");
    assert!(best[0].text.starts_with("#1 agg tp1pp1dp1etp1ep1"), "{:?}", best[0]);
    draw_everywhere(&f, "pareto");
}

#[tokio::test]
async fn gemm_curve_and_its_sites() {
    let f = figure(Kind::Gemm).await;
    let summary = f.summary();
    assert_eq!(summary.len(), 5, "{summary:?}");
    assert_eq!(summary[0], ("estimate (1280, 5120)".to_string(), 15));
    assert!(summary[1..].iter().all(|(name, n)| name.starts_with("measured (") && *n == 74), "{summary:?}");
    let Figure::Gemm { series } = &f else { panic!("{f:?}") };
    assert!(series[0].line && series[1..].iter().all(|s| !s.line));
    draw_everywhere(&f, "gemm");
}

#[tokio::test]
async fn step_bars_sum_to_ttft_and_tpot() {
    let f = figure(Kind::Step).await;
    let Figure::Step { bars } = &f else { panic!("{f:?}") };
    assert_eq!(bars.len(), 2);
    let total = |i: usize| bars[i].segments.iter().map(|s| s.1).sum::<f64>();
    // The worked example: TTFT 24.74004986586315, TPOT 7.121815664339327.
    assert!((total(0) - 24.74004986586315).abs() < 1e-9, "{}", total(0));
    assert!((total(1) - 7.121815664339327).abs() < 1e-9, "{}", total(1));
    assert_eq!(f.summary(), vec![("context (TTFT)".to_string(), 14), ("generation (TPOT)".to_string(), 14)]);
    draw_everywhere(&f, "step");
}

#[tokio::test]
async fn accuracy_of_the_specs_measured_points() {
    let f = figure_after(Kind::Accuracy, &["queries/accuracy/silicon_refs.sql"]).await;
    // The 31 points the spec prices of its 35 measurements, TTFT and TPOT each.
    assert_eq!(f.summary(), vec![("TTFT".to_string(), 31), ("TPOT".to_string(), 31)]);
    let Figure::Accuracy { series } = &f else { panic!("{f:?}") };
    // Measured first: the golden's first point (by id) measured 2,530.07 ms TTFT on h100_sxm/sglang.
    assert!(series[0].points.iter().all(|&(x, y)| x > 0.0 && y > 0.0));
    assert!(series[0].points.iter().any(|&(x, _)| (x - 2530.0745766125).abs() < 1e-9), "{:?}", series[0]);
    draw_everywhere(&f, "accuracy");
    // A query whose points are all misses has nothing to draw, and says so.
    let ctx = SessionBuilder::with_tree(common::tree()).build();
    let batches = ctx
        .sql("SELECT 10.0 AS silicon_ttft_ms, CAST(NULL AS DOUBLE) AS predicted_ttft_ms, 2.0 AS silicon_tpot_ms, CAST(NULL AS DOUBLE) AS predicted_tpot_ms")
        .await
        .expect("plan")
        .collect()
        .await
        .expect("run");
    let e = Figure::from_batches(Kind::Accuracy, &batches).expect_err("nothing to draw");
    assert!(e.to_string().contains("plot accuracy: no row with a positive measured and predicted value"), "{e}");
}

#[tokio::test]
async fn a_missing_column_is_named() {
    let ctx = SessionBuilder::with_tree(common::tree()).build();
    let batches = ctx.sql("SELECT 1 AS m, 2.0 AS latency_ms").await.expect("plan").collect().await.expect("run");
    let e = Figure::from_batches(Kind::Gemm, &batches).expect_err("no series column");
    assert!(e.to_string().contains("plot gemm needs a column named series"), "{e}");
    let e = aicsql_plot::write(&Figure::Step { bars: vec![] }, std::path::Path::new("x.jpeg")).expect_err("format");
    assert!(e.to_string().contains("name it .svg or .png"), "{e}");
}
