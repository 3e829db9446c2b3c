//! Writes a run's folder: `config.toml`, `metrics.csv`, `summary.json` and one PNG plot per
//! metric curve.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use privopt_data::store::{process_alive, remove_dead_process_dirs};

use crate::config::ExperimentConfig;
use crate::error::{ExperimentError, Result};
use crate::plot::line_plot;
use crate::runner::{Outcome, RunOutcome};
use crate::suites::SuiteReport;
use crate::suites::dpfhe::{DpfheSuiteReport, Table3Cell};
use privopt_sim::methods::Report;

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
    (
        "gradient_recovery_error",
        "relative error of the recovered gradient",
    ),
    ("max_margin", "max |⟨w, x⟩| over examples"),
    ("max_margin_zoom", "max |⟨w, x⟩| over examples"),
];

/// The default output folder: `results/<name>-<UTC timestamp>`.
pub fn default_out_dir(name: &str, timestamp: &str) -> PathBuf {
    Path::new("results").join(format!("{name}-{timestamp}"))
}

/// Staging folders and locks of this process's unfinished runs, for a signal handler to
/// remove ([`remove_unfinished`]).
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn unfinished() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    UNFINISHED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Removes the staging folders and locks of this process's unfinished runs: what an
/// interrupted run (SIGINT, SIGTERM) calls before it exits, so it leaves nothing behind.
pub fn remove_unfinished() {
    for path in unfinished().drain(..) {
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// The lock of one `--out` folder: a file `.NAME.lock` beside it, made with `create_new` and
/// holding the owner's process id, so two runs never write one folder. A lock whose process is
/// gone is stale and taken over.
#[derive(Debug)]
struct OutLock {
    path: PathBuf,
}

impl OutLock {
    fn acquire(parent: &Path, name: &str, target: &Path) -> Result<Self> {
        let path = parent.join(format!(".{name}.lock"));
        let io = |source| ExperimentError::Io {
            path: path.clone(),
            source,
        };
        // Staging folders of runs whose process is gone are left-overs of killed runs.
        remove_dead_process_dirs(parent, &format!(".{name}.partial-")).map_err(io)?;
        let me = std::process::id();
        for _ in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    use std::io::Write as _;
                    file.write_all(me.to_string().as_bytes()).map_err(io)?;
                    unfinished().push(path.clone());
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path)
                        .ok()
                        .and_then(|t| t.trim().parse::<u32>().ok());
                    // An unreadable lock may be one being written this instant: treat as held.
                    let live = holder.is_none_or(|pid| process_alive(pid) != Some(false));
                    if live {
                        let who =
                            holder.map_or("another process".into(), |p| format!("process {p}"));
                        return Err(ExperimentError::Config(format!(
                            "--out {}: another run ({who}) is writing this folder; wait for it \
                             or choose another (a stale lock is {})",
                            target.display(),
                            path.display()
                        )));
                    }
                    let _ = std::fs::remove_file(&path);
                }
                Err(e) => return Err(io(e)),
            }
        }
        Err(ExperimentError::Config(format!(
            "--out {}: another run took the folder's lock first",
            target.display()
        )))
    }
}

impl Drop for OutLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        unfinished().retain(|p| p != &self.path);
    }
}

/// A results folder being written. Files go into a hidden sibling folder that is made (so an
/// unwritable destination fails) before any computation, and move into place only when all
/// are written: a failed run or write leaves no half-written folder (the staging folder is
/// removed on drop, and on SIGINT/SIGTERM through [`remove_unfinished`]; staging folders of
/// killed runs go at the next start), an existing non-empty folder is never merged into
/// unless asked, and a second run to the same folder is refused while the first is alive.
#[derive(Debug)]
pub struct StagedDir {
    target: PathBuf,
    staging: PathBuf,
    _lock: OutLock,
    /// Whether the target held files before (written into only with `force`).
    merge: bool,
    committed: bool,
}

