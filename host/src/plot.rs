//! Loss and accuracy curves as a PNG (plotters' bitmap backend).
//!
//! Text needs a font: plotters' `ab_glyph` feature renders a TrueType file that must be
//! registered at run time. We use DejaVu Sans from Debian's `fonts-dejavu-core` package; when it
//! is missing the plot is still drawn, without any text, and [`PlotText::None`] says so.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use systole_train::EpochRecord;

/// Where the plot's font is looked for (`fonts-dejavu-core`).
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Width and height of the PNG in pixels.
pub const SIZE: (u32, u32) = (900, 440);
/// Height of the strip above the panels that holds the legend: the legend has its own
/// room, so it never hides a curve.
const LEGEND_HEIGHT: u32 = 22;

/// Whether the plot has text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotText {
    /// Titles and axis labels drawn with DejaVu Sans.
    DejaVu,
    /// No font found: curves and grid only.
    None,
}

/// Why the plot failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// plotters could not draw or encode the image.
    #[error("cannot draw {path}: {msg}")]
    Draw {
        /// The PNG file.
        path: String,
        /// plotters' message.
        msg: String,
    },
    /// The file could not be written.
    #[error(transparent)]
    Output(#[from] systole_train::OutputError),
}

pub(crate) fn font() -> PlotText {
    static FONT: std::sync::OnceLock<PlotText> = std::sync::OnceLock::new();
    *FONT.get_or_init(|| match std::fs::read(FONT_PATH) {
        // plotters keeps registered fonts for the whole process, so the bytes are leaked once.
        Ok(bytes) => match plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            Box::leak(bytes.into_boxed_slice()),
        ) {
            Ok(()) => PlotText::DejaVu,
            Err(_) => PlotText::None,
        },
        Err(_) => PlotText::None,
    })
}

/// The two curves of each panel: train in blue, test in red.
type Series = (&'static str, RGBColor, fn(&EpochRecord) -> f32);
const LOSS: [Series; 2] = [
    ("train", BLUE, |r| r.train_loss),
    ("test", RED, |r| r.test_loss),
];
const ACCURACY: [Series; 2] = [
    ("train", BLUE, |r| r.train_acc),
    ("test", RED, |r| r.test_acc),
];

/// Draws train/test loss (left) and accuracy (right) per epoch into `path` (a PNG of [`SIZE`]).
/// Written like every output ([`systole_train::replace_with`]): drawn into a temporary file,
/// then renamed over `path`.
pub fn plot_history(
    history: &[EpochRecord],
    title: &str,
    path: &Path,
) -> Result<PlotText, PlotError> {
    let mut text = PlotText::None;
    systole_train::replace_with(path, |tmp, _| -> Result<(), PlotError> {
        let root = BitMapBackend::new(tmp, SIZE).into_drawing_area();
        text = draw_history(root, history, title, true).map_err(|msg| PlotError::Draw {
            path: path.display().to_string(),
            msg,
        })?;
        Ok(())
    })?;
    Ok(text)
}

/// Draws the plot on any plotters backend (a file, or a pixel buffer in the tests).
fn draw_history<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    history: &[EpochRecord],
    title: &str,
    legend: bool,
) -> Result<PlotText, String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let text = font();
    root.fill(&WHITE).map_err(err)?;
    let root = if text == PlotText::DejaVu {
        root.titled(title, ("sans-serif", 20)).map_err(err)?
    } else {
        root
    };
    let (legend_area, body) = root.split_vertically(LEGEND_HEIGHT);
    if legend && text == PlotText::DejaVu {
        draw_legend(&legend_area).map_err(err)?;
    }
    // Epochs are whole numbers: an integer axis gives ticks 1, 2, 3 (never 2.0, 4.0).
    let last_epoch = history.iter().map(|r| r.epoch as u32).max().unwrap_or(1);
    let epochs = 1u32..last_epoch.max(2);
    let max_loss = history
        .iter()
        .flat_map(|r| [r.train_loss, r.test_loss])
        .filter(|v| v.is_finite())
        .fold(0.1f32, f32::max) as f64
        * 1.05;
    let min_acc = history
        .iter()
        .flat_map(|r| [r.train_acc, r.test_acc])
        .filter(|v| v.is_finite())
        .fold(100f32, f32::min)
        .min(90.0) as f64;
    let panels = [
        ("loss", (0.0, max_loss), LOSS),
        ("accuracy %", ((min_acc - 2.0).max(0.0), 100.0), ACCURACY),
    ];
    for (area, (name, (y0, y1), series)) in body.split_evenly((1, 2)).iter().zip(panels) {
        let mut b = ChartBuilder::on(area);
        b.margin(12);
        if text == PlotText::DejaVu {
            b.caption(name, ("sans-serif", 16))
                .x_label_area_size(30)
                .y_label_area_size(45);
        }
        let mut chart = b.build_cartesian_2d(epochs.clone(), y0..y1).map_err(err)?;
        let mut mesh = chart.configure_mesh();
        if text == PlotText::DejaVu {
            mesh.x_desc("epoch").label_style(("sans-serif", 12));
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw().map_err(err)?;
        for (_, color, f) in series {
            let points: Vec<(u32, f64)> = history
                .iter()
                .map(|r| (r.epoch as u32, f(r) as f64))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(err)?;
            // A marker on every epoch, so a run of one epoch still shows its values.
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, color.filled())),
                )
                .map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(text)
}

