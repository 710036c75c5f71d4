//! A plotters backend that draws into a terminal: every character cell is
//! a 2 x 4 grid of braille dots, so lines and points keep four times the
//! resolution of plain characters; text lands on whole cells. Colours are
//! ANSI 256-colour codes (or none, for pipes and logs).

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use plotters_backend::FontTransform;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingBackend, DrawingErrorKind};

/// Dots of a cell: (column, row) -> bit of the braille pattern.
const DOT_BITS: [[u8; 4]; 2] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]];

#[derive(Clone, Copy, Default)]
struct Cell {
    dots: u8,
    color: Option<(u8, u8, u8)>,
    text: Option<char>,
}

/// A character canvas of `cols` x `rows` cells.
pub struct Canvas {
    cols: u32,
    rows: u32,
    cells: Vec<Cell>,
}

/// The backend draws into a canvas the caller keeps a handle to (a
/// drawing area owns its backend).
pub struct TextBackend {
    canvas: Rc<RefCell<Canvas>>,
}

/// Never raised: drawing into memory cannot fail.
#[derive(Debug)]
pub struct NoError;

impl fmt::Display for NoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("terminal drawing")
    }
}

impl std::error::Error for NoError {}

impl TextBackend {
    pub fn new(cols: u32, rows: u32) -> (Self, Rc<RefCell<Canvas>>) {
        let canvas = Rc::new(RefCell::new(Canvas { cols, rows, cells: vec![Cell::default(); (cols * rows) as usize] }));
        (Self { canvas: Rc::clone(&canvas) }, canvas)
    }
}

impl Canvas {
    fn cell(&mut self, col: i32, row: i32) -> Option<&mut Cell> {
        if col < 0 || row < 0 || col as u32 >= self.cols || row as u32 >= self.rows {
            return None;
        }
        self.cells.get_mut((row as u32 * self.cols + col as u32) as usize)
    }

    /// The picture as lines of text, with ANSI colours when `color`.
    pub fn render(&self, color: bool) -> String {
        let mut out = String::new();
        for row in 0..self.rows {
            let mut current: Option<(u8, u8, u8)> = None;
            for col in 0..self.cols {
                let cell = self.cells[(row * self.cols + col) as usize];
                let (ch, rgb) = match (cell.text, cell.dots) {
                    (Some(c), _) => (c, None),
                    (None, 0) => (' ', None),
                    (None, dots) => (char::from_u32(0x2800 + u32::from(dots)).unwrap_or('?'), cell.color),
                };
                if color && rgb != current {
                    match rgb {
                        Some((r, g, b)) => out.push_str(&format!("\x1b[38;5;{}m", ansi256(r, g, b))),
                        None => out.push_str("\x1b[0m"),
                    }
                    current = rgb;
                }
                out.push(ch);
            }
            if color && current.is_some() {
                out.push_str("\x1b[0m");
            }
            out.truncate(out.trim_end_matches(' ').len());
            out.push('\n');
        }
        out
    }
}

/// The nearest colour of the 6 x 6 x 6 cube of 256-colour terminals.
fn ansi256(r: u8, g: u8, b: u8) -> u8 {
    let level = |v: u8| ((u16::from(v) * 5 + 127) / 255) as u8;
    16 + 36 * level(r) + 6 * level(g) + level(b)
}

impl DrawingBackend for TextBackend {
    type ErrorType = NoError;

    fn get_size(&self) -> (u32, u32) {
        let canvas = self.canvas.borrow();
        (canvas.cols * 2, canvas.rows * 4)
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<NoError>> {
        Ok(())
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<NoError>> {
        Ok(())
    }

    fn draw_pixel(&mut self, (x, y): BackendCoord, color: BackendColor) -> Result<(), DrawingErrorKind<NoError>> {
        // The background (white, or anything nearly transparent) stays blank.
        let (r, g, b) = color.rgb;
        if color.alpha < 0.3 || (r > 240 && g > 240 && b > 240) {
            return Ok(());
        }
        if x < 0 || y < 0 {
            return Ok(());
        }
        let bit = DOT_BITS[(x % 2) as usize][(y % 4) as usize];
        if let Some(cell) = self.canvas.borrow_mut().cell(x / 2, y / 4) {
            cell.dots |= bit;
            cell.color = Some(color.rgb);
        }
        Ok(())
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        _: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<NoError>> {
        Ok((text.chars().count() as u32 * 2, 4))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        (x, y): BackendCoord,
    ) -> Result<(), DrawingErrorKind<NoError>> {
        // Rotated text (an axis title) cannot be drawn in cells: left out.
        if !matches!(style.transform(), FontTransform::None) {
            return Ok(());
        }
        let width = text.chars().count() as i32;
        let col = x / 2;
        let row = y / 4;
        let anchor = style.anchor();
        let col = match anchor.h_pos {
            HPos::Left => col,
            HPos::Center => col - width / 2,
            HPos::Right => col - width,
        };
        let row = match anchor.v_pos {
            VPos::Top => row,
            VPos::Center => row,
            VPos::Bottom => row - 1,
        };
        for (i, c) in text.chars().enumerate() {
            if let Some(cell) = self.canvas.borrow_mut().cell(col + i as i32, row) {
                cell.text = Some(c);
            }
        }
        Ok(())
    }
}
