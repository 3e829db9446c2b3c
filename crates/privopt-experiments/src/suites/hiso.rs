//! The §6 MNIST reproduction (`privopt reproduce hiso-mnist`): HiSo against DeComFL at the
//! same communication per round, each at its best learning rate from a sweep, over several
//! seeds; Fig. 5 (ν ablation, distribution of the learned `H`); Fig. 8 (local steps τ); and
//! the full-dimension baselines' accuracy and traffic.
//!
//! Seeds vary everything random in a run (initial model, client sampling, minibatches,
//! directions); the data split is the experiment's and stays fixed.

use privopt_math::SeedTree;
use serde::{Deserialize, Serialize};

use privopt_sim::context::{NoProgress, RunContext};
use privopt_sim::error::{Error, Result, ensure};
use privopt_sim::methods::check_lr;
use privopt_sim::methods::scalar_fl::{Algorithm, ScalarFlConfig, Trajectory, simulate};

use super::{Suite, SuiteReport, validate_base};
use privopt_sim::metrics::Summary;
use privopt_sim::metrics::{Quantiles, mean_variance};
use privopt_sim::problem::Problem;

/// A full-dimension baseline run of the suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineRun {
    /// `fedavg`, `fedadam`, `fedyogi`, `fedadagrad` or `fedzo`.
    pub algorithm: Algorithm,
    /// Client learning rate.
    pub lr: f64,
    /// FedAdam's server learning rate.
    #[serde(default)]
    pub server_lr: Option<f64>,
}

/// `[suite] name = "hiso"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HisoSuiteConfig {
    /// Shared settings of every run (`[suite.base]`; its `algorithm` and `lr` are replaced).
    pub base: ScalarFlConfig,
    /// DeComFL learning rates tried (seed 0).
    pub lr_grid_decomfl: Vec<f64>,
    /// HiSo learning rates tried (seed 0).
    pub lr_grid_hiso: Vec<f64>,
    /// Seeds of the HiSo-vs-DeComFL comparison at the best rates (>= 1).
    pub seeds: u64,
    /// ν values of the Fig. 5 ablation (HiSo, best rate, seed 0).
    #[serde(default)]
    pub nu_grid: Vec<f64>,
    /// τ values of the Fig. 8 ablation (both methods, best rates, seed 0).
    #[serde(default)]
    pub tau_grid: Vec<usize>,
    /// Rounds of the τ and baseline runs (0: the base's rounds).
    #[serde(default)]
    pub short_rounds: u64,
    /// Full-dimension baselines.
    #[serde(default)]
    pub baselines: Vec<BaselineRun>,
    /// Also score the final models on the whole test set (`final_acc_full_test_*`).
    #[serde(default = "yes")]
    pub score_full_test: bool,
}

fn yes() -> bool {
    true
}

/// Metrics columns of one curve, aligned on the main runs' evaluation rounds.
struct Curves {
    rounds: Vec<u64>,
    columns: Vec<(String, Vec<f64>)>,
}

impl Curves {
    fn add(&mut self, name: String, t: &Trajectory) {
        let values = self
            .rounds
            .iter()
            .map(|r| {
                t.rounds
                    .iter()
                    .position(|x| x == r)
                    .map_or(f64::NAN, |i| t.test_acc[i])
            })
            .collect();
        self.columns.push((name, values));
    }
}

impl HisoSuiteConfig {
    fn run_one(
        &self,
        problem: &Problem,
        seeds: &SeedTree,
        algorithm: Algorithm,
        lr: f64,
        seed: u64,
        edit: impl FnOnce(&mut ScalarFlConfig),
    ) -> Result<Trajectory> {
        let mut cfg = self.base.clone();
        cfg.algorithm = algorithm;
        cfg.lr = lr;
        edit(&mut cfg);
        let tree = SeedTree::new(seeds.child_seed("hiso_suite/seed", &[seed]));
        tracing::info!(
            algorithm = algorithm.name(),
            lr,
            seed,
            tau = cfg.local_steps,
            nu = cfg.nu,
            rounds = cfg.rounds,
            "hiso suite run"
        );
        simulate(&cfg, problem, &tree, &NoProgress)
    }

