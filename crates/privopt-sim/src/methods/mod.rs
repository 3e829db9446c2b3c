//! The methods and baselines. Each is a module with a config struct implementing [`Method`];
//! [`MethodConfig`] selects one by the `name` key of the `[method]` table.

pub mod dome;
pub mod eezofl;
pub mod pdsgd;
pub mod scalar_fl;
pub mod sgd;
pub mod zo_sgd;

use serde::{Deserialize, Serialize};

use crate::context::RunContext;
use crate::error::{Result, ensure};

/// A training method: validated from its config, then run against a [`RunContext`].
pub trait Method {
    /// Checks the method's parameters; errors name the key (`method.lr …`).
    fn validate(&self) -> Result<()>;
    /// Trains, recording metrics rows and traffic through `ctx`, and returns the final
    /// parameters and the method's typed report.
    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained>;
    /// Whether the method trains on the experiment's `[data]` and `[model]` (false for a
    /// method that generates its own problem).
    fn uses_data(&self) -> bool {
        true
    }
}

/// The `[method]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum MethodConfig {
    /// Centralized minibatch SGD on all training data (the trivial first-order baseline).
    Sgd(sgd::SgdConfig),
    /// Federated zeroth-order SGD with shared perturbations and plain (unprotected) scalars.
    ZoSgd(zo_sgd::ZoSgdConfig),
    /// EEZOFL: one encrypted scalar per device per round over a fading channel (the EEZOFL paper).
    Eezofl(eezofl::EezoflConfig),
    /// Paillier-encrypted decentralized SGD with random stepsizes (the Paillier D-SGD paper): Fig. 3's three
    /// variants over many trials.
    Pdsgd(pdsgd::PdsgdConfig),
    /// Scalar-only federated learning (the HiSo paper): DeComFL, HiSo, and the FedAvg, FedAdam and
    /// FedZO baselines.
    ScalarFl(scalar_fl::ScalarFlConfig),
    /// DOME (the DOME paper): DP federated Adam on a learned sketch with SecAgg+; one run.
    Dome(dome::DomeConfig),
}

impl MethodConfig {
    fn method(&self) -> &dyn Method {
        match self {
            MethodConfig::Sgd(c) => c,
            MethodConfig::ZoSgd(c) => c,
            MethodConfig::Eezofl(c) => c,
            MethodConfig::Pdsgd(c) => c,
            MethodConfig::ScalarFl(c) => c,
            MethodConfig::Dome(c) => c,
        }
    }

    /// The method's config name.
    pub fn name(&self) -> &'static str {
        match self {
            MethodConfig::Sgd(_) => "sgd",
            MethodConfig::ZoSgd(_) => "zo_sgd",
            MethodConfig::Eezofl(_) => "eezofl",
            MethodConfig::Pdsgd(_) => "pdsgd",
            MethodConfig::ScalarFl(_) => "scalar_fl",
            MethodConfig::Dome(_) => "dome",
        }
    }

    /// The privacy mechanism and its parameters, in a few words (for one-line summaries).
    pub fn privacy(&self) -> String {
        use eezofl::Aggregation;
        match self {
            MethodConfig::Sgd(_) => "none (centralized baseline)".into(),
            MethodConfig::ZoSgd(_) => "none (plain scalars)".into(),
            MethodConfig::Eezofl(c) => match c.aggregation {
                Aggregation::Plain => "none (plain over the air)".into(),
                Aggregation::Digital => format!("xMK-CKKS n={}, digital sum", c.he_n),
                Aggregation::HeOta | Aggregation::HeOtaModular => {
                    format!("xMK-CKKS n={}, over the air", c.he_n)
                }
                Aggregation::CsiZf | Aggregation::CsiMmse => {
                    format!("xMK-CKKS n={}, CSI precoding", c.he_n)
                }
            },
            MethodConfig::Pdsgd(c) if c.paillier_timing_iterations > 0 => {
                format!("Paillier-{} per agent", c.paillier_bits)
            }
            MethodConfig::Pdsgd(_) => "Paillier (transparent backend)".into(),
            MethodConfig::ScalarFl(_) => "seeds and scalars only (no crypto)".into(),
            MethodConfig::Dome(c) if c.variant == dome::Variant::Nonprivate => {
                "SecAgg+ (no DP)".into()
            }
            MethodConfig::Dome(c) => format!("SecAgg+, (ε={}, δ={:e})-DP", c.epsilon, c.delta),
        }
    }

    /// See [`Method::validate`].
    pub fn validate(&self) -> Result<()> {
        self.method().validate()
    }

    /// See [`Method::uses_data`].
    pub fn uses_data(&self) -> bool {
        self.method().uses_data()
    }

    /// See [`Method::run`].
    pub fn run(&self, ctx: &mut RunContext<'_>) -> Result<Trained> {
        self.method().run(ctx)
    }
}

/// What a finished run of a method returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Trained {
    /// Final model parameters (empty for pdsgd, whose trials each end with their own states).
    pub params: Vec<f64>,
    /// The method's own results beyond its metrics rows.
    pub report: Report,
}

impl Trained {
    /// Parameters with no report beyond the metrics rows.
    pub fn plain(params: Vec<f64>) -> Self {
        Self {
            params,
            report: Report::Plain,
        }
    }
}

/// A method's own results, typed. The experiment runner writes them into `summary.json`
/// flattened: a nested field `a: { b }` becomes the key `a_b`; absent options are omitted.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Report {
    /// Nothing beyond the metrics rows (SGD, ZO-SGD).
    Plain,
    /// See [`eezofl::EezoflReport`].
    Eezofl(eezofl::EezoflReport),
    /// See [`pdsgd::PdsgdReport`].
    Pdsgd(pdsgd::PdsgdReport),
    /// See [`scalar_fl::ScalarFlReport`].
    ScalarFl(scalar_fl::ScalarFlReport),
    /// See [`dome::DomeReport`].
    Dome(Box<dome::DomeReport>),
}

/// How the learning rate changes with the step `t` (counted from 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedule {
    /// `η_t = η`.
    #[default]
    Constant,
    /// `η_t = η / √(1 + t)`.
    InvSqrt,
}

impl LrSchedule {
    /// The learning rate at step `t` for base rate `lr`.
    pub fn at(self, lr: f64, t: u64) -> f64 {
        match self {
            LrSchedule::Constant => lr,
            LrSchedule::InvSqrt => lr / ((1 + t) as f64).sqrt(),
        }
    }
}

/// The largest learning rate a config accepts: far beyond any stable step of the models
/// privopt trains (inputs scaled to unit range), and small enough that a run given a typo such
/// as `lr = 1e300` is refused up front instead of ending with a finite but absurd loss.
pub const MAX_LR: f64 = 1e4;

/// Checks a learning rate.
pub fn check_lr(lr: f64) -> Result<()> {
    ensure(lr > 0.0 && lr <= MAX_LR, || {
        format!("method.lr must be in (0, {MAX_LR:e}], got {lr:e}")
    })
}

/// `w ← w − η·g`.
pub fn descend(w: &mut [f64], g: &[f64], lr: f64) {
    for (wi, gi) in w.iter_mut().zip(g) {
        *wi -= lr * gi;
    }
}
