//! Pictures of query results, as docs/plots.md describes them: the Pareto
//! frontier of a deployment search, a GEMM curve with the sites it stands
//! on, an engine step per op. A figure is read from record batches by
//! column name ([`Figure::from_batches`]) and drawn with plotters as SVG,
//! as PNG (the SVG rasterised with the system's fonts) or into a terminal.

mod data;
mod draw;
mod terminal;

use std::fmt;
use std::path::Path;

use plotters::prelude::{IntoDrawingArea, SVGBackend};

pub use data::{Bar, Figure, Kind, Label, Series};

use draw::Look;

/// Why a plot could not be made.
#[derive(Debug)]
pub enum PlotError {
    /// The rows do not make this plot (a missing column, no rows).
    Input(String),
    /// Drawing failed.
    Draw(String),
    /// The file could not be written.
    Io { path: String, message: String },
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlotError::Input(m) => f.write_str(m),
            PlotError::Draw(m) => write!(f, "drawing the plot: {m}"),
            PlotError::Io { path, message } => write!(f, "cannot write {path}: {message}"),
        }
    }
}

impl std::error::Error for PlotError {}

/// Picture size in pixels.
pub const SIZE: (u32, u32) = (1000, 640);

/// The figure as an SVG document.
pub fn to_svg(figure: &Figure, size: (u32, u32)) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw::draw(figure, &root, &Look { font: 16, point: 3, label_area: 40, margin: 12, legend_inside: true })?;
    }
    Ok(svg)
}

/// The figure as PNG bytes: the SVG rasterised by resvg with the system's
/// fonts (text is left out where the system has none).
pub fn to_png(figure: &Figure, size: (u32, u32)) -> Result<Vec<u8>, PlotError> {
    let svg = to_svg(figure, size)?;
    let mut options = resvg::usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // The SVG asks for 'sans-serif', which fontdb maps to Arial unless told
    // otherwise: map it to a sans face this system has.
    let families: Vec<String> =
        fonts.faces().flat_map(|face| face.families.iter().map(|(name, _)| name.clone())).collect();
    let preferred = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial", "Helvetica", "FreeSans"];
    if let Some(family) =
        preferred.iter().find(|p| families.iter().any(|f| f == *p)).map(|p| p.to_string()).or(families.first().cloned())
    {
        fonts.set_sans_serif_family(family);
    }
    let tree = resvg::usvg::Tree::from_str(&svg, &options).map_err(|e| PlotError::Draw(e.to_string()))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| PlotError::Draw(format!("cannot make a {}x{} picture", size.width(), size.height())))?;
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| PlotError::Draw(e.to_string()))
}

/// Writes the figure to `path`: SVG or PNG by its extension.
pub fn write(figure: &Figure, path: &Path) -> Result<(), PlotError> {
    let io = |e: std::io::Error| PlotError::Io { path: path.display().to_string(), message: e.to_string() };
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let bytes = match extension.as_deref() {
        Some("svg") => to_svg(figure, SIZE)?.into_bytes(),
        Some("png") => to_png(figure, SIZE)?,
        _ => {
            return Err(PlotError::Input(format!(
                "cannot tell the format of {}: name it .svg or .png",
                path.display()
            )));
        }
    };
    // Written whole or not at all: a temporary file renamed into place.
    let partial = path.with_extension(format!("{}.partial", extension.unwrap_or_default()));
    std::fs::write(&partial, bytes).map_err(io)?;
    std::fs::rename(&partial, path).map_err(io)
}

/// The figure drawn in `cols` x `rows` character cells (braille dots), with
/// ANSI colours when `color`.
pub fn to_terminal(figure: &Figure, cols: u32, rows: u32, color: bool) -> Result<String, PlotError> {
    let (backend, canvas) = terminal::TextBackend::new(cols.max(40), rows.max(12));
    let root = backend.into_drawing_area();
    draw::draw(figure, &root, &Look { font: 4, point: 1, label_area: 12, margin: 2, legend_inside: false })?;
    drop(root);
    let mut text = canvas.borrow().render(color);
    for (name, (r, g, b)) in draw::legend(figure) {
        let swatch = if color { format!("\x1b[38;2;{r};{g};{b}m\u{2588}\u{2588}\x1b[0m") } else { "##".to_string() };
        text.push_str(&format!("  {swatch} {name}\n"));
    }
    Ok(text)
}
