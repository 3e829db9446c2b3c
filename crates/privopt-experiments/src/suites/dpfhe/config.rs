//! The `[suite]` table of `name = "dpfhe"`, typed: the datasets and run controls every
//! experiment shares, and the experiment with only the settings it reads. The file keeps one
//! flat table (`experiment = "table4"` beside its keys); a key that belongs to another
//! experiment is refused by name instead of being silently ignored.

use std::collections::BTreeMap;

use privopt_data::fhe_tasks::{PAPER_DATASETS, Preprocessing, check_known};
use privopt_data::load::CategoricalEncoding;
pub use privopt_dpfhe::encrypted::BootstrapChoice;
use privopt_dpfhe::plan::PlanTargets;
use privopt_dpfhe::theorem::{BarrierShape, SelectionTargets};
use privopt_ml::data::scale::FeatureScaling;
use privopt_sim::error::{Result, SimError, ensure, ensure_threads};
use serde::{Deserialize, Serialize};

/// The suite: what every experiment shares, and the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SuiteTable", into = "SuiteTable")]
pub struct DpfheSuiteConfig {
    /// Datasets (default: the paper's four; Fig. 4/5 uses the first).
    pub datasets: Vec<String>,
    /// Feature scaling and categorical encoding, for every method alike.
    pub preprocessing: Preprocessing,
    /// Cap on training examples per dataset (smoke runs); all by default.
    pub max_train: Option<usize>,
    /// Cap on steps of every training run (smoke runs).
    pub max_steps: Option<u64>,
    /// Worker threads (runs are independent; results do not depend on this).
    pub threads: usize,
    /// Which reproduction, with its own settings.
    pub experiment: Experiment,
}

/// Which reproduction to run.
#[derive(Clone, Debug, PartialEq)]
pub enum Experiment {
    /// Table 3: approximate GD with hyperparameters fixed by the polynomial.
    Table3(Table3Spec),
    /// Table 4: DP-GD with clipping, the no-clip barrier method, output perturbation.
    Table4(Table4Spec),
    /// Fig. 4/5: plain approximate GD leaving its interval, the barrier keeping it inside.
    Divergence(DivergenceSpec),
    /// Algorithms 4 and 5 on ciphertexts (Tables 1 and 5).
    Encrypted(EncryptedSpec),
    /// Where the no-clip method's accuracy goes: DP-GD and an idealised no-clip run over a
    /// grid of steps and learning rates, next to the certified Algorithm 3.
    Gap(GapSpec),
}

impl Experiment {
    /// The `experiment` key's value.
    pub fn name(&self) -> ExperimentName {
        match self {
            Experiment::Table3(_) => ExperimentName::Table3,
            Experiment::Table4(_) => ExperimentName::Table4,
            Experiment::Divergence(_) => ExperimentName::Divergence,
            Experiment::Encrypted(_) => ExperimentName::Encrypted,
            Experiment::Gap(_) => ExperimentName::Gap,
        }
    }

    /// The privacy targets, for the experiments that train with DP.
    pub fn privacy(&self) -> Option<&PrivacySettings> {
        match self {
            Experiment::Table4(s) => Some(&s.privacy),
            Experiment::Encrypted(s) => Some(&s.privacy),
            Experiment::Gap(s) => Some(&s.privacy),
            Experiment::Table3(_) | Experiment::Divergence(_) => None,
        }
    }
}

/// The `experiment` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExperimentName {
    /// Table 3.
    Table3,
    /// Table 4.
    Table4,
    /// Fig. 4/5.
    Divergence,
    /// Tables 1 and 5.
    Encrypted,
    /// The accuracy-gap diagnosis.
    Gap,
}

impl ExperimentName {
    fn key(self) -> &'static str {
        match self {
            ExperimentName::Table3 => "table3",
            ExperimentName::Table4 => "table4",
            ExperimentName::Divergence => "divergence",
            ExperimentName::Encrypted => "encrypted",
            ExperimentName::Gap => "gap",
        }
    }
}

