//! Loss and accuracy curves as a PNG (plotters' bitmap backend).
//!
//! Text needs a font: plotters' `ab_glyph` feature renders a TrueType file that must be
//! registered at run time. We use DejaVu Sans from Debian's `fonts-dejavu-core` package; when it
//! is missing the plot is still drawn, without any text, and [`PlotText::None`] says so.

use crate::train::EpochRecord;
use plotters::prelude::*;
use std::path::Path;

/// Where the plot's font is looked for (`fonts-dejavu-core`).
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

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
#[error("cannot draw {path}: {msg}")]
pub struct PlotError {
    path: String,
    msg: String,
}

fn font() -> PlotText {
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

/// Draws train/test loss (left) and accuracy (right) per epoch into `path` (800x400 PNG).
pub fn plot_history(
    history: &[EpochRecord],
    title: &str,
    path: &Path,
) -> Result<PlotText, PlotError> {
    let text = font();
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.display().to_string(),
        msg: e.to_string(),
    };
    let root = BitMapBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = if text == PlotText::DejaVu {
        root.titled(title, ("sans-serif", 20))
            .map_err(|e| err(&e))?
    } else {
        root
    };
    let panels = root.split_evenly((1, 2));
    let n = history.len().max(1) as f64;
    let max_loss = history
        .iter()
        .flat_map(|r| [r.train_loss, r.test_loss])
        .fold(0.1f32, f32::max) as f64
        * 1.05;
    let min_acc = history
        .iter()
        .flat_map(|r| [r.train_acc, r.test_acc])
        .fold(100f32, f32::min)
        .min(90.0) as f64;
    type Series = (&'static str, RGBColor, fn(&EpochRecord) -> f32);
    let specs: [(&str, (f64, f64), [Series; 2]); 2] = [
        (
            "loss",
            (0.0, max_loss),
            [
                ("train", BLUE, |r| r.train_loss),
                ("test", RED, |r| r.test_loss),
            ],
        ),
        (
            "accuracy %",
            ((min_acc - 2.0).max(0.0), 100.0),
            [
                ("train", BLUE, |r| r.train_acc),
                ("test", RED, |r| r.test_acc),
            ],
        ),
    ];
    for (area, (name, yr, series)) in panels.iter().zip(specs) {
        let mut b = ChartBuilder::on(area);
        b.margin(12);
        if text == PlotText::DejaVu {
            b.caption(name, ("sans-serif", 16))
                .x_label_area_size(30)
                .y_label_area_size(45);
        }
        let mut chart = b
            .build_cartesian_2d(1f64..n.max(2.0), yr.0..yr.1)
            .map_err(|e| err(&e))?;
        let mut mesh = chart.configure_mesh();
        if text == PlotText::DejaVu {
            mesh.x_desc("epoch").label_style(("sans-serif", 12));
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw().map_err(|e| err(&e))?;
        for (label, color, f) in series {
            let s = chart
                .draw_series(LineSeries::new(
                    history.iter().map(|r| (r.epoch as f64, f(r) as f64)),
                    color.stroke_width(2),
                ))
                .map_err(|e| err(&e))?;
            if text == PlotText::DejaVu {
                s.label(label).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            }
        }
        if text == PlotText::DejaVu {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .draw()
                .map_err(|e| err(&e))?;
        }
    }
    root.present().map_err(|e| err(&e))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.png");
        let h: Vec<EpochRecord> = (1..=4)
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
            .collect();
        plot_history(&h, "test run", &p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(bytes.len() > 2000);
    }
}
