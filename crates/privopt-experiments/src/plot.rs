//! PNG line plots in one style for every method (plotters with an embedded font, so no system
//! font library is needed): at most [`MAX_SERIES_PER_PANEL`] series per panel (small multiples
//! beyond that), each in its own colour of the Okabe–Ito colour-blind-safe palette, legends beside the data rather than over it, labelled axes, and a log₁₀ axis where the
//! values span more than two decades.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{ExperimentError, Result};

static FONT: Once = Once::new();

/// Series per panel before the figure is split into small multiples.
pub(crate) const MAX_SERIES_PER_PANEL: usize = 6;

/// Okabe & Ito's palette (distinguishable under the common colour-vision deficiencies), black
/// last.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(230, 159, 0),   // orange
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
];

/// Width of the legend column to the right of each panel, in pixels.
const LEGEND_WIDTH: u32 = 230;

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

/// One named curve.
pub(crate) type Series = (String, Vec<f64>);

/// Splits `series` into panels of at most [`MAX_SERIES_PER_PANEL`]: grouped by the last
/// `_`-separated token of their names (the swept value, e.g. `eps4`, `sigma10`) when that
/// makes more than one group, then cut into chunks. A series whose name has no such token
/// (e.g. a non-private baseline) is a reference drawn in every panel. Returns (panel title,
/// series).
fn panels(series: &[Series]) -> Vec<(String, Vec<&Series>)> {
    if series.len() <= MAX_SERIES_PER_PANEL {
        return vec![(String::new(), series.iter().collect())];
    }
    let key = |name: &str| {
        (!is_reference(name)).then(|| name.rsplit_once('_').map_or("", |(_, k)| k).to_owned())
    };
    let references: Vec<&Series> = series.iter().filter(|s| key(&s.0).is_none()).collect();
    let mut groups: Vec<(String, Vec<&Series>)> = Vec::new();
    for s in series {
        let Some(k) = key(&s.0) else { continue };
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, list)) => list.push(s),
            None => groups.push((k, vec![s])),
        }
    }
    let sweep = groups.len() > 1 && groups.len() < series.len() - references.len();
    let (groups, references) = if sweep {
        (groups, references)
    } else {
        (vec![(String::new(), series.iter().collect())], Vec::new())
    };
    let room = MAX_SERIES_PER_PANEL.saturating_sub(references.len()).max(1);
    let mut out = Vec::new();
    for (title, list) in groups {
        let chunks: Vec<&[&Series]> = list.chunks(room).collect();
        let n = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let t = match (title.is_empty(), n) {
                (true, 1) => String::new(),
                (true, _) => format!("part {} of {n}", i + 1),
                (false, 1) => title.clone(),
                (false, _) => format!("{title} ({} of {n})", i + 1),
            };
            let mut panel = chunk.to_vec();
            panel.extend(&references);
            out.push((t, panel));
        }
    }
    out
}

/// Whether values spanning more than two decades should be drawn on a log₁₀ axis: none
/// negative, the positive ones over a ratio of 100 (zeros, e.g. a start at the origin, are
/// left out of a log plot).
fn wants_log(values: impl Iterator<Item = f64>) -> bool {
    let (lo, hi, any_negative) =
        values
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, 0.0f64, false), |(l, h, n), v| {
                let l = if v > 0.0 { l.min(v) } else { l };
                (l, h.max(v), n || v < 0.0)
            });
    !any_negative && lo.is_finite() && hi / lo > 100.0
}