/// Table 3's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Table3Spec {
    /// Sigmoid degree.
    pub degree: usize,
    /// Half-widths h of the intervals [−h, h] per dataset (absent: the paper's).
    pub intervals: BTreeMap<String, Vec<f64>>,
    /// Gradient-norm target ρ per dataset (absent: 0.1 for MNIST, 0.05 otherwise).
    pub rho: BTreeMap<String, f64>,
}

/// Table 4's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Table4Spec {
    /// Repeated runs (mean ± std).
    pub runs: usize,
    /// The privacy targets and each dataset's training settings.
    pub privacy: PrivacySettings,
}

/// Fig. 4/5's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct DivergenceSpec {
    /// Sigmoid degree.
    pub degree: usize,
    /// Half-width of the sigmoid interval (the paper: 7 on Adult).
    pub interval: f64,
    /// Steps.
    pub steps: u64,
    /// Learning rate (absent: 1/β with the data-dependent smoothness).
    pub lr: Option<f64>,
    /// The δ Theorem 3's certificate of the barrier run is checked at.
    pub delta: f64,
}

/// The encrypted runs' settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EncryptedSpec {
    /// The Table 4 plan the runs take their noise and parameters from.
    pub privacy: PrivacySettings,
    /// Steps of Algorithm 5 run on ciphertexts (the DP noise is calibrated for the full
    /// Table 4 run; this many of its steps are executed).
    pub steps: u64,
    /// Steps of Algorithm 4 (slower).
    pub steps_alg4: u64,
    /// Server thread counts to time.
    pub threads: Vec<usize>,
    /// Steps at the thread counts after the first (timing only; absent: as at the first).
    pub timing_steps: Option<u64>,
    /// Steps of Output-SGD's step on ciphertexts (not run if absent).
    pub steps_output: Option<u64>,
    /// The server bootstraps with this 128-bit preset instead of asking the data owner to
    /// refresh; absent, the n = 2^15 refresh setting.
    pub bootstrap: Option<BootstrapChoice>,
    /// Bootstrapping: the weights (whose slots repeat with the block width) by sparse packing
    /// of that period; `false` bootstraps them with full slots like the other ciphertexts.
    pub sparse_weights: bool,
}

/// The accuracy-gap diagnosis's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct GapSpec {
    /// Repeated runs per grid point.
    pub runs: usize,
    /// The privacy targets (and Algorithm 3's Table 4 settings, the certified comparison).
    pub privacy: PrivacySettings,
    /// Steps T of the grid.
    pub steps: Vec<u64>,
    /// Learning rates of the grid.
    pub lrs: Vec<f64>,
}

/// The privacy targets of the experiments that train with DP, and each dataset's Table 4
/// training settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PrivacySettings {
    /// Target ε.
    pub epsilon: f64,
    /// Target δ.
    pub delta: f64,
    /// DP-SGD clipping bound C.
    pub clip: f64,
    /// Per-dataset settings (absent: [`Table4Settings::default`]).
    pub table4: BTreeMap<String, Table4Settings>,
    /// Release d ≥ ‖∇f(0)‖/√m with DP (Remark 5.3) instead of the data-independent d = 1/2.
    pub release_d: bool,
    /// How the no-clip method's P_κ is built and searched.
    pub barrier: BarrierShape,
    /// Tolerance E_f on the sigmoid error of the no-clip method (the paper: 0.05).
    pub e_f_target: f64,
}

/// Table 4 settings of one dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table4Settings {
    /// Steps T of DP-GD and output perturbation, and of the no-clip method unless
    /// `steps_noclip` is set.
    pub steps: u64,
    /// Steps T of the no-clip method, when it differs from `steps`.
    #[serde(default)]
    pub steps_noclip: Option<u64>,
    /// Batch size sampled without replacement each step (accounted with the
    /// Wang–Balle–Kasiviswanathan bound); full-batch GD when absent (exact Gaussian accounting).
    #[serde(default)]
    pub batch: Option<usize>,
    /// DP-SGD learning rate.
    pub lr_dpgd: f64,
    /// Sigmoid degrees the no-clip selection may use (the paper: 7 or 9).
    #[serde(default = "default_degrees")]
    pub sigmoid_degrees: Vec<usize>,
}

