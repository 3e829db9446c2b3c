//! `privopt reproduce dome-mnist-seeds` / `dome-fashion-seeds` / `dome-mnist-dropouts`: DOME and
//! its baselines at one ε, each step size chosen on a validation split, then repeated over
//! seeds for intervals.
//!
//! Phase 1 runs each method with an `lr_grid` once per step size (seed 0) and keeps the step
//! with the highest accuracy on `data.validation`: the test set is never looked at. Phase 2
//! runs every method at its step for `seeds` seeds (seed 0's tuning run is reused) and reports
//! the test accuracy's mean with a 95% t-interval, the paired difference to a baseline method,
//! and each run's traffic and realised privacy (with dropouts, the noise actually summed).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use privopt_math::SeedTree;
use privopt_sim::context::{RunContext, parallel_map};
use privopt_sim::error::{Result, ensure, ensure_threads};
use privopt_sim::methods::check_lr;
use privopt_sim::methods::dome::privacy::{self, PrivacyReport, RealisedPrivacy};
use privopt_sim::methods::dome::{
    DomeConfig, DomeRun, DropoutSettings, Variant, examples_per_client, train,
};
use privopt_sim::metrics::{Summary, mean_ci95};

use super::{Suite, SuiteReport, validate_base};

/// One method of the comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodSpec {
    /// Names the method's result keys (`acc_mean_<label>`); unique.
    pub label: String,
    /// Which method.
    pub variant: Variant,
    /// Sketch size (sketched variants).
    #[serde(default)]
    pub k: usize,
    /// Step sizes to choose from on the validation split; one: that step, untuned; empty: the
    /// base's `lr`.
    #[serde(default)]
    pub lr_grid: Vec<f64>,
    /// Dropouts, replacing the base's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropouts: Option<DropoutSettings>,
    /// Noise floor, replacing the base's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<f64>,
}

/// `[suite] name = "dome_seeds"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomeSeedsSuiteConfig {
    /// Settings shared by every run (`[suite.base]`).
    pub base: DomeConfig,
    /// The methods compared.
    pub methods: Vec<MethodSpec>,
    /// Runs per method at its chosen step size.
    pub seeds: u64,
    /// The method (label) every other is compared to seed by seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// Runs in parallel.
    #[serde(default = "default_threads")]
    pub threads: usize,
}

fn default_threads() -> usize {
    2
}

/// A method's step size while tuning: the best so far, every `(lr, validation accuracy)`
/// tried, and the best run (reused as seed 0).
struct Choice {
    lr: f64,
    tuning: Vec<(f64, f64)>,
    best: Option<DomeRun>,
}

/// One method's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct MethodResult {
    /// Its label.
    pub label: String,
    /// `(lr, validation accuracy)` of each tuning run (empty when not tuned).
    pub tuning: Vec<(f64, f64)>,
    /// The step size used.
    pub lr: f64,
    /// One run per seed at that step size.
    pub runs: Vec<DomeRun>,
    /// Realised privacy per seed (private variants).
    pub realised: Vec<RealisedPrivacy>,
}

/// What the suite found.
#[derive(Clone, Debug, Serialize)]
pub struct DomeSeedsSuiteReport {
    /// Per method.
    pub methods: Vec<MethodResult>,
    /// The accountants' ε for the base's target (no dropouts).
    pub target: PrivacyReport,
    /// The baseline's label.
    pub baseline: Option<String>,
}

impl DomeSeedsSuiteConfig {
    fn config_for(&self, m: &MethodSpec, lr: f64) -> DomeConfig {
        let mut cfg = self.base.clone();
        cfg.variant = m.variant;
        cfg.k = m.k;
        cfg.lr = lr;
        if let Some(d) = m.dropouts {
            cfg.dropouts = d;
        }
        if m.noise_floor.is_some() {
            cfg.noise_floor = m.noise_floor;
        }
        cfg
    }

    fn seeds(ctx: &RunContext<'_>, seed: u64) -> SeedTree {
        if seed == 0 {
            ctx.seeds
        } else {
            SeedTree::new(ctx.seeds.child_seed("dome_seeds/seed", &[seed]))
        }
    }