    /// Sweeps `grid` for `algorithm` at seed 0; a diverged rate scores −∞. Returns the best
    /// rate and its trajectory.
    fn sweep(
        &self,
        ctx: &mut RunContext<'_>,
        algorithm: Algorithm,
        grid: &[f64],
        points: &mut Vec<SweepPoint>,
    ) -> Result<(f64, Trajectory)> {
        let mut best: Option<(f64, Trajectory)> = None;
        for &lr in grid {
            let acc = match self.run_one(ctx.problem()?, &ctx.seeds, algorithm, lr, 0, |_| {}) {
                Ok(t) => {
                    let acc = t.best_acc();
                    if best.as_ref().is_none_or(|(_, b)| acc > b.best_acc()) {
                        best = Some((lr, t));
                    }
                    acc
                }
                Err(Error::Diverged { .. }) => f64::NAN,
                Err(e) => return Err(e),
            };
            points.push(SweepPoint {
                algorithm,
                lr,
                best_acc: acc,
            });
            ctx.progress.advance(1);
        }
        best.ok_or_else(|| {
            Error::Infeasible(format!(
                "every learning rate of the {} sweep diverged",
                algorithm.name()
            ))
        })
    }
}

impl Suite for HisoSuiteConfig {
    fn validate(&self) -> Result<()> {
        validate_base(&self.base)?;
        ensure(self.seeds >= 1, || "suite.seeds must be >= 1".into())?;
        ensure(
            !self.lr_grid_decomfl.is_empty() && !self.lr_grid_hiso.is_empty(),
            || "suite.lr_grid_decomfl and suite.lr_grid_hiso must not be empty".into(),
        )?;
        for lr in self.lr_grid_decomfl.iter().chain(&self.lr_grid_hiso) {
            check_lr(*lr)?;
        }
        for b in &self.baselines {
            ensure(!b.algorithm.is_scalar_only(), || {
                format!(
                    "suite.baselines: `{}` is not a full-dimension baseline",
                    b.algorithm.name()
                )
            })?;
            check_lr(b.lr)?;
        }
        ensure(self.tau_grid.iter().all(|&t| t >= 1), || {
            "suite.tau_grid entries must be >= 1".into()
        })?;
        ensure(self.nu_grid.iter().all(|&n| n > 0.0 && n <= 1.0), || {
            "suite.nu_grid entries must be in (0, 1]".into()
        })
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<SuiteReport> {
        let short = if self.short_rounds > 0 {
            self.short_rounds
        } else {
            self.base.rounds
        };
        let total = (self.lr_grid_decomfl.len() + self.lr_grid_hiso.len()) as u64
            + 2 * (self.seeds - 1)
            + self.nu_grid.len() as u64
            + 2 * self.tau_grid.len() as u64
            + self.baselines.len() as u64;
        ctx.progress.start("hiso suite runs", total);
        let mut sweep = Vec::new();
        let (lr_d, t_d0) =
            self.sweep(ctx, Algorithm::Decomfl, &self.lr_grid_decomfl, &mut sweep)?;
        let (lr_h, t_h0) = self.sweep(ctx, Algorithm::Hiso, &self.lr_grid_hiso, &mut sweep)?;
        let mut curves = Curves {
            rounds: t_d0.rounds.clone(),
            columns: Vec::new(),
        };
        let (mut dec, mut his) = (vec![t_d0], vec![t_h0]);
        for s in 1..self.seeds {
            dec.push(self.run_one(
                ctx.problem()?,
                &ctx.seeds,
                Algorithm::Decomfl,
                lr_d,
                s,
                |_| {},
            )?);
            ctx.progress.advance(1);
            his.push(self.run_one(ctx.problem()?, &ctx.seeds, Algorithm::Hiso, lr_h, s, |_| {})?);
            ctx.progress.advance(1);
        }
        for (s, (d, h)) in dec.iter().zip(&his).enumerate() {
            curves.add(format!("accuracy/decomfl_seed{s}"), d);
            curves.add(format!("accuracy/hiso_seed{s}"), h);
        }
        let comparison = self.compare(ctx.problem()?, &dec, &his);

        // Fig. 5: ν ablation and the learned H of the seed-0 HiSo run.
        let mut fig5_nu = Vec::new();
        for &nu in &self.nu_grid {
            let t = self.run_one(ctx.problem()?, &ctx.seeds, Algorithm::Hiso, lr_h, 0, |c| {
                c.nu = nu
            })?;
            fig5_nu.push((nu, t.best_acc()));
            curves.add(format!("fig5_nu/nu={nu}"), &t);
            ctx.progress.advance(1);
        }
        let fig5_hessian = his[0]
            .hessian
            .as_deref()
            .map(|h| (Quantiles::of(h), log_histogram(h)));

        // Fig. 8: local steps.
        let mut fig8_tau = Vec::new();
        for &tau in &self.tau_grid {
            for (alg, lr) in [(Algorithm::Decomfl, lr_d), (Algorithm::Hiso, lr_h)] {
                let t = self.run_one(ctx.problem()?, &ctx.seeds, alg, lr, 0, |c| {
                    c.local_steps = tau;
                    c.rounds = short;
                })?;
                fig8_tau.push((alg, tau, t.best_acc()));
                curves.add(format!("fig8_tau/{}_tau{tau}", alg.name()), &t);
                ctx.progress.advance(1);
            }
        }

        // Communication of every method.
        let clients = ctx.problem()?.clients.len();
        let mut traffic: Vec<Traffic> = [(Algorithm::Decomfl, &dec[0]), (Algorithm::Hiso, &his[0])]
            .into_iter()
            .map(|(a, t)| Traffic::of(a, t, clients, 1.0))
            .collect();
        let mut baselines = Vec::new();
        for b in &self.baselines {
            let t = self.run_one(ctx.problem()?, &ctx.seeds, b.algorithm, b.lr, 0, |c| {
                c.rounds = short;
                if let Some(s) = b.server_lr {
                    c.server_lr = s;
                }
            })?;
            baselines.push((b.algorithm, t.best_acc()));
            // Totals scaled to the main runs' rounds, so they compare at equal rounds.
            let scale = self.base.rounds as f64 / short as f64;
            traffic.push(Traffic::of(b.algorithm, &t, clients, scale));
            curves.add(format!("baselines/{}", b.algorithm.name()), &t);
            ctx.progress.advance(1);
        }
        ctx.progress.finish();

        for (i, &r) in curves.rounds.iter().enumerate() {
            let mut row: Vec<(&str, f64)> = vec![("round", r as f64)];
            row.extend(curves.columns.iter().map(|(n, v)| (n.as_str(), v[i])));
            ctx.record(&row)?;
        }
        Ok(SuiteReport::Hiso(HisoSuiteReport {
            sweep,
            best_lr_decomfl: lr_d,
            best_lr_hiso: lr_h,
            comparison,
            fig5_nu,
            fig5_hessian,
            fig8_tau,
            traffic,
            baselines,
        }))
    }
}

impl HisoSuiteConfig {
    /// Best accuracies and the rounds each method needs to reach DeComFL's best, per seed.
    fn compare(&self, problem: &Problem, dec: &[Trajectory], his: &[Trajectory]) -> Comparison {
        let best = |ts: &[Trajectory]| {
            let (m, var) = mean_variance(&ts.iter().map(Trajectory::best_acc).collect::<Vec<_>>());
            MeanStd {
                mean: m,
                std: var.sqrt(),
            }
        };
        let full_test = |ts: &[Trajectory]| {
            let accs: Vec<f64> = ts
                .iter()
                .map(|t| {
                    problem
                        .model
                        .accuracy(&t.params, &problem.test)
                        .unwrap_or(f64::NAN)
                })
                .collect();
            mean_variance(&accs).0
        };
        let mut r_dec = Vec::new();
        let mut r_his = Vec::new();
        let mut speedups = Vec::new();
        for (d, h) in dec.iter().zip(his) {
            let target = d.best_acc();
            let rd = d.first_round_reaching(target).unwrap_or(self.base.rounds) as f64;
            r_dec.push(rd);
            if let Some(rh) = h.first_round_reaching(target) {
                r_his.push(rh as f64);
                speedups.push(rd / (rh as f64).max(1.0));
            }
        }
        let speedup = (!speedups.is_empty()).then(|| {
            let (mean, var) = mean_variance(&speedups);
            Speedup {
                mean,
                std: var.sqrt(),
                min: speedups.iter().copied().fold(f64::INFINITY, f64::min),
            }
        });
        Comparison {
            best_acc_decomfl: best(dec),
            best_acc_hiso: best(his),
            final_acc_full_test: self
                .score_full_test
                .then(|| (full_test(dec), full_test(his))),
            rounds_to_decomfl_best_decomfl: mean_variance(&r_dec).0,
            rounds_to_decomfl_best_hiso: if r_his.is_empty() {
                f64::NAN
            } else {
                mean_variance(&r_his).0
            },
            hiso_seeds_reaching_decomfl_best: r_his.len(),
            speedup,
        }
    }
}

/// One learning rate of a sweep at seed 0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SweepPoint {
    /// The method.
    pub algorithm: Algorithm,
    /// The learning rate.
    pub lr: f64,
    /// Its best test accuracy (NaN if the run diverged).
    pub best_acc: f64,
}