impl Default for Table4Settings {
    /// The defaults of Table 4 (see docs/dpfhe.md for how they were chosen).
    fn default() -> Self {
        Table4Settings {
            steps: 1000,
            steps_noclip: None,
            batch: None,
            lr_dpgd: 2.0,
            sigmoid_degrees: default_degrees(),
        }
    }
}

fn default_degrees() -> Vec<usize> {
    vec![7, 9]
}

const DEFAULT_DEGREE: usize = 7;
const DEFAULT_RUNS: usize = 100;
const DEFAULT_THREADS: usize = 2;

impl PrivacySettings {
    /// The plan targets of `dataset`'s Table 4 runs, steps capped by `cap`.
    pub fn plan_targets(&self, dataset: &str, cap: impl Fn(u64) -> u64) -> PlanTargets {
        let s = self.table4.get(dataset).cloned().unwrap_or_default();
        PlanTargets {
            epsilon: self.epsilon,
            delta: self.delta,
            clip: self.clip,
            steps: cap(s.steps),
            steps_noclip: cap(s.steps_noclip.unwrap_or(s.steps)),
            batch: s.batch,
            lr_dpgd: s.lr_dpgd,
            sigmoid_degrees: s.sigmoid_degrees,
            e_f_target: self.e_f_target,
            barrier: self.barrier,
            release_d: self.release_d,
        }
    }

    fn validate(&self) -> Result<()> {
        // The targets, and each dataset's settings, as the plan checks them.
        self.plan_targets("", |s| s).validate("suite.")?;
        for d in self.table4.keys() {
            self.plan_targets(d, |s| s)
                .validate(&format!("suite.table4.{d}: "))?;
        }
        Ok(())
    }
}

impl DpfheSuiteConfig {
    /// `steps` capped by `max_steps`.
    pub fn steps(&self, steps: u64) -> u64 {
        self.max_steps.map_or(steps, |cap| steps.min(cap))
    }

    /// Applies command-line overrides: `--runs` to the experiments that repeat runs,
    /// `--iterations` as the step cap (and the encrypted runs' exact steps), `--threads` to
    /// the workers (and the one encrypted thread count timed).
    pub fn apply_overrides(&mut self, o: &super::super::SuiteOverrides) {
        if let Some(d) = &o.datasets {
            self.datasets = d.clone();
        }
        if let Some(t) = o.iterations {
            self.max_steps = Some(t);
        }
        if let Some(t) = o.threads {
            self.threads = t;
        }
        match &mut self.experiment {
            Experiment::Table4(s) => s.runs = o.runs.unwrap_or(s.runs),
            Experiment::Gap(s) => s.runs = o.runs.unwrap_or(s.runs),
            Experiment::Encrypted(s) => {
                if let Some(t) = o.iterations {
                    s.steps = t;
                    s.steps_alg4 = t;
                    s.steps_output = s.steps_output.map(|_| t);
                }
                if let Some(t) = o.threads {
                    s.threads = vec![t];
                }
            }
            Experiment::Table3(_) | Experiment::Divergence(_) => {}
        }
    }