/// One legend for both panels (they share colours), in its own strip above them.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let y = LEGEND_HEIGHT as i32 / 2;
    let mut x = area.dim_in_pixel().0 as i32 / 2 - 70;
    for (label, color, _) in LOSS {
        area.draw(&PathElement::new(
            vec![(x, y), (x + 20, y)],
            color.stroke_width(2),
        ))?;
        area.draw(&Text::new(
            label,
            (x + 26, y - 7),
            ("sans-serif", 13).into_font(),
        ))?;
        x += 80;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(epochs: usize) -> Vec<EpochRecord> {
        (1..=epochs)
            .map(|e| EpochRecord {
                epoch: e,
                train_loss: 1.0 / e as f32,
                train_acc: 80.0 + e as f32,
                test_acc: 79.0 + e as f32,
                test_loss: 1.1 / e as f32,
                seconds: 0.1,
                retries: 0,
                saturated_words: 0,
            })
            .collect()
    }

    /// Pixels of exactly `color` in an RGB buffer of [`SIZE`] from row `from_row` down, per
    /// half (left panel, right panel).
    fn count(buf: &[u8], color: RGBColor, from_row: u32) -> (usize, usize) {
        let (w, _) = SIZE;
        let mut halves = (0, 0);
        for (i, px) in buf.chunks(3).enumerate() {
            if i as u32 / w >= from_row && px == [color.0, color.1, color.2] {
                if (i as u32 % w) < w / 2 {
                    halves.0 += 1;
                } else {
                    halves.1 += 1;
                }
            }
        }
        halves
    }

    fn render(h: &[EpochRecord], legend: bool) -> Vec<u8> {
        let mut buf = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, SIZE).into_drawing_area();
            draw_history(root, h, "test run", legend).unwrap();
        }
        buf
    }

    #[test]
    fn writes_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.png");
        plot_history(&history(4), "test run", &p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(bytes.len() > 2000);
    }

    #[test]
    fn a_one_epoch_run_shows_its_values_in_both_panels() {
        let buf = render(&history(1), true);
        for color in [BLUE, RED] {
            let (left, right) = count(&buf, color, 0);
            // Each marker is a filled disc of radius 3 (about 25 pixels), beside the legend's.
            assert!(
                left >= 20 && right >= 20,
                "{color:?}: {left} / {right} pixels"
            );
        }
    }

    #[test]
    fn the_legend_hides_no_curve() {
        // Below the title and the legend strip, the panels look the same with and without
        // the legend: it covers no curve pixel.
        let h = history(12);
        let (with, without) = (render(&h, true), render(&h, false));
        for color in [BLUE, RED] {
            let below = 70;
            assert!(count(&without, color, below).0 > 100);
            assert_eq!(count(&with, color, below), count(&without, color, below));
        }
    }
}