/// A mean and standard deviation over seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MeanStd {
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
}

/// HiSo against DeComFL over the seeds, each at its best learning rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// DeComFL's best test accuracy.
    pub best_acc_decomfl: MeanStd,
    /// HiSo's best test accuracy.
    pub best_acc_hiso: MeanStd,
    /// Mean final accuracy on the whole test set (DeComFL, HiSo), if scored.
    pub final_acc_full_test: Option<(f64, f64)>,
    /// Rounds DeComFL needs to reach its own best (mean over seeds).
    pub rounds_to_decomfl_best_decomfl: f64,
    /// Rounds HiSo needs to reach DeComFL's best (mean over the seeds that do; NaN if none).
    pub rounds_to_decomfl_best_hiso: f64,
    /// Seeds on which HiSo reaches DeComFL's best.
    pub hiso_seeds_reaching_decomfl_best: usize,
    /// DeComFL's rounds over HiSo's, over the seeds that reach.
    pub speedup: Option<Speedup>,
}

/// Speed-up over seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Speedup {
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
    /// Smallest.
    pub min: f64,
}

/// A method's communication.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Traffic {
    /// The method.
    pub algorithm: Algorithm,
    /// Mean bytes one participant sends per round.
    pub up_per_round: f64,
    /// Mean bytes one participant receives per round.
    pub down_per_round: f64,
    /// Bytes per client over the main runs' rounds (baselines scaled to them).
    pub total_per_client: f64,
}

