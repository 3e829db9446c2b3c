//! The §6 MNIST reproduction (`privopt reproduce hiso-mnist`): HiSo against DeComFL at the
//! same communication per round, each at its best learning rate from a sweep, over several
//! seeds; Fig. 5 (ν ablation, distribution of the learned `H`); Fig. 8 (local steps τ); and
//! the full-dimension baselines' accuracy and traffic. Optionally, two checks of what HiSo's
//! `H` learns: an "oracle-step" DeComFL run per seed at HiSo's global step `η_HiSo / median(H)`
//! (same step size, no per-coordinate shape), and the rank correlation of the final `H` between
//! seeds and with the diagonal of `E[∇f²]` (minibatch gradients by backprop).
//!
//! Seeds vary everything random in a run (initial model, client sampling, minibatches,
//! directions); the data split is the experiment's and stays fixed.

use privopt_math::SeedTree;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use privopt_ml::data::minibatch;
use privopt_sim::context::{NoProgress, RunContext};
use privopt_sim::error::{Result, SimError, ensure};
use privopt_sim::methods::check_lr;
use privopt_sim::methods::scalar_fl::{Algorithm, ScalarFlConfig, Trajectory, simulate};

use super::{Suite, SuiteReport, validate_base};
use privopt_data::problem::Problem;
use privopt_sim::metrics::Summary;
use privopt_sim::metrics::{Quantiles, mean_ci95, mean_variance, spearman};

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
    /// Per seed, also run DeComFL at `η_HiSo / median(H_final)` of that seed's HiSo run
    /// (`oracle_*` keys).
    #[serde(default)]
    pub oracle_step: bool,
    /// Minibatch gradients (backprop, `base.batch_size` examples of a uniformly drawn client)
    /// averaged into each seed's diagonal of `E[∇f²]` at its final HiSo model (0: no `H`
    /// diagnostic; `hessian_rank_*` keys).
    #[serde(default)]
    pub hessian_diagnostic_batches: usize,
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
    /// Adds `t`'s test accuracy as column `name`.
    fn add(&mut self, name: String, t: &Trajectory) {
        self.add_values(name, t, &t.test_acc);
    }

    /// Adds `values` (one per evaluation of `t`) as column `name`.
    fn add_values(&mut self, name: String, t: &Trajectory, values: &[f64]) {
        let values = self
            .rounds
            .iter()
            .map(|r| {
                t.rounds
                    .iter()
                    .position(|x| x == r)
                    .map_or(f64::NAN, |i| values[i])
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
                Err(SimError::Diverged { .. }) => f64::NAN,
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
            SimError::Infeasible(format!(
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
            + if self.oracle_step { self.seeds } else { 0 }
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
            // Loss on the same examples: a finer signal than accuracy when predictions barely
            // move (full-parameter MiniLM).
            curves.add_values(format!("test_loss/decomfl_seed{s}"), d, &d.test_loss);
            curves.add_values(format!("test_loss/hiso_seed{s}"), h, &h.test_loss);
        }
        let comparison = self.compare(ctx.problem()?, &dec, &his);

        // The oracle-step DeComFL runs and the H diagnostic.
        let mut oracle = Vec::new();
        if self.oracle_step {
            for (s, h) in his.iter().enumerate() {
                let median = h
                    .hessian
                    .as_deref()
                    .map_or(f64::NAN, |v| Quantiles::of(v).p50);
                let lr = lr_h / median;
                check_lr(lr)?;
                let t = self.run_one(
                    ctx.problem()?,
                    &ctx.seeds,
                    Algorithm::Decomfl,
                    lr,
                    s as u64,
                    |_| {},
                )?;
                curves.add(format!("oracle_step/decomfl_seed{s}"), &t);
                oracle.push((lr, t));
                ctx.progress.advance(1);
            }
        }
        let oracle_step = if oracle.is_empty() {
            None
        } else {
            let (lrs, runs): (Vec<f64>, Vec<Trajectory>) = oracle.into_iter().unzip();
            Some(OracleStep {
                lrs,
                against_hiso: self.compare(ctx.problem()?, &runs, &his),
            })
        };
        let hessian_ranks = if self.hessian_diagnostic_batches > 0 {
            Some(self.hessian_ranks(ctx.problem()?, &ctx.seeds, &his))
        } else {
            None
        };

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
        Ok(SuiteReport::Hiso(Box::new(HisoSuiteReport {
            sweep,
            best_lr_decomfl: lr_d,
            best_lr_hiso: lr_h,
            comparison,
            oracle_step,
            hessian_ranks,
            fig5_nu,
            fig5_hessian,
            fig8_tau,
            traffic,
            baselines,
        })))
    }
}

impl HisoSuiteConfig {
    /// Rank correlations of the seeds' final `H` with each other and with the diagonal of
    /// `E[∇f²]` at each seed's final HiSo model.
    fn hessian_ranks(
        &self,
        problem: &Problem,
        seeds: &SeedTree,
        his: &[Trajectory],
    ) -> HessianRanks {
        let hs: Vec<&[f64]> = his.iter().filter_map(|t| t.hessian.as_deref()).collect();
        let mut between = Vec::new();
        for (i, a) in hs.iter().enumerate() {
            for b in &hs[i + 1..] {
                between.push(spearman(a, b));
            }
        }
        let with_grad_sq: Vec<f64> = his
            .iter()
            .enumerate()
            .filter_map(|(s, t)| {
                let h = t.hessian.as_deref()?;
                let g2 = self.gradient_second_moment(problem, seeds, s as u64, &t.params);
                Some(spearman(h, &g2))
            })
            .collect();
        HessianRanks {
            between_seeds: mean_ci95(&between),
            between_seeds_pairs: between.len(),
            with_grad_sq: mean_ci95(&with_grad_sq),
            with_grad_sq_per_seed: with_grad_sq,
        }
    }

    /// `E[a_j²]` of the minibatch gradient `a` at `x`: the mean over
    /// `hessian_diagnostic_batches` minibatches of `base.batch_size` examples from uniformly
    /// drawn clients (the gradient HiSo's scalars sample).
    fn gradient_second_moment(
        &self,
        problem: &Problem,
        seeds: &SeedTree,
        seed: u64,
        x: &[f64],
    ) -> Vec<f64> {
        let mut rng = seeds.stream("hiso_suite/grad_sq", &[seed]);
        let batches: Vec<Vec<usize>> = (0..self.hessian_diagnostic_batches)
            .map(|_| {
                let c = rand::Rng::random_range(&mut rng, 0..problem.clients.len());
                minibatch(&problem.clients[c], self.base.batch_size, &mut rng)
            })
            .collect();
        let squares: Vec<Vec<f64>> = batches
            .par_iter()
            .map(|b| {
                let mut g = vec![0.0; x.len()];
                problem.model.loss_grad(x, &problem.train, Some(b), &mut g);
                g.iter_mut().for_each(|v| *v *= *v);
                g
            })
            .collect();
        // Summed in batch order, so the result does not depend on the thread count.
        let mut sum = vec![0.0; x.len()];
        for sq in &squares {
            sum.iter_mut().zip(sq).for_each(|(s, v)| *s += v);
        }
        let n = batches.len() as f64;
        sum.iter_mut().for_each(|s| *s /= n);
        sum
    }

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
        let mut common = Vec::new();
        for (d, h) in dec.iter().zip(his) {
            let target = d.best_acc();
            let rd = d.first_round_reaching(target).unwrap_or(self.base.rounds) as f64;
            r_dec.push(rd);
            if let Some(rh) = h.first_round_reaching(target) {
                r_his.push(rh as f64);
                speedups.push(rd / (rh as f64).max(1.0));
            }
            // The lower of the two bests: both runs reach it, so every seed has a ratio.
            let target = d.best_acc().min(h.best_acc());
            let rounds =
                |t: &Trajectory| t.first_round_reaching(target).unwrap_or(self.base.rounds);
            // Round 0 counts as one, so two runs that start at the target tie at 1.
            common.push((rounds(d) as f64).max(1.0) / (rounds(h) as f64).max(1.0));
        }
        let accuracy_diff: Vec<f64> = dec
            .iter()
            .zip(his)
            .map(|(d, h)| h.best_acc() - d.best_acc())
            .collect();
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
            speedup: Speedup::of(&speedups),
            speedup_common_target: Speedup::of(&common),
            best_acc_diff: mean_ci95(&accuracy_diff),
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
    /// DeComFL's rounds over HiSo's to DeComFL's best, over the seeds on which HiSo reaches
    /// it (biased upwards when some seeds do not).
    pub speedup: Option<Speedup>,
    /// DeComFL's rounds over HiSo's to the lower of the two bests, every seed.
    pub speedup_common_target: Option<Speedup>,
    /// HiSo's best accuracy minus DeComFL's, paired by seed: mean and 95% half-width.
    pub best_acc_diff: (f64, f64),
}

impl Comparison {
    /// The comparison's `summary.json` keys, each prefixed by `prefix`.
    fn write_summary(&self, prefix: &str, note: &mut impl FnMut(String, f64)) {
        for (name, b) in [
            ("decomfl", self.best_acc_decomfl),
            ("hiso", self.best_acc_hiso),
        ] {
            note(format!("{prefix}best_acc_{name}"), b.mean);
            note(format!("{prefix}best_acc_{name}_std"), b.std);
        }
        note(format!("{prefix}best_acc_diff"), self.best_acc_diff.0);
        note(format!("{prefix}best_acc_diff_ci95"), self.best_acc_diff.1);
        if let Some((d, h)) = self.final_acc_full_test {
            note(format!("{prefix}final_acc_full_test_decomfl"), d);
            note(format!("{prefix}final_acc_full_test_hiso"), h);
        }
        note(
            format!("{prefix}rounds_to_decomfl_best_decomfl"),
            self.rounds_to_decomfl_best_decomfl,
        );
        note(
            format!("{prefix}hiso_seeds_reaching_decomfl_best"),
            self.hiso_seeds_reaching_decomfl_best as f64,
        );
        note(
            format!("{prefix}rounds_to_decomfl_best_hiso"),
            self.rounds_to_decomfl_best_hiso,
        );
        for (name, sp) in [
            ("hiso_speedup", self.speedup),
            ("hiso_speedup_common", self.speedup_common_target),
        ] {
            if let Some(sp) = sp {
                note(format!("{prefix}{name}_mean"), sp.mean);
                note(format!("{prefix}{name}_std"), sp.std);
                note(format!("{prefix}{name}_min"), sp.min);
                note(format!("{prefix}{name}_ci95"), sp.ci95);
            }
        }
    }
}

/// Speed-up over seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Speedup {
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub std: f64,
    /// Half-width of the 95% t interval of the mean (NaN for one seed).
    pub ci95: f64,
    /// Smallest.
    pub min: f64,
    /// Seeds it is over.
    pub seeds: usize,
}

impl Speedup {
    /// The statistics of per-seed ratios (none when there are none).
    fn of(ratios: &[f64]) -> Option<Self> {
        if ratios.is_empty() {
            return None;
        }
        let (mean, var) = mean_variance(ratios);
        Some(Self {
            mean,
            std: var.sqrt(),
            ci95: mean_ci95(ratios).1,
            min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
            seeds: ratios.len(),
        })
    }
}

/// DeComFL at HiSo's global step, against HiSo.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OracleStep {
    /// Per seed, `η_HiSo / median(H_final)`.
    pub lrs: Vec<f64>,
    /// HiSo against these runs (in the fields named for DeComFL).
    pub against_hiso: Comparison,
}