/// Draws `series` (name, values) against `x` into a PNG at `path`, with axis labels
/// `x_label` and `y_label`.
pub(crate) fn line_plot(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    x: &[f64],
    series: &[Series],
) -> Result<()> {
    register_font();
    let err = |e: &dyn std::fmt::Display| ExperimentError::Plot {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let log = wants_log(series.iter().flat_map(|(_, v)| v.iter().copied()));
    let y_of = |v: f64| if log { v.log10() } else { v };
    let y_label = if log {
        format!("log₁₀ {y_label}")
    } else {
        y_label.to_owned()
    };
    let panels = panels(series);
    let cols = if panels.len() > 1 { 2 } else { 1 };
    let rows = panels.len().div_ceil(cols);
    let (panel_w, panel_h) = (560 + LEGEND_WIDTH, 360);
    let size = (panel_w * cols as u32, panel_h * rows as u32 + 40);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| err(&e))?;
    // One y range for every panel, so small multiples compare at a glance.
    let finite = |v: &f64| v.is_finite();
    let (x0, x1) = bounds(x.iter().copied().filter(finite));
    let (y0, y1) = bounds(
        series
            .iter()
            .flat_map(|(_, v)| v.iter().map(|&y| y_of(y)).filter(finite)),
    );
    let areas = root.split_evenly((rows, cols));
    for ((panel_title, list), area) in panels.iter().zip(&areas) {
        let (plot_area, legend_area) =
            area.split_horizontally(area.dim_in_pixel().0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(panel_title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label.as_str())
            .x_labels(6)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| tick(*v))
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| err(&e))?;
        let faceted = panels.len() > 1;
        for (k, (name, values)) in list.iter().enumerate() {
            let style = series_style(k, faceted && is_reference(name));
            let points: Vec<(f64, f64)> = x
                .iter()
                .copied()
                .zip(values.iter().map(|&v| y_of(v)))
                .filter(|(a, b)| a.is_finite() && b.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(points, style))
                .map_err(|e| err(&e))?;
        }
        draw_legend(&legend_area, list, faceted).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Whether a series is a reference drawn in every panel of a faceted figure (no sweep token).
fn is_reference(name: &str) -> bool {
    !name.contains('_')
}

/// The stroke of the `k`-th series of a panel (a panel has fewer series than colours): by
/// position, so panels of the same methods match, and black for references.
fn series_style(k: usize, reference: bool) -> ShapeStyle {
    let colour = if reference {
        PALETTE[PALETTE.len() - 1]
    } else {
        PALETTE[k % (PALETTE.len() - 1)]
    };
    colour.stroke_width(2)
}

/// The legend of one panel, in its own area to the right of the data.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    list: &[&Series],
    faceted: bool,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 13).into_font();
    for (k, (name, _)) in list.iter().enumerate() {
        let y = 30 + 22 * k as i32;
        let style = series_style(k, faceted && is_reference(name));
        area.draw(&PathElement::new(vec![(6, y), (28, y)], style))?;
        area.draw(&Text::new(name.clone(), (34, y - 7), font.clone()))?;
    }
    Ok(())
}

/// A y tick label with as many decimals as its size needs.
fn tick(v: f64) -> String {
    match v.abs() {
        a if a < 1e-12 => "0".into(),
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}"),
        a if a >= 0.01 => format!("{v:.2}"),
        _ => format!("{v:.1e}"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> Vec<Series> {
        names.iter().map(|n| ((*n).to_owned(), vec![1.0])).collect()
    }

    #[test]
    fn few_series_share_one_panel_and_many_are_split_by_sweep_value() {
        assert_eq!(panels(&named(&["a", "b", "c"])).len(), 1);
        let mut many: Vec<String> = ["dome_k16", "dome_k64", "dp_full", "random_k16"]
            .iter()
            .flat_map(|m| ["eps1", "eps4"].map(|e| format!("{m}_{e}")))
            .collect();
        many.push("nonprivate".into());
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let series = named(&refs);
        let p = panels(&series);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].0, "eps1");
        assert!(p.iter().all(|(_, l)| l.len() <= MAX_SERIES_PER_PANEL));
        // The baseline without a sweep token is a reference in every panel.
        assert!(p.iter().all(|(_, l)| l.iter().any(|s| s.0 == "nonprivate")));
        // No common sweep token: chunks of at most six, every series kept once.
        let plain: Vec<String> = (0..14).map(|i| format!("s{i}")).collect();
        let refs: Vec<&str> = plain.iter().map(String::as_str).collect();
        let series = named(&refs);
        let p = panels(&series);
        assert_eq!(p.len(), 3);
        assert_eq!(p.iter().map(|(_, l)| l.len()).sum::<usize>(), 14);
    }

    #[test]
    fn log_axis_only_for_positive_values_over_two_decades() {
        assert!(wants_log([1e-4, 1.0].into_iter()));
        assert!(!wants_log([0.5, 0.9].into_iter()));
        assert!(!wants_log([-1.0, 1e3].into_iter()));
        assert!(!wants_log([f64::NAN].into_iter()));
        assert!(wants_log([0.0, 2.0, 3600.0].into_iter()));
    }
}
