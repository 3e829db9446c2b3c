//! What the dpfhe suites found, typed, and the flat `summary.json` keys they are written as.

pub use privopt_dpfhe::plan::PlanNumbers;
use privopt_sim::metrics::Summary;
use serde::Serialize;

use crate::flat::write_flat;

/// What one dpfhe experiment found.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub enum DpfheSuiteReport {
    /// Table 3: one cell per dataset, fit and interval.
    Table3(Vec<Table3Cell>),
    /// Table 4: one entry per dataset.
    Table4(Vec<Table4Dataset>),
    /// Fig. 4/5.
    Divergence(DivergenceReport),
    /// Algorithms 5 and 4 on ciphertexts.
    Encrypted(EncryptedReport),
    /// The accuracy-gap diagnosis: one entry per dataset.
    Gap(Vec<GapDataset>),
}

impl DpfheSuiteReport {
    /// The flat `summary.json` keys.
    pub fn write_summary(&self, s: &mut Summary) {
        match self {
            DpfheSuiteReport::Table3(cells) => {
                for c in cells {
                    write_flat(s, &c.key, c);
                }
            }
            DpfheSuiteReport::Table4(rows) => {
                for r in rows {
                    write_flat(s, &r.key, r);
                }
            }
            DpfheSuiteReport::Divergence(r) => write_flat(s, "", r),
            DpfheSuiteReport::Encrypted(r) => r.write_summary(s),
            DpfheSuiteReport::Gap(rows) => {
                for r in rows {
                    write_flat(s, &r.key, r);
                }
            }
        }
    }
}

/// One cell of Table 3: a degree-`degree` sigmoid fit on [−h, h], the hyperparameters it fixes
/// (LR = 1/β, T = 2β·g(w₀)/ρ²) and the accuracy of approximate GD with them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table3Cell {
    /// `table3_{dataset}_{fit}_{h}`.
    #[serde(skip)]
    pub key: String,
    /// The dataset, and the fit and interval as a curve label (`MM@[−h, h]`).
    #[serde(skip)]
    pub dataset: String,
    /// See `dataset`.
    #[serde(skip)]
    pub label: String,
    /// sup |p̃ − σ| on the interval, on a grid.
    pub error_sup: f64,
    /// Its certified upper bound.
    pub error_sup_certified: f64,
    /// L2 error.
    pub error_l2: f64,
    /// RMS error.
    pub error_rms: f64,
    /// β = m·max|p̃′| (App. D.1).
    pub smoothness: f64,
    /// β from the data: max|p̃′|·λ_max(XᵀX/N).
    pub smoothness_data: f64,
    /// 1/β.
    pub lr: f64,
    /// T·ρ² = 2β·ln 2.
    pub trho2: f64,
    /// T from the paper's ρ.
    pub steps: u64,
    /// Test accuracy.
    pub acc: f64,
    /// Steps run (T, capped by `max_steps`).
    pub steps_run: u64,
    /// Whether the run diverged.
    pub diverged: bool,
    /// Fig. 3's final optimization error ‖w_T − w*‖², w* the minimizer of the exact logistic
    /// loss on the training set (NaN when it has none).
    pub distance_final: f64,
    /// Fig. 3's curve: ‖w_t − w*‖² for t = 0, …, T.
    #[serde(skip)]
    pub distance: Vec<f64>,
}

/// Mean and standard deviation of accuracy and AUC over runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AccAuc {
    /// Mean accuracy.
    pub acc_mean: f64,
    /// Its standard deviation.
    pub acc_std: f64,
    /// Mean AUC.
    pub auc_mean: f64,
    /// Its standard deviation.
    pub auc_std: f64,
}

/// Table 4 on one dataset.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table4Dataset {
    /// `table4_{dataset}`.
    #[serde(skip)]
    pub key: String,
    /// The parameters.
    #[serde(flatten)]
    pub plan: PlanNumbers,
    /// DP-SGD with clipping.
    pub dpgd: AccAuc,
    /// The no-clip barrier method.
    pub noclip: AccAuc,
    /// Output perturbation.
    pub output: AccAuc,
}

/// Fig. 4/5: plain approximate GD against the barrier run on one polynomial.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DivergenceReport {
    /// Half-width h of the sigmoid's interval.
    pub fig4_interval: f64,
    /// Step size.
    pub fig4_lr: f64,
    /// Steps.
    pub fig4_steps: u64,
    /// Step at which the plain run diverged (−1: never).
    pub fig4_plain_diverged_at: f64,
    /// First step whose max margin leaves [−h, h] (−1: never).
    pub fig4_plain_first_outside: f64,
    /// Largest margin of the plain run.
    pub fig4_plain_max_margin: f64,
    /// Whether Theorem 3 certifies the barrier parameters.
    pub fig5_barrier_certified: bool,
    /// Step at which the barrier run diverged (−1: never).
    pub fig5_barrier_diverged_at: f64,
    /// Largest margin of the barrier run.
    pub fig5_barrier_max_margin: f64,
    /// Barrier Θ.
    pub fig5_barrier_theta: f64,
    /// Barrier λ.
    pub fig5_barrier_lambda: f64,
    /// Barrier κ.
    pub fig5_barrier_kappa: f64,
    /// Test accuracy of the barrier run.
    pub fig5_barrier_acc: f64,
}

/// The accuracy-gap diagnosis on one dataset.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GapDataset {
    /// `gap_{dataset}`.
    #[serde(skip)]
    pub key: String,
    /// The certified Table 4 parameters.
    #[serde(flatten)]
    pub plan: PlanNumbers,
    /// DP-GD's grid best.
    pub dpgd: GridBest,
    /// The idealised no-clip run's grid best.
    pub ideal: GridBest,
    /// Mean accuracy of the certified Algorithm 3.
    pub certified_acc: f64,
}