    /// Checks every setting; errors name the key (`suite.…`).
    pub fn validate(&self) -> Result<()> {
        ensure(!self.datasets.is_empty(), || {
            "suite.datasets must not be empty".into()
        })?;
        for d in &self.datasets {
            check_known(d)?;
        }
        ensure_threads("suite.threads", self.threads)?;
        if let Some(scaling) = &self.preprocessing.scaling {
            scaling
                .validate()
                .map_err(|e| SimError::Config(format!("suite.scaling: {e}")))?;
        }
        if let Some(privacy) = self.experiment.privacy() {
            privacy.validate()?;
        }
        let degree = |d: usize| {
            ensure((1..=31).contains(&d), || {
                format!("suite.degree must be in 1..=31, got {d}")
            })
        };
        let runs = |r: usize| ensure(r >= 1, || "suite.runs must be >= 1".into());
        match &self.experiment {
            Experiment::Table3(s) => {
                degree(s.degree)?;
                for (d, hs) in &s.intervals {
                    ensure(hs.iter().all(|h| *h > 0.0 && h.is_finite()), || {
                        format!("suite.intervals.{d}: half-widths must be > 0")
                    })?;
                }
                for (d, r) in &s.rho {
                    ensure(*r > 0.0 && r.is_finite(), || {
                        format!("suite.rho.{d} must be > 0")
                    })?;
                }
            }
            Experiment::Table4(s) => runs(s.runs)?,
            Experiment::Divergence(s) => {
                degree(s.degree)?;
                ensure(s.interval > 0.0 && s.interval.is_finite(), || {
                    "suite.divergence_interval must be > 0".into()
                })?;
                ensure(s.steps >= 1, || {
                    "suite.divergence_steps must be >= 1".into()
                })?;
                ensure(s.lr.is_none_or(|lr| lr > 0.0 && lr.is_finite()), || {
                    "suite.divergence_lr must be > 0".into()
                })?;
                ensure(s.delta > 0.0 && s.delta < 1.0, || {
                    format!("suite.delta must be in (0, 1), got {}", s.delta)
                })?;
            }
            Experiment::Encrypted(s) => {
                ensure(s.steps >= 1 && s.steps_alg4 >= 1, || {
                    "suite.encrypted_steps must be >= 1".into()
                })?;
                ensure(
                    s.timing_steps != Some(0) && s.steps_output != Some(0),
                    || {
                        "suite.encrypted_timing_steps and suite.encrypted_steps_output must be >= 1"
                            .into()
                    },
                )?;
                ensure(!s.threads.is_empty(), || {
                    "suite.encrypted_threads must list thread counts".into()
                })?;
                for &t in &s.threads {
                    ensure_threads("suite.encrypted_threads", t)?;
                }
            }
            Experiment::Gap(s) => {
                runs(s.runs)?;
                ensure(
                    !s.steps.is_empty() && s.steps.iter().all(|&t| t >= 1),
                    || "suite.gap_steps must list step counts >= 1".into(),
                )?;
                ensure(
                    !s.lrs.is_empty() && s.lrs.iter().all(|&lr| lr > 0.0 && lr.is_finite()),
                    || "suite.gap_lrs must list learning rates > 0".into(),
                )?;
            }
        }
        Ok(())
    }
}

/// The table as written: one flat table, every experiment's keys optional. Converted to
/// [`DpfheSuiteConfig`] (defaults filled in, keys of another experiment refused) and back.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteTable {
    experiment: Option<ExperimentName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    datasets: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scaling: Option<FeatureScaling>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<CategoricalEncoding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_train: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    threads: Option<usize>,
    // Table 3 and Fig. 4/5.
    #[serde(skip_serializing_if = "Option::is_none")]
    degree: Option<usize>,
    // Table 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    intervals: Option<BTreeMap<String, Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rho: Option<BTreeMap<String, f64>>,
    // Table 4 and the gap diagnosis.
    #[serde(skip_serializing_if = "Option::is_none")]
    runs: Option<usize>,
    // The privacy settings (Table 4, encrypted, gap; δ also Fig. 4/5).
    #[serde(skip_serializing_if = "Option::is_none")]
    epsilon: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clip: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table4: Option<BTreeMap<String, Table4Settings>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    release_d: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    barrier: Option<BarrierShape>,
    #[serde(skip_serializing_if = "Option::is_none")]
    e_f_target: Option<f64>,
    // Fig. 4/5.
    #[serde(skip_serializing_if = "Option::is_none")]
    divergence_interval: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    divergence_steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    divergence_lr: Option<f64>,
    // The gap diagnosis.
    #[serde(skip_serializing_if = "Option::is_none")]
    gap_steps: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gap_lrs: Option<Vec<f64>>,
    // The encrypted runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_steps_alg4: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_threads: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_timing_steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_steps_output: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_bootstrap: Option<BootstrapChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted_sparse_weights: Option<bool>,
}

