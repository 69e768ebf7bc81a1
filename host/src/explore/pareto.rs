//! `pareto.png`: accuracy against LUTs (left) and against cycles per epoch (right), one
//! marker per design point, the Pareto front (no other point is at least as cheap and at
//! least as accurate, and better in one) in red and joined by a line, the rest in grey; a bar
//! spans the seeds' mean +- one standard deviation, and an open circle fits no board.

use super::report::PointResult;
use crate::plot::{font, PlotError, PlotText};
use plotters::prelude::*;
use std::path::Path;

/// Width and height of the PNG in pixels.
pub const SIZE: (u32, u32) = (1000, 460);

/// Indices of the points on the Pareto front of `(cost, accuracy)` pairs (lower cost and
/// higher accuracy are better), in order of cost.
pub fn front(points: &[(f64, f64)]) -> Vec<usize> {
    let dominated = |i: usize| {
        let (c, a) = points[i];
        points
            .iter()
            .any(|&(c2, a2)| c2 <= c && a2 >= a && (c2 < c || a2 > a))
    };
    let mut on: Vec<usize> = (0..points.len()).filter(|&i| !dominated(i)).collect();
    on.sort_by(|&i, &j| points[i].0.total_cmp(&points[j].0));
    on
}

/// The cost axes: LUTs (logic + LUT RAM) and cycles per epoch.
/// A point without resources (W != 16: no W-bit hardware yet) has no LUT cost (NaN) and is
/// left out of that panel.
fn costs(r: &PointResult) -> [f64; 2] {
    [
        r.resources
            .map_or(f64::NAN, |x| f64::from(x.luts + x.lutram)),
        r.cycles_per_epoch as f64,
    ]
}

/// Short label of a point on the plot: `8x8 sto`, with `fm4096` / `w12` when they vary.
fn label(r: &PointResult, all: &[PointResult]) -> String {
    let p = &r.point;
    let mut s = format!("{0}x{0} {1}", p.array, &p.rounding.name()[..3]);
    if all.iter().any(|o| o.point.fm_depth != p.fm_depth) {
        s.push_str(&format!(" fm{}", p.fm_depth));
    }
    if all.iter().any(|o| o.point.word_bits != p.word_bits) {
        s.push_str(&format!(" w{}", p.word_bits));
    }
    if p.dsp_pack {
        s.push_str(" pack");
    }
    s
}

/// Draws the plot of `points` into `path` (written like every output: a temporary file
/// renamed over it).
pub fn plot(points: &[PointResult], title: &str, path: &Path) -> Result<PlotText, PlotError> {
    let mut text = PlotText::None;
    systole_train::replace_with(path, |tmp, _| -> Result<(), PlotError> {
        let root = BitMapBackend::new(tmp, SIZE).into_drawing_area();
        text = draw(root, points, title).map_err(|msg| PlotError::Draw {
            path: path.display().to_string(),
            msg,
        })?;
        Ok(())
    })?;
    Ok(text)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    points: &[PointResult],
    title: &str,
) -> Result<PlotText, String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let text = font();
    root.fill(&WHITE).map_err(err)?;
    let root = if text == PlotText::DejaVu {
        root.titled(title, ("sans-serif", 18)).map_err(err)?
    } else {
        root
    };
    let acc: Vec<f64> = points.iter().map(|r| f64::from(r.acc_mean)).collect();
    let lo = acc.iter().copied().fold(100f64, f64::min);
    let hi = acc.iter().copied().fold(0f64, f64::max);
    let sd = points
        .iter()
        .map(|r| f64::from(r.acc_std))
        .fold(0.0, f64::max);
    let (y0, y1) = ((lo - sd - 1.0).max(0.0), (hi + sd + 1.0).min(100.5));
    let names = ["LUTs (logic + LUT RAM)", "simulated cycles per epoch"];
    for (axis, area) in root.split_evenly((1, 2)).iter().enumerate() {
        let shown: Vec<usize> = (0..points.len())
            .filter(|&i| costs(&points[i])[axis].is_finite())
            .collect();
        let xy: Vec<(f64, f64)> = shown
            .iter()
            .map(|&i| (costs(&points[i])[axis], acc[i]))
            .collect();
        let xmax = xy.iter().map(|p| p.0).fold(1.0, f64::max) * 1.15;
        let mut b = ChartBuilder::on(area);
        b.margin(14);
        if text == PlotText::DejaVu {
            b.x_label_area_size(34).y_label_area_size(50);
        }
        let mut chart = b.build_cartesian_2d(0f64..xmax, y0..y1).map_err(err)?;
        let mut mesh = chart.configure_mesh();
        if text == PlotText::DejaVu {
            mesh.x_desc(names[axis])
                .y_desc("test accuracy % (mean of seeds)")
                .x_label_formatter(&|v| format!("{v:.0}"))
                .label_style(("sans-serif", 12));
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw().map_err(err)?;
        let on = front(&xy);
        chart
            .draw_series(LineSeries::new(
                on.iter().map(|&i| xy[i]),
                RED.stroke_width(2),
            ))
            .map_err(err)?;
        for (i, &p) in xy.iter().enumerate() {
            let color = if on.contains(&i) {
                RED
            } else {
                RGBColor(130, 130, 130)
            };
            // The spread over seeds: mean +- one standard deviation.
            let sd = f64::from(points[shown[i]].acc_std);
            chart
                .draw_series([ErrorBar::new_vertical(
                    p.0,
                    p.1 - sd,
                    p.1,
                    p.1 + sd,
                    color.stroke_width(1),
                    8,
                )])
                .map_err(err)?;
            // A design that fits none of the boards is an open circle.
            let fits = points[shown[i]].boards.iter().any(|b| b.fits);
            let style = if fits {
                color.filled()
            } else {
                color.stroke_width(2)
            };
            chart.draw_series([Circle::new(p, 5, style)]).map_err(err)?;
            if text == PlotText::DejaVu {
                let name = label(&points[shown[i]], points);
                // Labels of points drawn on top of each other go one under the other.
                let near =
                    |q: &(f64, f64)| (q.0 - p.0).abs() < xmax / 50.0 && (q.1 - p.1).abs() < 0.1;
                let below = 14 * xy[..i].iter().filter(|q| near(q)).count() as i32;
                chart
                    .draw_series([EmptyElement::at(p)
                        + Text::new(name, (8, below - 16), ("sans-serif", 12).into_font())])
                    .map_err(err)?;
            }
        }
    }
    root.present().map_err(err)?;
    Ok(text)
}