impl StagedDir {
    /// Checks `target` (absent or empty, or anything with `force`) and makes the staging
    /// folder beside it.
    pub fn create(target: &Path, force: bool) -> Result<Self> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ExperimentError::Io { path, source }
        };
        let merge = match std::fs::read_dir(target) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(io(target)(e)),
        };
        if merge && !force {
            return Err(ExperimentError::Config(format!(
                "--out {}: the folder exists and is not empty; choose another or pass --force \
                 to write into it",
                target.display()
            )));
        }
        let name = target.file_name().ok_or_else(|| {
            ExperimentError::Config(format!("--out {}: not a folder name", target.display()))
        })?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let name = name.to_string_lossy();
        let lock = OutLock::acquire(&parent, &name, target)?;
        let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
        // A leftover of a killed run with the same process id is ours to replace.
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir(&staging).map_err(io(&staging))?;
        unfinished().push(staging.clone());
        Ok(Self {
            target: target.to_owned(),
            staging,
            _lock: lock,
            merge,
            committed: false,
        })
    }

    /// Where the files are written until [`StagedDir::commit`].
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Moves the written files into the target folder and returns its path.
    pub fn commit(mut self) -> Result<PathBuf> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ExperimentError::Io { path, source }
        };
        if self.merge {
            for entry in std::fs::read_dir(&self.staging).map_err(io(&self.staging))? {
                let from = entry.map_err(io(&self.staging))?.path();
                let to = self.target.join(from.file_name().unwrap_or_default());
                if to.is_dir() {
                    std::fs::remove_dir_all(&to).map_err(io(&to))?;
                }
                std::fs::rename(&from, &to).map_err(io(&to))?;
            }
        } else {
            // An empty target (checked at creation) gives way to the finished folder.
            if self.target.is_dir() {
                std::fs::remove_dir(&self.target).map_err(io(&self.target))?;
            }
            std::fs::rename(&self.staging, &self.target).map_err(io(&self.target))?;
        }
        self.committed = true;
        let _ = std::fs::remove_dir_all(&self.staging);
        Ok(self.target.clone())
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
        unfinished().retain(|p| p != &self.staging);
    }
}

fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|source| ExperimentError::Io {
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
    std::fs::create_dir_all(dir).map_err(|source| ExperimentError::Io {
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
        .map_err(|e| ExperimentError::Config(format!("cannot serialize summary: {e}")))?;
    put("summary.json", json + "\n")?;

    written.extend(write_plots(dir, &cfg.name, &outcome.metrics)?);
    written.extend(write_report_plots(dir, &cfg.name, outcome)?);
    Ok(written)
}

/// Plots of a report's own curves, whose x axis is not the evaluation round: the pdsgd
/// eavesdropper's KS statistic against the iterations it observed, and dpfhe Table 3's
/// distance to the minimizer against the step (Fig. 3).
fn write_report_plots(dir: &Path, run_name: &str, outcome: &RunOutcome) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    if let Some(Outcome::Method(Report::Pdsgd(r))) = &outcome.report
        && let Some(e) = &r.eavesdropper
    {
        let p = dir.join("eavesdropper_ks.png");
        let x: Vec<f64> = (1..=e.ks_paillier.len()).map(|k| k as f64).collect();
        line_plot(
            &p,
            &format!("{run_name} — eavesdropper: two runs on different data, same keys"),
            ("iterations observed", "two-sample KS statistic D"),
            &x,
            &[
                ("Paillier ciphertexts".into(), e.ks_paillier.clone()),
                (
                    "plaintext messages (control)".into(),
                    e.ks_plaintext.clone(),
                ),
                ("critical value, α = 0.001".into(), e.critical.clone()),
            ],
        )?;
        written.push(p);
    }
    if let Some(Outcome::Suite(report)) = &outcome.report
        && let SuiteReport::Dpfhe(DpfheSuiteReport::Table3(cells)) = report.as_ref()
    {
        written.extend(write_fig3(dir, run_name, cells)?);
    }
    Ok(written)
}

/// The paper's Fig. 3: ‖w_t − w*‖² against the step, one plot per dataset with a curve per
/// polynomial (each ends at its own T).
fn write_fig3(dir: &Path, run_name: &str, cells: &[Table3Cell]) -> Result<Vec<PathBuf>> {
    const POINTS: usize = 200;
    let mut written = Vec::new();
    let mut datasets: Vec<&str> = cells.iter().map(|c| c.dataset.as_str()).collect();
    datasets.dedup();
    for name in datasets {
        let mine: Vec<&Table3Cell> = cells
            .iter()
            .filter(|c| c.dataset == name && !c.distance.is_empty())
            .collect();
        let Some(longest) = mine.iter().map(|c| c.distance.len()).max() else {
            continue;
        };
        let stride = (longest - 1).div_ceil(POINTS).max(1);
        let x: Vec<f64> = (0..longest).step_by(stride).map(|t| t as f64).collect();
        let series: Vec<Series> = mine
            .iter()
            .map(|c| {
                let values = (0..longest)
                    .step_by(stride)
                    .map(|t| c.distance.get(t).copied().unwrap_or(f64::NAN))
                    .collect();
                (c.label.clone(), values)
            })
            .collect();
        let p = dir.join(format!("fig3_{name}.png"));
        line_plot(
            &p,
            &format!("{run_name} — {name}: distance to the exact-loss minimizer"),
            ("step t", "‖w_t − w*‖²"),
            &x,
            &series,
        )?;
        written.push(p);
    }
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
