//! dpfhe's theory and drivers: certified barrier selection and the margins Lemma 5.3 bounds,
//! the wall polynomial, the checker's messages and approximate GD on synthetic data; the
//! encrypted trainer against the plaintext run on Credit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_approx::Interval;
use privopt_approx::functions::{Method as Fit, approximate, sigmoid};
use privopt_data::fhe_tasks::load_task;
use privopt_dpfhe::algorithms::{Barrier, GdSpec, train};
use privopt_dpfhe::logreg::{Link, accuracy};
use privopt_dpfhe::theorem::{
    BarrierParams, BarrierShape, PHI_MAX, RunShape, SelectionTargets, check, select,
    wall_polynomial,
};
use privopt_math::progress::NoProgress;
use privopt_ml::data::Dataset;
use rand::{Rng, SeedableRng};

/// Features uniform in [−1, 1] plus a bias, labels from a noisy linear rule.
fn synthetic(n: usize, d: usize, seed: u64) -> Dataset {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let truth: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut x = Vec::with_capacity(n * (d + 1));
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let z: f64 = row.iter().zip(&truth).map(|(a, b)| a * b).sum::<f64>() * 2.0;
        y.push(if rng.random::<f64>() < 1.0 / (1.0 + (-z).exp()) {
            1.0
        } else {
            0.0
        });
        x.extend(row);
        x.push(1.0);
    }
    Dataset::new(x, y, d + 1, Some(2)).unwrap()
}

fn shape(m: usize, n: usize, steps: u64) -> RunShape {
    // Noise as Algorithm 3 sets it for ε = 1 (zCDP form), sensitivity 2(φ′_max + E_f)√m / N.
    let delta: f64 = 1e-5;
    let delta2 = 2.0 * (PHI_MAX + 0.05) * (m as f64).sqrt();
    let noise_std = 2.0 * delta2 * ((steps as f64) * (3.0 / delta).ln()).sqrt() / (1.0 * n as f64);
    RunShape {
        m,
        steps,
        delta,
        noise_std,
        d: 0.5,
    }
}

#[test]
fn selection_is_certified_and_lemma_5_3_bounds_every_margin() {
    for barrier in [BarrierShape::LeastSquares, BarrierShape::Wall] {
        selection_is_certified_and_bounds_margins(barrier);
    }
}

fn selection_is_certified_and_bounds_margins(barrier: BarrierShape) {
    let data = synthetic(4000, 5, 1);
    let s = shape(data.n_features(), data.len(), 200);
    let targets = SelectionTargets {
        barrier,
        ..SelectionTargets::default()
    };
    let sel = select(&s, &targets)
        .unwrap()
        .expect("a certified parameter set");
    let cert = &sel.certificate;
    assert!(cert.holds(), "{:?}", cert.failures);
    // Re-checking the returned polynomials from scratch agrees.
    let again = check(&s, &cert.params, &sel.sigmoid, &sel.reciprocal).unwrap();
    assert!(again.holds(), "{:?}", again.failures);
    assert!(cert.e_f <= 0.05 && cert.sigmoid_half_width >= (s.m as f64).sqrt() * cert.r);
    // Algorithm 3 with that noise: every margin stays within √m·R (Lemma 5.3), for every step
    // of several noisy runs.
    let bound = (s.m as f64).sqrt() * cert.r;
    for seed in 0..3 {
        let spec = GdSpec {
            link: Link::Poly(sel.sigmoid.clone()),
            steps: s.steps,
            lr: cert.params.eta,
            batch: None,
            clip: None,
            noise_std: s.noise_std,
            barrier: Some(Barrier {
                lambda: cert.params.lambda,
                theta: cert.params.theta,
                reciprocal: sel.reciprocal.clone(),
            }),
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let traj = train(&data, &spec, &mut rng, true);
        assert!(traj.diverged_at.is_none());
        let worst = traj.max_margin.iter().copied().fold(0.0, f64::max);
        assert!(
            worst <= bound,
            "{barrier:?} seed {seed}: margin {worst} > √m·R = {bound}"
        );
    }
}

#[test]
fn the_wall_is_its_formula_and_certifies_a_larger_step() {
    let (theta, kappa) = (3.0, 0.2);
    let wall = wall_polynomial(theta, kappa, 4).unwrap();
    for x in [-5.0, -0.3, kappa * theta, 1.1, theta] {
        let want = ((theta - x) / ((1.0 - kappa) * theta)).powi(4) / (kappa * theta);
        assert!((wall.eval(x) - want).abs() <= 1e-9 * want.max(1.0), "{x}");
    }
    // Equal to 1/x where the wall starts.
    assert!((wall.eval(kappa * theta) - 1.0 / (kappa * theta)).abs() < 1e-9);
    // Its left tail stays low, so condition (1) allows a much larger step than the paper's
    // least-squares P_κ on the same run.
    let s = shape(6, 4000, 200);
    let eta = |barrier| {
        let targets = SelectionTargets {
            barrier,
            ..SelectionTargets::default()
        };
        let sel = select(&s, &targets).unwrap().unwrap();
        sel.certificate.params.eta
    };
    let (ls, wall) = (eta(BarrierShape::LeastSquares), eta(BarrierShape::Wall));
    assert!(wall > 3.0 * ls, "wall η {wall} vs least squares η {ls}");
}

#[test]
fn checker_names_the_condition_that_fails() {
    let s = shape(6, 4000, 200);
    let sel = select(&s, &SelectionTargets::default()).unwrap().unwrap();
    let mut p: BarrierParams = sel.certificate.params;
    p.eta *= 1000.0;
    let c = check(&s, &p, &sel.sigmoid, &sel.reciprocal).unwrap();
    assert!(
        c.failures.iter().any(|f| f.contains("condition (1)")),
        "{:?}",
        c.failures
    );
    // A sigmoid fitted on too narrow an interval no longer covers √m·R.
    let narrow = approximate(sigmoid, Interval::symmetric(0.5).unwrap(), 7, Fit::Minimax).unwrap();
    let c = check(&s, &sel.certificate.params, &narrow, &sel.reciprocal).unwrap();
    assert!(
        c.failures.iter().any(|f| f.contains("does not cover")),
        "{:?}",
        c.failures
    );
}

#[test]
fn plain_approximate_gd_learns_inside_its_interval() {
    // Algorithm 1 with a sigmoid good on the margins it meets reaches the exact model's accuracy.
    let data = synthetic(3000, 4, 2);
    let poly = approximate(sigmoid, Interval::symmetric(8.0).unwrap(), 7, Fit::Minimax).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0);
    let run = |link: Link, rng: &mut rand_chacha::ChaCha20Rng| {
        let spec = GdSpec {
            link,
            steps: 300,
            lr: 0.5,
            batch: None,
            clip: None,
            noise_std: 0.0,
            barrier: None,
        };
        train(&data, &spec, rng, true)
    };
    let approx = run(Link::Poly(poly), &mut rng);
    let exact = run(Link::Exact, &mut rng);
    assert!(approx.max_margin.iter().all(|z| *z < 8.0));
    let (a, e) = (accuracy(&approx.w, &data), accuracy(&exact.w, &data));
    assert!((a - e).abs() < 0.01, "approx {a} vs exact {e}");
}