/// What the learned `H` tracks, by rank correlation (mean and 95% half-width).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HessianRanks {
    /// Spearman correlation of the final `H` between two seeds, over all pairs.
    pub between_seeds: (f64, f64),
    /// Pairs of seeds.
    pub between_seeds_pairs: usize,
    /// Spearman correlation of a seed's final `H` with the diagonal of `E[∇f²]` at its model.
    pub with_grad_sq: (f64, f64),
    /// The same, per seed.
    pub with_grad_sq_per_seed: Vec<f64>,
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
    /// HiSo against DeComFL at HiSo's global step, if run.
    pub oracle_step: Option<OracleStep>,
    /// Rank correlations of the learned `H`, if computed.
    pub hessian_ranks: Option<HessianRanks>,
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
        // 1 when the best rate is the smallest or largest tried (the grid does not bracket it).
        for (alg, best) in [
            (Algorithm::Decomfl, self.best_lr_decomfl),
            (Algorithm::Hiso, self.best_lr_hiso),
        ] {
            let lrs: Vec<f64> = self
                .sweep
                .iter()
                .filter(|p| p.algorithm == alg)
                .map(|p| p.lr)
                .collect();
            let lo = lrs.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = lrs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let edge = lrs.len() > 1 && (best == lo || best == hi);
            note(
                format!("best_lr_{}_on_grid_edge", alg.name()),
                f64::from(u8::from(edge)),
            );
        }
        self.comparison.write_summary("", &mut note);
        if let Some(o) = &self.oracle_step {
            // `oracle_best_acc_decomfl` etc.: "decomfl" is the oracle-step DeComFL run.
            o.against_hiso.write_summary("oracle_", &mut note);
            for (s, lr) in o.lrs.iter().enumerate() {
                note(format!("oracle_lr_seed{s}"), *lr);
            }
        }
        if let Some(h) = &self.hessian_ranks {
            note("hessian_rank_between_seeds".into(), h.between_seeds.0);
            note("hessian_rank_between_seeds_ci95".into(), h.between_seeds.1);
            note("hessian_rank_with_grad_sq".into(), h.with_grad_sq.0);
            note("hessian_rank_with_grad_sq_ci95".into(), h.with_grad_sq.1);
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