    /// Runs `(method, lr, seed)` jobs in parallel.
    fn run_jobs(
        &self,
        ctx: &mut RunContext<'_>,
        label: &str,
        jobs: &[(usize, f64, u64)],
    ) -> Result<Vec<DomeRun>> {
        let problem = ctx.problem()?;
        let seeds: Vec<SeedTree> = jobs.iter().map(|j| Self::seeds(ctx, j.2)).collect();
        parallel_map(jobs.len(), self.threads, label, ctx.progress, |i| {
            let (m, lr, seed) = jobs[i];
            let spec = &self.methods[m];
            tracing::info!(method = spec.label, lr, seed, "dome_seeds run");
            train(
                &self.config_for(spec, lr),
                problem,
                &seeds[i],
                |_, _| Ok(()),
            )
        })
    }
}

impl Suite for DomeSeedsSuiteConfig {
    fn validate(&self) -> Result<()> {
        validate_base(&self.base)?;
        ensure(!self.methods.is_empty(), || {
            "suite.methods must not be empty".into()
        })?;
        ensure(self.seeds >= 1 && self.seeds <= 1000, || {
            format!("suite.seeds must be in 1..=1000, got {}", self.seeds)
        })?;
        ensure_threads("suite.threads", self.threads)?;
        let mut labels = BTreeSet::new();
        for m in &self.methods {
            ensure(
                !m.label.is_empty() && labels.insert(m.label.as_str()),
                || format!("suite.methods: label `{}` is empty or repeated", m.label),
            )?;
            for &lr in &m.lr_grid {
                check_lr(lr)?;
            }
            self.config_for(m, self.base.lr)
                .check()
                .map_err(|e| match e {
                    privopt_sim::SimError::Config(msg) => privopt_sim::SimError::Config(format!(
                        "suite.methods `{}`: {}",
                        m.label,
                        msg.replace("method.", "")
                    )),
                    e => e,
                })?;
        }
        if let Some(b) = &self.baseline {
            ensure(labels.contains(b.as_str()), || {
                format!("suite.baseline = `{b}` is not a method label")
            })?;
        }
        Ok(())
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<SuiteReport> {
        let problem = ctx.problem()?;
        let tuned = self.methods.iter().any(|m| m.lr_grid.len() > 1);
        ensure(!tuned || problem.validation.is_some(), || {
            "suite.methods: an lr_grid is chosen on the validation split; set data.validation"
                .into()
        })?;
        // Phase 1: every grid step size once, seed 0.
        let grid_jobs: Vec<(usize, f64, u64)> = self
            .methods
            .iter()
            .enumerate()
            .filter(|(_, m)| m.lr_grid.len() > 1)
            .flat_map(|(i, m)| m.lr_grid.iter().map(move |&lr| (i, lr, 0)))
            .collect();
        let grid_runs = self.run_jobs(ctx, "dome step-size tuning", &grid_jobs)?;
        let mut chosen: Vec<Choice> = self
            .methods
            .iter()
            .map(|m| Choice {
                lr: m.lr_grid.first().copied().unwrap_or(self.base.lr),
                tuning: Vec::new(),
                best: None,
            })
            .collect();
        for (&(m, lr, _), run) in grid_jobs.iter().zip(grid_runs) {
            let slot = &mut chosen[m];
            slot.tuning.push((lr, run.final_val_acc));
            let better = slot
                .best
                .as_ref()
                .is_none_or(|best| run.final_val_acc > best.final_val_acc);
            if better {
                slot.lr = lr;
                slot.best = Some(run);
            }
        }
        // Phase 2: the remaining seeds at the chosen step sizes.
        let seed_jobs: Vec<(usize, f64, u64)> = chosen
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                let (first, lr) = (u64::from(c.best.is_some()), c.lr);
                (first..self.seeds).map(move |s| (i, lr, s))
            })
            .collect();
        let mut seed_runs = self.run_jobs(ctx, "dome seeds", &seed_jobs)?.into_iter();
        let mut methods = Vec::with_capacity(self.methods.len());
        for (spec, Choice { lr, tuning, best }) in self.methods.iter().zip(chosen) {
            let mut runs: Vec<DomeRun> = best.into_iter().collect();
            while runs.len() < self.seeds as usize {
                match seed_runs.next() {
                    Some(r) => runs.push(r),
                    None => break,
                }
            }
            let realised = if spec.variant == Variant::Nonprivate {
                Vec::new()
            } else {
                runs.iter()
                    .map(|r| privacy::realised(r, self.base.delta))
                    .collect::<Result<_>>()?
            };
            methods.push(MethodResult {
                label: spec.label.clone(),
                tuning,
                lr,
                runs,
                realised,
            });
        }
        // Accuracy curves of each method's seed-0 run.
        if let Some(first) = methods.first().and_then(|m| m.runs.first()) {
            let labels: Vec<String> = methods
                .iter()
                .map(|m| format!("test_accuracy/{}", m.label))
                .collect();
            for (i, &round) in first.rounds.clone().iter().enumerate() {
                let mut row: Vec<(&str, f64)> = vec![("round", round as f64)];
                for (m, label) in methods.iter().zip(&labels) {
                    let acc = m.runs.first().and_then(|r| r.test_acc.get(i).copied());
                    row.push((label.as_str(), acc.unwrap_or(f64::NAN)));
                }
                ctx.record(&row)?;
            }
        }
        let target = privacy::report(
            self.base.epsilon,
            self.base.delta,
            examples_per_client(problem),
            self.base.epochs,
        )?;
        Ok(SuiteReport::DomeSeeds(DomeSeedsSuiteReport {
            methods,
            target,
            baseline: self.baseline.clone(),
        }))
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

impl DomeSeedsSuiteReport {
    /// The flat `summary.json` keys (`acc_mean_<label>`, `acc_ci95_<label>`, `lr_<label>`, …).
    pub fn write_summary(&self, s: &mut Summary) {
        let mut note = |k: String, v: f64| {
            s.insert(k, v);
        };
        let accs = |m: &MethodResult| -> Vec<f64> { m.runs.iter().map(|r| r.final_acc).collect() };
        let base = self
            .baseline
            .as_ref()
            .and_then(|b| self.methods.iter().find(|m| &m.label == b));
        for m in &self.methods {
            let l = &m.label;
            let a = accs(m);
            let (mean_acc, ci) = mean_ci95(&a);
            note(format!("acc_mean_{l}"), mean_acc);
            note(format!("acc_ci95_{l}"), ci);
            for (seed, v) in a.iter().enumerate() {
                note(format!("acc_{l}_seed{seed}"), *v);
            }
            note(format!("lr_{l}"), m.lr);
            for (lr, val) in &m.tuning {
                note(format!("val_acc_{l}_lr{lr}"), *val);
            }
            let runs = || m.runs.iter();
            note(
                format!("uplink_bytes_{l}"),
                mean(runs().map(|r| r.uplink_bytes)),
            );
            note(
                format!("downlink_bytes_{l}"),
                mean(runs().map(|r| r.downlink_bytes)),
            );
            note(
                format!("aborted_rounds_{l}"),
                mean(runs().map(|r| r.aborted_rounds as f64)),
            );
            note(
                format!("contributors_mean_{l}"),
                mean(runs().map(|r| r.contributors_mean)),
            );
            if !m.realised.is_empty() {
                let worst = |f: fn(&RealisedPrivacy) -> f64| {
                    m.realised.iter().map(f).fold(f64::NEG_INFINITY, f64::max)
                };
                note(
                    format!("epsilon_rdp_realised_{l}"),
                    worst(|r| r.epsilon_rdp_realised),
                );
                note(
                    format!("epsilon_zcdp_realised_{l}"),
                    worst(|r| r.epsilon_zcdp_realised),
                );
                note(
                    format!("noise_ratio_min_{l}"),
                    m.realised
                        .iter()
                        .map(|r| r.noise_ratio_min)
                        .fold(f64::INFINITY, f64::min),
                );
                note(
                    format!("noise_ratio_mean_{l}"),
                    mean(m.realised.iter().map(|r| r.noise_ratio_mean)),
                );
            }
            if let Some(b) = base.filter(|b| b.label != *l) {
                // Paired by seed: the same seed gives both the same initial model and schedule.
                let diffs: Vec<f64> = a.iter().zip(accs(b)).map(|(x, y)| x - y).collect();
                let (d, h) = mean_ci95(&diffs);
                note(format!("diff_mean_{l}_vs_{}", b.label), d);
                note(format!("diff_ci95_{l}_vs_{}", b.label), h);
            }
        }
        note("sigma".into(), self.target.sigma);
        note("epsilon_rdp_target".into(), self.target.epsilon_rdp);
        note("epsilon_zcdp_target".into(), self.target.epsilon_zcdp);
    }
}