/// Algorithm 5 on ciphertexts (n = 2^15, 128-bit parameters) for five steps of batch 100 on
/// Credit: the decrypted weights match the plaintext run from the same seed with the same
/// polynomials, and so does the test accuracy.
#[test]
#[cfg_attr(not(data_credit), ignore = "needs credit: privopt data fetch credit")]
fn encrypted_algorithm_5_matches_the_plaintext_run() {
    use privopt_dpfhe::encrypted::{EncryptedBackend, presample, run_encrypted};

    let Some(dir) = privopt_data::testing::real_data_dir(&["credit"]) else {
        return;
    };
    let seeds = privopt_math::SeedTree::new(5);
    let tt = load_task("credit", &dir, &seeds, &Default::default()).unwrap();
    let sig = approximate(
        sigmoid,
        Interval::symmetric(10.0).unwrap(),
        7,
        Fit::LeastSquares,
    )
    .unwrap();
    let theta = 4.0;
    let recip = approximate(
        |x| 1.0 / x,
        Interval::new(0.01 * theta, theta).unwrap(),
        4,
        Fit::LeastSquares,
    )
    .unwrap();
    let spec = GdSpec {
        link: Link::Poly(sig.clone()),
        steps: 5,
        lr: 1.0,
        batch: Some(100),
        clip: None,
        noise_std: 0.05,
        barrier: Some(Barrier {
            lambda: 0.05,
            theta,
            reciprocal: recip,
        }),
    };
    let plain = train(&tt.train, &spec, &mut seeds.stream("run", &[]), false);
    let inputs = presample(&tt.train, &spec, 5, &mut seeds.stream("run", &[]));
    let backend = EncryptedBackend::new(Default::default(), &NoProgress).unwrap();
    let keys = privopt_math::sample::secret_rng(Some(3));
    let enc = run_encrypted(
        &backend, &tt.train, &spec, &sig, None, &inputs, 2, keys, false,
    )
    .unwrap();
    let diff = enc
        .w
        .iter()
        .zip(&plain.w)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let size = plain.w.iter().map(|x| x.abs()).fold(0.0, f64::max);
    assert!(
        size > 0.05,
        "the weights must move for the comparison to mean anything"
    );
    assert!(
        diff < 1e-5,
        "max |w_enc − w_plain| = {diff:e} (|w| up to {size})"
    );
    let (a_enc, a_plain) = (accuracy(&enc.w, &tt.test), accuracy(&plain.w, &tt.test));
    assert!((a_enc - a_plain).abs() <= 0.001, "{a_enc} vs {a_plain}");
    // Five steps at ~8 levels each on a 16-level chain: refreshed between steps.
    let depth = enc.depths.critical();
    assert!((6..=12).contains(&depth), "{:?}", enc.depths);
    assert!(
        enc.refreshes >= 2 && enc.refreshes <= 5,
        "{}",
        enc.refreshes
    );
    eprintln!(
        "alg5: diff {diff:e}, depth {depth}, refreshes {}, {:?}, s/step {:?}",
        enc.refreshes, enc.depths, enc.seconds_per_step
    );
}
