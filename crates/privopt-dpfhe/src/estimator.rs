//! One DP logistic regression fit, plaintext or on ciphertexts: the plan of [`super::plan`],
//! then the chosen algorithm trained from one seed. What `privopt.dpfhe.LogisticRegression`
//! runs; its random streams are those of the `encrypted` suite's first dataset, so a fit from
//! seed `s` equals `privopt run` of that suite on the same data with `seed = s` (plaintext
//! fits equal the suite's `acc_plain` run, encrypted fits its `acc_encrypted` run).

use privopt_math::SeedTree;
use privopt_math::sample::secret_rng;
use privopt_ml::data::Dataset;

use super::DatasetStreams;
use super::algorithms::{output_perturbation, train};
use super::encrypted::{EncryptedAlgorithm, EncryptedBackend, ServerSetup, presample};
use super::plan::{PlanNumbers, PlanTargets, plan};
use crate::error::{DpfheError, Result, ensure, ensure_threads};
use privopt_math::progress::Progress;

/// Which DP algorithm trains the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The no-clip barrier method (Algorithm 3; Algorithm 5 on ciphertexts).
    NoClip,
    /// DP-GD with per-example clipping (exact; Algorithm 4's polynomial clipping on
    /// ciphertexts).
    DpGd,
    /// Output perturbation (plaintext only).
    Output,
}

/// Training on ciphertexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncryptedFit {
    /// How the server keeps its ciphertexts alive.
    pub setup: ServerSetup,
    /// Server threads.
    pub threads: usize,
}

/// What to fit.
#[derive(Clone, Debug, PartialEq)]
pub struct FitSpec {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The privacy targets and step counts the plan calibrates for.
    pub targets: PlanTargets,
    /// Run only the first this many steps of the calibrated run (privacy is unchanged: fewer
    /// noisy steps release less); all of them when `None`.
    pub stop_after: Option<u64>,
    /// `None`: plaintext.
    pub encrypted: Option<EncryptedFit>,
    /// Root of every random stream (batches, noise, the owner's keys), for reproducible
    /// experiments: whoever knows it can recompute the noise. `None`: the operating system's
    /// entropy, as a deployment needs.
    pub seed: Option<u64>,
}

/// What the encrypted run reports.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EncryptedFitReport {
    /// Server seconds per step (steady state).
    pub seconds_per_step: f64,
    /// The owner's refreshes.
    pub refreshes: usize,
    /// The server's bootstraps.
    pub bootstraps: usize,
    /// Levels one step consumes.
    pub depth: usize,
    /// Ring dimension.
    pub ring_dim: usize,
}

/// A fitted model.
#[derive(Clone, Debug, PartialEq)]
pub struct Fitted {
    /// Weights, the bias last when the data carries one.
    pub w: Vec<f64>,
    /// The plan's numbers (noise, certified parameters).
    pub plan: PlanNumbers,
    /// Steps run.
    pub steps_run: u64,
    /// Whether the plaintext run left the finite range (its last finite iterate is `w`).
    pub diverged: bool,
    /// The encrypted run's figures.
    pub encrypted: Option<EncryptedFitReport>,
}

/// The dataset index the streams are labelled with (the suite's first dataset).
const STREAM_INDEX: u64 = 0;

/// Fits `spec` on `data` (features in [−1, 1], labels in {0, 1}).
pub fn fit(data: &Dataset, spec: &FitSpec, progress: &dyn Progress) -> Result<Fitted> {
    check_data(data)?;
    ensure(spec.stop_after != Some(0), || {
        "stop_after must be >= 1".into()
    })?;
    // Refused before any work: output perturbation has no encrypted run.
    let alg = match (spec.algorithm, spec.encrypted) {
        (Algorithm::Output, Some(_)) => {
            return Err(DpfheError::Config(
                "output perturbation runs in plaintext only: its sensitivity is that of \
                 permutation passes, which the encrypted circuit does not run"
                    .into(),
            ));
        }
        (Algorithm::DpGd, _) => EncryptedAlgorithm::Alg4,
        _ => EncryptedAlgorithm::Alg5,
    };
    if let Some(enc) = spec.encrypted {
        ensure_threads("threads", enc.threads)?;
    }
    let streams = spec
        .seed
        .map(|s| DatasetStreams::new(SeedTree::new(s), STREAM_INDEX));
    let (mut d_rng, mut rng, keys) = match &streams {
        Some(s) => (s.release_d(), s.training(), s.keys()),
        None => (secret_rng(None), secret_rng(None), secret_rng(None)),
    };
    let plan = plan(data, &spec.targets, &mut d_rng)?;
    let Some(enc) = spec.encrypted else {
        let mut gd = match spec.algorithm {
            Algorithm::NoClip => plan.noclip.clone(),
            Algorithm::DpGd => plan.dpgd.clone(),
            Algorithm::Output => {
                let w = output_perturbation(
                    data,
                    plan.passes,
                    plan.lr_out,
                    plan.batch,
                    plan.std_out,
                    &mut rng,
                );
                return Ok(Fitted {
                    w,
                    plan: plan.numbers,
                    steps_run: plan.passes,
                    diverged: false,
                    encrypted: None,
                });
            }
        };
        gd.steps = spec.stop_after.map_or(gd.steps, |k| k.min(gd.steps));
        let run = train(data, &gd, &mut rng, false);
        return Ok(Fitted {
            w: run.w,
            plan: plan.numbers,
            steps_run: run.diverged_at.unwrap_or(gd.steps),
            diverged: run.diverged_at.is_some(),
            encrypted: None,
        });
    };
    let calibrated = match alg {
        EncryptedAlgorithm::Alg5 => plan.numbers.steps_noclip,
        _ => plan.numbers.steps,
    };
    let steps = spec.stop_after.map_or(calibrated, |k| k.min(calibrated));
    let backend = EncryptedBackend::new(enc.setup, progress)?;
    let mut trainer = backend.trainer("encrypted", data, &plan, keys)?;
    let gd = trainer.spec(alg, steps);
    let inputs = presample(data, &gd, steps, &mut rng);
    let run = trainer.run(data, alg, &gd, &inputs, enc.threads, progress)?;
    Ok(Fitted {
        plan: plan.numbers,
        steps_run: steps,
        diverged: false,
        encrypted: Some(EncryptedFitReport {
            seconds_per_step: run.steady_seconds_per_step(),
            refreshes: run.refreshes,
            bootstraps: run.bootstraps,
            depth: run.depths.critical(),
            ring_dim: backend.params().n(),
        }),
        w: run.w,
    })
}

/// Refuses data the plan's guarantees do not cover: features outside [−1, 1] (Theorem 3's
/// sensitivity and the clipping circuit's bound assume them) and labels other than 0 and 1.
fn check_data(data: &Dataset) -> Result<()> {
    ensure(data.len() >= 2, || {
        format!("need at least 2 training examples, got {}", data.len())
    })?;
    for i in 0..data.len() {
        if let Some(j) = data.row(i).iter().position(|x| x.is_nan() || x.abs() > 1.0) {
            return Err(DpfheError::Config(format!(
                "feature {j} of example {i} is {}: features must lie in [-1, 1] (scale them \
                 first, e.g. with a data-independent bound or sklearn's MaxAbsScaler)",
                data.row(i)[j]
            )));
        }
    }
    let labels = data.labels();
    if let Some(i) = labels.iter().position(|&y| y != 0.0 && y != 1.0) {
        return Err(DpfheError::Config(format!(
            "label {i} is {}: labels must be 0 or 1",
            labels[i]
        )));
    }
    Ok(())
}
