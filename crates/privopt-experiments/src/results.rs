//! Writes a run's folder: `config.toml`, `metrics.csv`, `summary.json` and one PNG plot per
//! metric curve.

use std::path::{Path, PathBuf};

use crate::config::ExperimentConfig;
use crate::error::{Error, Result};
use crate::plot::line_plot;
use crate::runner::RunOutcome;

/// Columns that are not plotted on their own (the x axis, and the byte counters which are
/// plotted together).
const NOT_PLOTTED: &[&str] = &["round", "bytes_up", "bytes_down"];

use crate::plot::Series;
/// A named curve.
use privopt_sim::metrics::MetricsTable;

/// Y-axis labels (with units) of plots whose file name is not self-explanatory.
const AXIS_LABELS: &[(&str, &str)] = &[
    ("communication", "bytes"),
    ("fig2", "training loss"),
    ("fig3", "log₁₀ training loss"),
    ("digital", "training loss"),
    ("test_accuracy", "test accuracy (fraction)"),
    ("fig3_log10_mse", "log₁₀ mean squared error"),
    ("max_margin", "max |⟨w, x⟩| over examples"),
    ("max_margin_zoom", "max |⟨w, x⟩| over examples"),
];

/// The default output folder: `results/<name>-<UTC timestamp>`.
pub fn default_out_dir(name: &str, timestamp: &str) -> PathBuf {
    Path::new("results").join(format!("{name}-{timestamp}"))
}

fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// Writes every result file of `outcome` into `dir` (created if needed) and returns the
/// paths written.
pub fn write_results(
    dir: &Path,
    cfg: &ExperimentConfig,
    outcome: &RunOutcome,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mut written = Vec::new();
    let mut put = |name: &str, text: String| -> Result<()> {
        let p = dir.join(name);
        write(&p, &text)?;
        written.push(p);
        Ok(())
    };
    put("config.toml", cfg.to_toml()?)?;
    put("metrics.csv", outcome.metrics.to_csv())?;
    let json = serde_json::to_string_pretty(&outcome.summary)
        .map_err(|e| Error::Config(format!("cannot serialize summary: {e}")))?;
    put("summary.json", json + "\n")?;

    written.extend(write_plots(dir, &cfg.name, &outcome.metrics)?);
    Ok(written)
}

/// Draws every plot of `metrics` into `dir` (`loss.png`, `communication.png`, one per
/// `group/` of columns, one per other column) and returns the paths written. Also used to
/// re-plot an existing results folder (`privopt plot DIR`).
pub fn write_plots(dir: &Path, run_name: &str, metrics: &MetricsTable) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let rounds = metrics.column("round").unwrap_or_default();
    let mut plots: Vec<(String, Vec<Series>)> = Vec::new();
    let losses: Vec<Series> = ["train_loss", "test_loss"]
        .iter()
        .filter_map(|c| metrics.column(c).map(|v| ((*c).to_owned(), v)))
        .collect();
    if !losses.is_empty() {
        plots.push(("loss".into(), losses));
    }
    let bytes: Vec<Series> = ["bytes_up", "bytes_down"]
        .iter()
        .filter_map(|c| metrics.column(c).map(|v| ((*c).to_owned(), v)))
        .collect();
    if bytes.iter().any(|(_, v)| v.iter().any(|&b| b > 0.0)) {
        plots.push(("communication".into(), bytes));
    }
    // Columns named `group/series` share one plot, `group.png`.
    let mut groups: Vec<(String, Vec<Series>)> = Vec::new();
    for c in metrics.columns() {
        if let Some((group, series)) = c.split_once('/')
            && let Some(v) = metrics.column(c)
        {
            match groups.iter_mut().find(|(g, _)| g == group) {
                Some((_, list)) => list.push((series.to_owned(), v)),
                None => groups.push((group.to_owned(), vec![(series.to_owned(), v)])),
            }
        }
    }
    plots.extend(groups);
    for c in metrics.columns() {
        if !NOT_PLOTTED.contains(&c.as_str())
            && !c.contains('/')
            && !c.ends_with("_loss")
            && let Some(v) = metrics.column(c)
        {
            plots.push((c.clone(), vec![(c.clone(), v)]));
        }
    }
    for (name, series) in plots {
        let p = dir.join(format!("{name}.png"));
        let title = format!("{run_name} — {name}");
        let y_label = AXIS_LABELS
            .iter()
            .find(|(group, _)| *group == name)
            .map_or(name.as_str(), |(_, label)| label);
        line_plot(&p, &title, ("round", y_label), &rounds, &series)?;
        written.push(p);
    }
    Ok(written)
}