impl Traffic {
    /// `t`'s traffic; the total is `scale` × the run's bytes over `clients` clients.
    fn of(algorithm: Algorithm, t: &Trajectory, clients: usize, scale: f64) -> Self {
        Self {
            algorithm,
            up_per_round: t.up_per_participant_round(),
            down_per_round: t.down_per_participant_round(),
            total_per_client: scale * (t.up_bytes() + t.down_bytes()) as f64 / clients as f64,
        }
    }
}

/// What the HiSo suite found.
#[derive(Clone, Debug, Serialize)]
pub struct HisoSuiteReport {
    /// The learning-rate sweeps.
    pub sweep: Vec<SweepPoint>,
    /// DeComFL's best learning rate.
    pub best_lr_decomfl: f64,
    /// HiSo's best learning rate.
    pub best_lr_hiso: f64,
    /// HiSo against DeComFL over the seeds.
    pub comparison: Comparison,
    /// Fig. 5: HiSo's best accuracy at each ν.
    pub fig5_nu: Vec<(f64, f64)>,
    /// Fig. 5: quantiles and the log₂ histogram (12 bins around the median) of the learned H.
    pub fig5_hessian: Option<(Quantiles, Vec<usize>)>,
    /// Fig. 8: best accuracy per method and local steps τ.
    pub fig8_tau: Vec<(Algorithm, usize, f64)>,
    /// Communication of DeComFL, HiSo and the baselines.
    pub traffic: Vec<Traffic>,
    /// Best accuracy of each full-dimension baseline.
    pub baselines: Vec<(Algorithm, f64)>,
}