impl SuiteTable {
    /// The keys present that `experiment` does not read.
    fn foreign_keys(&self, experiment: ExperimentName) -> Vec<&'static str> {
        use ExperimentName::*;
        let privacy = [Table4, Encrypted, Gap].as_slice();
        let keys: &[(&str, bool, &[ExperimentName])] = &[
            ("degree", self.degree.is_some(), &[Table3, Divergence]),
            ("intervals", self.intervals.is_some(), &[Table3]),
            ("rho", self.rho.is_some(), &[Table3]),
            ("runs", self.runs.is_some(), &[Table4, Gap]),
            ("epsilon", self.epsilon.is_some(), privacy),
            (
                "delta",
                self.delta.is_some(),
                &[Table4, Encrypted, Gap, Divergence],
            ),
            ("clip", self.clip.is_some(), privacy),
            ("table4", self.table4.is_some(), privacy),
            ("release_d", self.release_d.is_some(), privacy),
            ("barrier", self.barrier.is_some(), privacy),
            ("e_f_target", self.e_f_target.is_some(), privacy),
            (
                "divergence_interval",
                self.divergence_interval.is_some(),
                &[Divergence],
            ),
            (
                "divergence_steps",
                self.divergence_steps.is_some(),
                &[Divergence],
            ),
            ("divergence_lr", self.divergence_lr.is_some(), &[Divergence]),
            ("gap_steps", self.gap_steps.is_some(), &[Gap]),
            ("gap_lrs", self.gap_lrs.is_some(), &[Gap]),
            (
                "encrypted_steps",
                self.encrypted_steps.is_some(),
                &[Encrypted],
            ),
            (
                "encrypted_steps_alg4",
                self.encrypted_steps_alg4.is_some(),
                &[Encrypted],
            ),
            (
                "encrypted_threads",
                self.encrypted_threads.is_some(),
                &[Encrypted],
            ),
            (
                "encrypted_timing_steps",
                self.encrypted_timing_steps.is_some(),
                &[Encrypted],
            ),
            (
                "encrypted_steps_output",
                self.encrypted_steps_output.is_some(),
                &[Encrypted],
            ),
            (
                "encrypted_bootstrap",
                self.encrypted_bootstrap.is_some(),
                &[Encrypted],
            ),
            (
                "encrypted_sparse_weights",
                self.encrypted_sparse_weights.is_some(),
                &[Encrypted],
            ),
        ];
        keys.iter()
            .filter(|(_, present, used_by)| *present && !used_by.contains(&experiment))
            .map(|(key, ..)| *key)
            .collect()
    }

    fn privacy(&self) -> PrivacySettings {
        PrivacySettings {
            epsilon: self.epsilon.unwrap_or(1.0),
            delta: self.delta.unwrap_or(1e-5),
            clip: self.clip.unwrap_or(1.0),
            table4: self.table4.clone().unwrap_or_default(),
            release_d: self.release_d.unwrap_or(false),
            barrier: self.barrier.unwrap_or_default(),
            e_f_target: self
                .e_f_target
                .unwrap_or(SelectionTargets::default().e_f_target),
        }
    }

    fn put_privacy(&mut self, p: PrivacySettings) {
        self.epsilon = Some(p.epsilon);
        self.delta = Some(p.delta);
        self.clip = Some(p.clip);
        self.table4 = Some(p.table4);
        self.release_d = Some(p.release_d);
        self.barrier = Some(p.barrier);
        self.e_f_target = Some(p.e_f_target);
    }
}

impl TryFrom<SuiteTable> for DpfheSuiteConfig {
    type Error = String;

