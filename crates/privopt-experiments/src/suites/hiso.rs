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
use privopt_sim::metrics::{Quantiles, mean_variance};
use privopt_sim::problem::Problem;

/// A full-dimension baseline run of the suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineRun {
    /// `fedavg`, `fedadam` or `fedzo`.
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
            ctx.note(&format!("sweep_{}_lr{lr}_best_acc", algorithm.name()), acc);
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
        let (lr_d, t_d0) = self.sweep(ctx, Algorithm::Decomfl, &self.lr_grid_decomfl)?;
        let (lr_h, t_h0) = self.sweep(ctx, Algorithm::Hiso, &self.lr_grid_hiso)?;
        ctx.note("best_lr_decomfl", lr_d);
        ctx.note("best_lr_hiso", lr_h);
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
        self.compare(ctx, &dec, &his)?;

        // Fig. 5: ν ablation and the learned H of the seed-0 HiSo run.
        for &nu in &self.nu_grid {
            let t = self.run_one(ctx.problem()?, &ctx.seeds, Algorithm::Hiso, lr_h, 0, |c| {
                c.nu = nu
            })?;
            ctx.note(&format!("fig5_best_acc_nu{nu}"), t.best_acc());
            curves.add(format!("fig5_nu/nu={nu}"), &t);
            ctx.progress.advance(1);
        }
        if let Some(h) = &his[0].hessian {
            for (k, v) in Quantiles::of(h).named() {
                ctx.note(&format!("fig5_hessian_{k}"), v);
            }
            for (k, count) in log_histogram(h).into_iter().enumerate() {
                ctx.note(&format!("fig5_hessian_hist_bin{k}"), count as f64);
            }
        }

        // Fig. 8: local steps.
        for &tau in &self.tau_grid {
            for (alg, lr) in [(Algorithm::Decomfl, lr_d), (Algorithm::Hiso, lr_h)] {
                let t = self.run_one(ctx.problem()?, &ctx.seeds, alg, lr, 0, |c| {
                    c.local_steps = tau;
                    c.rounds = short;
                })?;
                ctx.note(
                    &format!("fig8_best_acc_{}_tau{tau}", alg.name()),
                    t.best_acc(),
                );
                curves.add(format!("fig8_tau/{}_tau{tau}", alg.name()), &t);
                ctx.progress.advance(1);
            }
        }

        // Communication of every method.
        let clients = ctx.problem()?.clients.len();
        for (name, t) in [("decomfl", &dec[0]), ("hiso", &his[0])] {
            note_traffic(ctx, name, t, clients, 1.0);
        }
        for b in &self.baselines {
            let t = self.run_one(ctx.problem()?, &ctx.seeds, b.algorithm, b.lr, 0, |c| {
                c.rounds = short;
                if let Some(s) = b.server_lr {
                    c.server_lr = s;
                }
            })?;
            let name = b.algorithm.name();
            ctx.note(&format!("best_acc_{name}"), t.best_acc());
            // Totals scaled to the main runs' rounds, so they compare at equal rounds.
            let scale = self.base.rounds as f64 / short as f64;
            note_traffic(ctx, name, &t, clients, scale);
            curves.add(format!("baselines/{name}"), &t);
            ctx.progress.advance(1);
        }
        ctx.progress.finish();

        for (i, &r) in curves.rounds.iter().enumerate() {
            let mut row: Vec<(&str, f64)> = vec![("round", r as f64)];
            row.extend(curves.columns.iter().map(|(n, v)| (n.as_str(), v[i])));
            ctx.record(&row)?;
        }
        Ok(SuiteReport::Noted)
    }
}

impl HisoSuiteConfig {
    /// Best accuracies and the rounds each method needs to reach DeComFL's best, per seed.
    fn compare(
        &self,
        ctx: &mut RunContext<'_>,
        dec: &[Trajectory],
        his: &[Trajectory],
    ) -> Result<()> {
        let best = |ts: &[Trajectory]| ts.iter().map(Trajectory::best_acc).collect::<Vec<_>>();
        let (bd, bh) = (best(dec), best(his));
        for (name, v) in [("decomfl", &bd), ("hiso", &bh)] {
            let (m, var) = mean_variance(v);
            ctx.note(&format!("best_acc_{name}"), m);
            ctx.note(&format!("best_acc_{name}_std"), var.sqrt());
        }
        let problem = ctx.problem()?;
        for (name, ts) in [("decomfl", dec), ("hiso", his)] {
            if !self.score_full_test {
                break;
            }
            let accs: Vec<f64> = ts
                .iter()
                .map(|t| {
                    problem
                        .model
                        .accuracy(&t.params, &problem.test)
                        .unwrap_or(f64::NAN)
                })
                .collect();
            ctx.note(
                &format!("final_acc_full_test_{name}"),
                mean_variance(&accs).0,
            );
        }
        let mut r_dec = Vec::new();
        let mut r_his = Vec::new();
        let mut speedups = Vec::new();
        let mut reached = 0;
        for (d, h) in dec.iter().zip(his) {
            let target = d.best_acc();
            let rd = d.first_round_reaching(target).unwrap_or(self.base.rounds) as f64;
            r_dec.push(rd);
            if let Some(rh) = h.first_round_reaching(target) {
                reached += 1;
                r_his.push(rh as f64);
                speedups.push(rd / (rh as f64).max(1.0));
            }
        }
        ctx.note("rounds_to_decomfl_best_decomfl", mean_variance(&r_dec).0);
        ctx.note("hiso_seeds_reaching_decomfl_best", reached as f64);
        if !r_his.is_empty() {
            ctx.note("rounds_to_decomfl_best_hiso", mean_variance(&r_his).0);
            let (m, var) = mean_variance(&speedups);
            ctx.note("hiso_speedup_mean", m);
            ctx.note("hiso_speedup_std", var.sqrt());
            let lo = speedups.iter().copied().fold(f64::INFINITY, f64::min);
            ctx.note("hiso_speedup_min", lo);
        } else {
            ctx.note("rounds_to_decomfl_best_hiso", f64::NAN);
        }
        Ok(())
    }
}

/// Notes `bytes_per_round_{up,down}_<name>` (per participant) and
/// `bytes_total_per_client_<name>` (`scale` × the run's traffic over `clients` clients).
fn note_traffic(ctx: &mut RunContext<'_>, name: &str, t: &Trajectory, clients: usize, scale: f64) {
    ctx.note(
        &format!("bytes_per_round_up_{name}"),
        t.up_per_participant_round(),
    );
    ctx.note(
        &format!("bytes_per_round_down_{name}"),
        t.down_per_participant_round(),
    );
    let total = (t.up_bytes() + t.down_bytes()) as f64 / clients as f64;
    ctx.note(&format!("bytes_total_per_client_{name}"), scale * total);
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