impl HisoSuiteReport {
    /// The flat `summary.json` keys (`best_acc_hiso`, `fig8_best_acc_hiso_tau5`, …).
    pub fn write_summary(&self, s: &mut Summary) {
        let mut note = |k: String, v: f64| {
            s.insert(k, v);
        };
        for p in &self.sweep {
            let key = format!("sweep_{}_lr{}_best_acc", p.algorithm.name(), p.lr);
            note(key, p.best_acc);
        }
        note("best_lr_decomfl".into(), self.best_lr_decomfl);
        note("best_lr_hiso".into(), self.best_lr_hiso);
        let c = &self.comparison;
        for (name, b) in [("decomfl", c.best_acc_decomfl), ("hiso", c.best_acc_hiso)] {
            note(format!("best_acc_{name}"), b.mean);
            note(format!("best_acc_{name}_std"), b.std);
        }
        if let Some((d, h)) = c.final_acc_full_test {
            note("final_acc_full_test_decomfl".into(), d);
            note("final_acc_full_test_hiso".into(), h);
        }
        note(
            "rounds_to_decomfl_best_decomfl".into(),
            c.rounds_to_decomfl_best_decomfl,
        );
        note(
            "hiso_seeds_reaching_decomfl_best".into(),
            c.hiso_seeds_reaching_decomfl_best as f64,
        );
        note(
            "rounds_to_decomfl_best_hiso".into(),
            c.rounds_to_decomfl_best_hiso,
        );
        if let Some(sp) = c.speedup {
            note("hiso_speedup_mean".into(), sp.mean);
            note("hiso_speedup_std".into(), sp.std);
            note("hiso_speedup_min".into(), sp.min);
        }
        for &(nu, acc) in &self.fig5_nu {
            note(format!("fig5_best_acc_nu{nu}"), acc);
        }
        if let Some((q, hist)) = &self.fig5_hessian {
            for (k, v) in q.named() {
                note(format!("fig5_hessian_{k}"), v);
            }
            for (k, &count) in hist.iter().enumerate() {
                note(format!("fig5_hessian_hist_bin{k}"), count as f64);
            }
        }
        for &(alg, tau, acc) in &self.fig8_tau {
            note(format!("fig8_best_acc_{}_tau{tau}", alg.name()), acc);
        }
        for tr in &self.traffic {
            let name = tr.algorithm.name();
            note(format!("bytes_per_round_up_{name}"), tr.up_per_round);
            note(format!("bytes_per_round_down_{name}"), tr.down_per_round);
            note(
                format!("bytes_total_per_client_{name}"),
                tr.total_per_client,
            );
        }
        for &(alg, acc) in &self.baselines {
            note(format!("best_acc_{}", alg.name()), acc);
        }
    }
}

/// Counts of `v / median(v)` in 12 log₂ bins: bin `k` holds ratios in
/// `[2^{k−4}, 2^{k−3})`, the first and last bins also everything below and above.
pub fn log_histogram(v: &[f64]) -> Vec<usize> {
    let median = Quantiles::of(v).p50;
    let mut bins = vec![0usize; 12];
    for &x in v {
        let k = ((x / median).log2().floor() + 4.0).clamp(0.0, 11.0) as usize;
        bins[k] += 1;
    }
    bins
}