/// The best cell of a (T, η) grid (picked on the test set: a diagnosis, not a DP procedure).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GridBest {
    /// Mean accuracy.
    pub best_acc: f64,
    /// Its T.
    pub best_steps: u64,
    /// Its η.
    pub best_lr: f64,
}

/// Algorithms 5 and 4 on ciphertexts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EncryptedReport {
    /// Ring degree n.
    pub ring_dim: usize,
    /// log₂ QP.
    pub log_qp: f64,
    /// Levels of a fresh (or freshly bootstrapped) ciphertext.
    pub levels: usize,
    /// The bootstrapping preset the server used, if it bootstrapped.
    pub bootstrap: Option<super::BootstrapChoice>,
    /// One entry per dataset.
    pub datasets: Vec<EncryptedDataset>,
}

/// Algorithms 5 and 4 on one dataset.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EncryptedDataset {
    /// The dataset.
    pub name: String,
    /// Its Table 4 parameters.
    pub plan: PlanNumbers,
    /// Algorithm 5 (no clipping, barrier).
    pub alg5: Option<EncryptedRun>,
    /// Algorithm 4 (polynomial clipping).
    pub alg4: Option<EncryptedRun>,
    /// Output perturbation's SGD steps (noise added after decryption).
    pub output_sgd: Option<EncryptedRun>,
    /// The period the server bootstrapped the weights with by sparse packing (the block
    /// width), if it did.
    pub sparse_weights_period: Option<usize>,
}

/// One algorithm's encrypted run against the plaintext run with the same noise.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EncryptedRun {
    /// Steps run.
    pub steps: u64,
    /// Mean seconds per step at each thread count, in the configured order.
    pub seconds_per_step: Vec<(usize, f64)>,
    /// Multiplicative depth of a step.
    pub depth: usize,
    /// Levels per stage.
    pub stage_depths: Vec<(String, usize)>,
    /// Refreshes by the data owner.
    pub refreshes: usize,
    /// Bootstraps by the server.
    pub bootstraps: usize,
    /// max |w_encrypted − w_plain|.
    pub max_abs_diff: f64,
    /// Test accuracy of the encrypted run.
    pub acc_encrypted: f64,
    /// Of the plaintext run.
    pub acc_plain: f64,
    /// Test AUC of the encrypted run.
    pub auc_encrypted: f64,
    /// Of the plaintext run.
    pub auc_plain: f64,
}

impl EncryptedReport {
    fn write_summary(&self, s: &mut Summary) {
        s.insert("encrypted_ring_dim".into(), self.ring_dim as f64);
        s.insert("encrypted_log_qp".into(), self.log_qp);
        s.insert("encrypted_levels".into(), self.levels as f64);
        s.insert(
            "encrypted_server_bootstraps".into(),
            f64::from(u8::from(self.bootstrap.is_some())),
        );
        for (i, d) in self.datasets.iter().enumerate() {
            write_flat(s, &format!("encrypted_{}", d.name), &d.plan);
            // Every number under `{dataset}_…`, and the first dataset's also unprefixed.
            let mut note = |k: String, v: f64| {
                if i == 0 {
                    s.insert(k.clone(), v);
                }
                s.insert(format!("{}_{k}", d.name), v);
            };
            if let Some(period) = d.sparse_weights_period {
                note("sparse_weights_period".into(), period as f64);
            }
            for (alg, run) in [
                ("alg5", &d.alg5),
                ("alg4", &d.alg4),
                ("output_sgd", &d.output_sgd),
            ] {
                let Some(r) = run else { continue };
                for &(threads, secs) in &r.seconds_per_step {
                    note(format!("sec_per_iter_{alg}_t{threads}"), secs);
                }
                if let Some(&(_, secs)) = r.seconds_per_step.first() {
                    note(format!("sec_per_iter_{alg}"), secs);
                }
                note(format!("depth_{alg}"), r.depth as f64);
                for (stage, levels) in &r.stage_depths {
                    note(format!("depth_{alg}_{stage}"), *levels as f64);
                }
                note(format!("{alg}_steps"), r.steps as f64);
                note(format!("{alg}_client_refreshes"), r.refreshes as f64);
                note(format!("{alg}_bootstraps"), r.bootstraps as f64);
                match alg {
                    "alg5" => {
                        note("max_abs_diff_vs_plain".into(), r.max_abs_diff);
                        note("acc_encrypted".into(), r.acc_encrypted);
                        note("acc_plain".into(), r.acc_plain);
                        note("auc_encrypted".into(), r.auc_encrypted);
                        note("auc_plain".into(), r.auc_plain);
                        note("client_refreshes".into(), r.refreshes as f64);
                    }
                    "alg4" => {
                        note("alg4_max_abs_diff_vs_exact_clipping".into(), r.max_abs_diff);
                        note("alg4_acc_encrypted".into(), r.acc_encrypted);
                        note("alg4_acc_plain".into(), r.acc_plain);
                    }
                    _ => {
                        note(format!("{alg}_max_abs_diff_vs_plain"), r.max_abs_diff);
                        note(format!("{alg}_acc_encrypted"), r.acc_encrypted);
                        note(format!("{alg}_acc_plain"), r.acc_plain);
                    }
                }
            }
            let first_secs = |r: &Option<EncryptedRun>| {
                r.as_ref()
                    .and_then(|r| r.seconds_per_step.first())
                    .map(|&(_, secs)| secs)
            };
            if let (Some(a4), Some(a5)) = (first_secs(&d.alg4), first_secs(&d.alg5)) {
                note("alg4_over_alg5".into(), a4 / a5);
            }
        }
    }
}
