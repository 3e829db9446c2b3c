//! `privopt reproduce dome-mnist` / `dome-fashion`: every method over ε and sketch sizes.
//!
//! Phase 1 runs the non-private FedAdam, DP-FedAdam at every ε, and each sketch method at every
//! k at `sweep_epsilon`; phase 2 runs each sketch method at its best k (highest final accuracy
//! at `sweep_epsilon`) at the other ε. All runs share the seed: the same initial model, the
//! same first sketch draw and the same client schedule. Runs go in parallel (`threads`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use privopt_sim::context::{RunContext, parallel_map};
use privopt_sim::error::{Result, ensure, ensure_threads};
use privopt_sim::methods::check_lr;
use privopt_sim::methods::dome::privacy::PrivacyReport;
use privopt_sim::methods::dome::{
    DomeConfig, DomeRun, Variant, examples_per_client, privacy, train,
};
use privopt_sim::metrics::Summary;

use super::{Suite, SuiteReport};

/// `[suite] name = "dome"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomeSuiteConfig {
    /// Settings shared by every run (`[suite.base]`; `variant`, `k`, `epsilon` are replaced).
    pub base: DomeConfig,
    /// Privacy budgets ε (integers in the result keys).
    pub epsilons: Vec<f64>,
    /// Sketch sizes tried at `sweep_epsilon`.
    pub ks: Vec<usize>,
    /// The ε of the k sweep (and of the MSE and traffic keys).
    pub sweep_epsilon: f64,
    /// Step size per method (`dome`, `dome_noprobe`, `random_sketch`, `dp_full`,
    /// `nonprivate`); methods not listed use the base's.
    #[serde(default)]
    pub lr_by_method: BTreeMap<Variant, f64>,
    /// Runs in parallel.
    #[serde(default = "default_threads")]
    pub threads: usize,
}

fn default_threads() -> usize {
    2
}

const SKETCHED: [Variant; 3] = [Variant::Dome, Variant::DomeNoprobe, Variant::RandomSketch];

/// One run of the suite: which method, sketch size and budget.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Job {
    /// The method.
    pub variant: Variant,
    /// Sketch size (0 for the unsketched methods).
    pub k: usize,
    /// Privacy budget ε (0 for the non-private run).
    pub epsilon: f64,
}

/// What the DOME suite found.
#[derive(Clone, Debug, Serialize)]
pub struct DomeSuiteReport {
    /// The ε of the k sweep.
    pub sweep_epsilon: f64,
    /// The budgets.
    pub epsilons: Vec<f64>,
    /// Every run, in the order run.
    pub runs: Vec<(Job, DomeRun)>,
    /// The k each sketch method keeps for the ε sweep (highest accuracy at `sweep_epsilon`).
    pub best_k: Vec<(Variant, usize)>,
    /// σ and the accountants' ε at each budget.
    pub privacy: Vec<(f64, PrivacyReport)>,
    /// Model parameters.
    pub params: usize,
}

impl Job {
    fn label(&self) -> String {
        match self.variant {
            Variant::Nonprivate => "nonprivate".into(),
            Variant::DpFull => format!("dp_full_eps{}", self.epsilon),
            v => format!("{}_k{}_eps{}", v.name(), self.k, self.epsilon),
        }
    }
}

impl DomeSuiteConfig {
    fn config_for(&self, job: Job) -> DomeConfig {
        let mut cfg = self.base.clone();
        cfg.variant = job.variant;
        cfg.k = job.k;
        cfg.epsilon = job.epsilon;
        if let Some(&lr) = self.lr_by_method.get(&job.variant) {
            cfg.lr = lr;
        }
        cfg
    }

    fn run_jobs(&self, ctx: &mut RunContext<'_>, jobs: &[Job]) -> Result<Vec<DomeRun>> {
        let problem = ctx.problem()?;
        let seeds = ctx.seeds;
        parallel_map(jobs.len(), self.threads, "dome runs", ctx.progress, |i| {
            let cfg = self.config_for(jobs[i]);
            tracing::info!(run = jobs[i].label(), "dome suite run");
            train(&cfg, problem, &seeds, |_, _| Ok(()))
        })
    }
}

fn eps_key(e: f64) -> String {
    format!("{}", e.round() as i64)
}

