//! What a method sees while it runs ([`RunContext`]: the problem, seeded random streams,
//! progress, and the sinks for metrics rows and communication; a method's own results are its
//! typed report), and the deterministic worker pool methods fan trials out on. Methods depend
//! on this module, never on the runner that drives them.

use std::path::PathBuf;

use privopt_math::SeedTree;

use crate::error::{Result, SimError};
use crate::metrics::{Comm, MetricsTable};
use privopt_data::problem::Problem;

pub use privopt_math::progress::{NoProgress, Progress};

/// What a method sees while it runs.
pub struct RunContext<'a> {
    problem: Option<&'a Problem>,
    /// Root of every random stream of the run.
    pub seeds: SeedTree,
    /// Progress reporting.
    pub progress: &'a dyn Progress,
    /// Where catalog datasets live (for methods that load more than the run's own dataset).
    pub data_dir: PathBuf,
    metrics: MetricsTable,
    comm: Comm,
}

impl<'a> RunContext<'a> {
    /// A context over `problem` (`None` for a method that generates its own) with the given
    /// seeds.
    pub fn new(problem: Option<&'a Problem>, seeds: SeedTree, progress: &'a dyn Progress) -> Self {
        Self {
            problem,
            seeds,
            progress,
            data_dir: PathBuf::from("data"),
            metrics: MetricsTable::default(),
            comm: Comm::default(),
        }
    }

    /// The experiment's problem (`[data]` and `[model]`).
    pub fn problem(&self) -> Result<&'a Problem> {
        self.problem.ok_or_else(|| {
            SimError::Config(
                "this method trains on a problem: the config needs a [data] table".into(),
            )
        })
    }

    /// Appends a metrics row of the method's own columns (for methods whose rows are not
    /// one model's evaluation, such as a suite of runs).
    pub fn record(&mut self, row: &[(&str, f64)]) -> Result<()> {
        self.metrics.push(row)
    }

    /// Counts `bytes` sent from clients upward.
    pub fn send_up(&mut self, bytes: u64) {
        self.comm.up_bytes += bytes;
    }

    /// Counts `bytes` sent from the server downward.
    pub fn send_down(&mut self, bytes: u64) {
        self.comm.down_bytes += bytes;
    }

    /// Communication so far.
    pub fn comm(&self) -> Comm {
        self.comm
    }

    /// Records one metrics row at `round` for parameters `w`: training loss, test loss, test
    /// accuracy (classification), cumulative bytes, then the method's `extra` columns.
    /// Fails if the model has diverged.
    pub fn evaluate(&mut self, round: u64, w: &[f64], extra: &[(&str, f64)]) -> Result<()> {
        let problem = self.problem()?;
        let model = &problem.model;
        let train_loss = model.loss(w, &problem.train, None);
        let test_loss = model.loss(w, &problem.test, None);
        for (what, v) in [("training loss", train_loss), ("test loss", test_loss)] {
            if !v.is_finite() {
                return Err(SimError::Diverged {
                    round,
                    what: what.into(),
                });
            }
        }
        let mut row = vec![
            ("round", round as f64),
            ("train_loss", train_loss),
            ("test_loss", test_loss),
        ];
        if let Some(acc) = model.accuracy(w, &problem.test) {
            row.push(("test_accuracy", acc));
        }
        row.push(("bytes_up", self.comm.up_bytes as f64));
        row.push(("bytes_down", self.comm.down_bytes as f64));
        row.extend_from_slice(extra);
        self.metrics.push(&row)
    }
}

impl RunContext<'_> {
    /// Drives `total` steps of `step(ctx, t, w)`: evaluates before the first step, every
    /// `eval_every` steps (0: about 50 evaluations) and after the last, and reports progress
    /// under `label`.
    pub fn train_loop(
        &mut self,
        label: &str,
        total: u64,
        eval_every: u64,
        w: &mut [f64],
        mut step: impl FnMut(&mut Self, u64, &mut [f64]) -> Result<()>,
    ) -> Result<()> {
        let every = if eval_every > 0 {
            eval_every
        } else {
            (total / 50).max(1)
        };
        self.evaluate(0, w, &[])?;
        self.progress.start(label, total);
        for t in 0..total {
            step(self, t, w)?;
            if (t + 1) % every == 0 || t + 1 == total {
                self.evaluate(t + 1, w, &[])?;
            }
            self.progress.advance(1);
        }
        self.progress.finish();
        Ok(())
    }
}

/// Runs `job(i)` for every `i in 0..count` on `threads` workers and returns the results in
/// index order. Each result may depend only on its index, so the thread count changes no
/// number. If jobs fail, the error of the lowest failing index is returned. Progress is
/// reported from the calling thread (a [`Progress`] need not be thread-safe).
pub fn parallel_map<R: Send>(
    count: usize,
    threads: usize,
    label: &str,
    progress: &dyn Progress,
    job: impl Fn(usize) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, mpsc};

    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<R>>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    progress.start(label, count as u64);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            let done = done_tx.clone();
            let (next, slots, job) = (&next, &slots, &job);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(slot) = slots.get(i) else { break };
                    let r = job(i);
                    if let Ok(mut slot) = slot.lock() {
                        *slot = Some(r);
                    }
                    let _ = done.send(());
                }
            });
        }
        drop(done_tx);
        for _ in done_rx.iter() {
            progress.advance(1);
        }
    });
    progress.finish();
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(SimError::WorkerPanicked))
        })
        .collect()
}

impl RunContext<'_> {
    /// Hands the recorded metrics and communication to the runner.
    pub fn into_records(self) -> (MetricsTable, Comm) {
        (self.metrics, self.comm)
    }
}