    fn try_from(t: SuiteTable) -> std::result::Result<Self, String> {
        let name = t
            .experiment
            .ok_or("suite.experiment is missing (table3, table4, divergence, encrypted or gap)")?;
        let foreign = t.foreign_keys(name);
        if !foreign.is_empty() {
            return Err(format!(
                "suite.{} {} not apply to experiment = \"{}\"",
                foreign.join(", suite."),
                if foreign.len() == 1 { "does" } else { "do" },
                name.key()
            ));
        }
        let experiment = match name {
            ExperimentName::Table3 => Experiment::Table3(Table3Spec {
                degree: t.degree.unwrap_or(DEFAULT_DEGREE),
                intervals: t.intervals.clone().unwrap_or_default(),
                rho: t.rho.clone().unwrap_or_default(),
            }),
            ExperimentName::Table4 => Experiment::Table4(Table4Spec {
                runs: t.runs.unwrap_or(DEFAULT_RUNS),
                privacy: t.privacy(),
            }),
            ExperimentName::Divergence => Experiment::Divergence(DivergenceSpec {
                degree: t.degree.unwrap_or(DEFAULT_DEGREE),
                interval: t.divergence_interval.unwrap_or(7.0),
                steps: t.divergence_steps.unwrap_or(2000),
                lr: t.divergence_lr,
                delta: t.privacy().delta,
            }),
            ExperimentName::Encrypted => {
                let steps = t.encrypted_steps.unwrap_or(5);
                Experiment::Encrypted(EncryptedSpec {
                    privacy: t.privacy(),
                    steps,
                    steps_alg4: t.encrypted_steps_alg4.unwrap_or(steps),
                    threads: t.encrypted_threads.clone().unwrap_or_else(|| vec![1, 2]),
                    timing_steps: t.encrypted_timing_steps,
                    steps_output: t.encrypted_steps_output,
                    bootstrap: t.encrypted_bootstrap,
                    sparse_weights: t.encrypted_sparse_weights.unwrap_or(true),
                })
            }
            ExperimentName::Gap => Experiment::Gap(GapSpec {
                runs: t.runs.unwrap_or(DEFAULT_RUNS),
                privacy: t.privacy(),
                steps: t.gap_steps.clone().unwrap_or_else(|| vec![100, 300, 1000]),
                lrs: t
                    .gap_lrs
                    .clone()
                    .unwrap_or_else(|| vec![0.01, 0.03, 0.1, 0.3, 1.0, 2.0]),
            }),
        };
        Ok(DpfheSuiteConfig {
            datasets: t
                .datasets
                .unwrap_or_else(|| PAPER_DATASETS.iter().map(|s| s.to_string()).collect()),
            preprocessing: Preprocessing {
                scaling: t.scaling,
                encoding: t.encoding.unwrap_or_default(),
            },
            max_train: t.max_train,
            max_steps: t.max_steps,
            threads: t.threads.unwrap_or(DEFAULT_THREADS),
            experiment,
        })
    }
}

impl From<DpfheSuiteConfig> for SuiteTable {
    fn from(c: DpfheSuiteConfig) -> Self {
        let mut t = SuiteTable {
            experiment: Some(c.experiment.name()),
            datasets: Some(c.datasets),
            scaling: c.preprocessing.scaling,
            encoding: Some(c.preprocessing.encoding),
            max_train: c.max_train,
            max_steps: c.max_steps,
            threads: Some(c.threads),
            ..SuiteTable::default()
        };
        match c.experiment {
            Experiment::Table3(s) => {
                t.degree = Some(s.degree);
                t.intervals = Some(s.intervals);
                t.rho = Some(s.rho);
            }
            Experiment::Table4(s) => {
                t.runs = Some(s.runs);
                t.put_privacy(s.privacy);
            }
            Experiment::Divergence(s) => {
                t.degree = Some(s.degree);
                t.divergence_interval = Some(s.interval);
                t.divergence_steps = Some(s.steps);
                t.divergence_lr = s.lr;
                t.delta = Some(s.delta);
            }
            Experiment::Encrypted(s) => {
                t.put_privacy(s.privacy);
                t.encrypted_steps = Some(s.steps);
                t.encrypted_steps_alg4 = Some(s.steps_alg4);
                t.encrypted_threads = Some(s.threads);
                t.encrypted_timing_steps = s.timing_steps;
                t.encrypted_steps_output = s.steps_output;
                t.encrypted_bootstrap = s.bootstrap;
                t.encrypted_sparse_weights = Some(s.sparse_weights);
            }
            Experiment::Gap(s) => {
                t.runs = Some(s.runs);
                t.put_privacy(s.privacy);
                t.gap_steps = Some(s.steps);
                t.gap_lrs = Some(s.lrs);
            }
        }
        t
    }
}