impl Suite for DomeSuiteConfig {
    fn validate(&self) -> Result<()> {
        self.base.check()?;
        ensure(!self.epsilons.is_empty() && !self.ks.is_empty(), || {
            "suite.epsilons and suite.ks must not be empty".into()
        })?;
        ensure(
            self.epsilons.iter().all(|&e| e > 0.0 && e.fract() == 0.0),
            || "suite.epsilons must be positive integers (they name result keys)".into(),
        )?;
        ensure(self.epsilons.contains(&self.sweep_epsilon), || {
            format!(
                "suite.sweep_epsilon = {} must be one of suite.epsilons",
                self.sweep_epsilon
            )
        })?;
        ensure(self.ks.iter().all(|&k| k >= 1), || {
            "suite.ks must be >= 1".into()
        })?;
        for &lr in self.lr_by_method.values() {
            check_lr(lr)?;
        }
        ensure_threads("suite.threads", self.threads)
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<SuiteReport> {
        let sweep = self.sweep_epsilon;
        let mut phase1 = vec![Job {
            variant: Variant::Nonprivate,
            k: 0,
            epsilon: 0.0,
        }];
        phase1.extend(self.epsilons.iter().map(|&e| Job {
            variant: Variant::DpFull,
            k: 0,
            epsilon: e,
        }));
        for v in SKETCHED {
            phase1.extend(self.ks.iter().map(|&k| Job {
                variant: v,
                k,
                epsilon: sweep,
            }));
        }
        let runs1 = self.run_jobs(ctx, &phase1)?;
        let mut done: Vec<(Job, DomeRun)> = phase1.into_iter().zip(runs1).collect();
        let best_k: Vec<(Variant, usize)> = SKETCHED
            .iter()
            .map(|&v| {
                let best = done
                    .iter()
                    .filter(|(j, _)| j.variant == v)
                    .max_by(|a, b| a.1.final_acc.total_cmp(&b.1.final_acc))
                    .map_or(self.ks[0], |(j, _)| j.k);
                (v, best)
            })
            .collect();
        let phase2: Vec<Job> = best_k
            .iter()
            .flat_map(|&(v, k)| {
                self.epsilons
                    .iter()
                    .filter(|&&e| e != sweep)
                    .map(move |&e| Job {
                        variant: v,
                        k,
                        epsilon: e,
                    })
            })
            .collect();
        let runs2 = self.run_jobs(ctx, &phase2)?;
        done.extend(phase2.into_iter().zip(runs2));
        let problem = ctx.problem()?;
        let n_max = examples_per_client(problem);
        let privacy = self
            .epsilons
            .iter()
            .map(|&e| {
                Ok((
                    e,
                    privacy::report(e, self.base.delta, n_max, self.base.epochs)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;

        // Accuracy curves: one column per run, on the shared evaluation rounds.
        if let Some((_, first)) = done.first() {
            let rounds = first.rounds.clone();
            let labels: Vec<String> = done
                .iter()
                .map(|(j, _)| format!("test_accuracy/{}", j.label()))
                .collect();
            for (i, &round) in rounds.iter().enumerate() {
                let mut row: Vec<(&str, f64)> = vec![("round", round as f64)];
                for ((_, r), label) in done.iter().zip(&labels) {
                    row.push((
                        label.as_str(),
                        r.test_acc.get(i).copied().unwrap_or(f64::NAN),
                    ));
                }
                ctx.record(&row)?;
            }
        }
        Ok(SuiteReport::Dome(DomeSuiteReport {
            sweep_epsilon: sweep,
            epsilons: self.epsilons.clone(),
            runs: done,
            best_k,
            privacy,
            params: problem.model.num_params(),
        }))
    }
}

impl DomeSuiteReport {
    fn find(&self, v: Variant, k: usize, e: f64) -> Option<&DomeRun> {
        self.runs
            .iter()
            .find(|(j, _)| {
                j.variant == v
                    && (v == Variant::Nonprivate || j.epsilon == e)
                    && (!v.sketched() || j.k == k)
            })
            .map(|(_, r)| r)
    }

    /// The flat `summary.json` keys (`acc_dome_eps4`, `best_k_dome`, `sigma_eps1`, …).
    pub fn write_summary(&self, s: &mut Summary) {
        let mut note = |k: String, v: f64| {
            s.insert(k, v);
        };
        let sweep = self.sweep_epsilon;
        for &(v, best) in &self.best_k {
            for (j, r) in self.runs.iter().filter(|(j, _)| j.variant == v) {
                if j.epsilon == sweep {
                    note(
                        format!("acc_{}_k{}_eps{}", v.name(), j.k, eps_key(sweep)),
                        r.final_acc,
                    );
                }
            }
            note(format!("best_k_{}", v.name()), best as f64);
        }
        if let Some(r) = self.find(Variant::Nonprivate, 0, 0.0) {
            note("acc_nonprivate".into(), r.final_acc);
            note("uplink_bytes_nonprivate".into(), r.uplink_bytes);
            note("grad_mse_nonprivate".into(), r.grad_mse);
            note("rounds".into(), r.total_rounds as f64);
        }
        let methods = self.best_k.iter().copied().chain([(Variant::DpFull, 0)]);
        for (v, k) in methods {
            let name = v.name();
            for &e in &self.epsilons {
                if let Some(r) = self.find(v, k, e) {
                    note(format!("acc_{name}_eps{}", eps_key(e)), r.final_acc);
                }
            }
            if let Some(r) = self.find(v, k, sweep) {
                note(format!("uplink_bytes_{name}"), r.uplink_bytes);
                note(format!("uplink_vector_bytes_{name}"), r.uplink_vector_bytes);
                note(format!("grad_mse_{name}"), r.grad_mse);
                note(format!("grad_noise_mse_{name}"), r.noise_mse);
                note(format!("grad_noise_mse_theory_{name}"), r.noise_mse_theory);
                if v == Variant::Dome || v == Variant::DomeNoprobe {
                    note(format!("kept_mean_{name}"), r.kept_mean);
                }
            }
        }
        if let (Some(full), Some(dome)) = (
            self.find(Variant::DpFull, 0, sweep),
            self.best_k
                .iter()
                .find(|(v, _)| *v == Variant::Dome)
                .and_then(|&(v, k)| self.find(v, k, sweep)),
        ) {
            note(
                "uplink_ratio_dp_full_over_dome".into(),
                full.uplink_bytes / dome.uplink_bytes,
            );
        }
        for (e, p) in &self.privacy {
            note(format!("sigma_eps{}", eps_key(*e)), p.sigma);
            note(format!("epsilon_zcdp_eps{}", eps_key(*e)), p.epsilon_zcdp);
            note(format!("epsilon_rdp_eps{}", eps_key(*e)), p.epsilon_rdp);
        }
        note("params".into(), self.params as f64);
    }
}
