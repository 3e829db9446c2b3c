//! PNG line plots (plotters with an embedded font, so no system font library is needed).

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

use crate::error::{Error, Result};

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        // DejaVu is a valid TrueType font; should registration fail anyway, text is simply
        // not drawn and plotting still reports success.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// Draws `series` (name, values) against `x` into a PNG at `path`.
pub(crate) fn line_plot(
    path: &Path,
    title: &str,
    x: &[f64],
    series: &[(String, Vec<f64>)],
) -> Result<()> {
    register_font();
    let err = |e: &dyn std::fmt::Display| Error::Plot {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let finite = |v: &f64| v.is_finite();
    let (x0, x1) = bounds(x.iter().copied().filter(finite));
    let (y0, y1) = bounds(
        series
            .iter()
            .flat_map(|(_, v)| v.iter().copied().filter(finite)),
    );
    let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("round")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;
    for (k, (name, values)) in series.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        chart
            .draw_series(LineSeries::new(
                x.iter()
                    .copied()
                    .zip(values.iter().copied())
                    .filter(|(a, b)| a.is_finite() && b.is_finite()),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(name.as_str())
            .legend(move |(px, py)| {
                PathElement::new(vec![(px, py), (px + 20, py)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A non-degenerate range covering `values` (with 5% headroom).
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo {
        0.05 * (hi - lo)
    } else {
        lo.abs().max(1.0) * 0.05
    };
    (lo - pad, hi + pad)
}
