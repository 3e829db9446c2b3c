//! Remark 2 against a quantitative adversary: how well does an attacker who sees the product
//! `Λ_i^k g_i^k` (the paper's worst case: Paillier broken, every message revealed) recover the
//! gradient `g_i^k`?
//!
//! The paper argues non-identifiability: `(e^{−ζ}Λ, e^{ζ}g)` gives the same product. But each
//! entry of `Λ_i^k` lies in the public range `[b_k, b_k(1 + k^{−q})]` (`b_k = λ₀k^{−p}`), whose
//! relative width `ε_k = k^{−q}` shrinks, so dividing the product by the range's midpoint
//! recovers every gradient entry to within `(ε_k/2)/(1 + ε_k/2)` relative error — exactly, not
//! only in expectation. With the paper's q = 1.2 that is 33% at k = 1, 3.1% at k = 10 and 0.2%
//! at k = 100: the exact value stays hidden (the paper's Definition 2), an accurate estimate
//! does not.

use privopt_math::SeedTree;
use privopt_paillier::{KeyPair, PublicKey};
use privopt_protocols::pdsgd::{Graph, Paillier, Scheme, Transparent, TransparentKey};
use serde::Serialize;

use super::{PdsgdConfig, Transport, Variant};
use crate::error::{Result, SimError};

/// The midpoint estimator's relative error on one gradient entry at iteration `k`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GradientRecovery {
    /// Iteration.
    pub k: u64,
    /// `E|ĝ/g − 1|` over the stepsize draw `ζ ~ U[0, 1]`: `(ε/4)/(1 + ε/2)`.
    pub mean_relative_error: f64,
    /// Its largest value, `(ε/2)/(1 + ε/2)`.
    pub worst_relative_error: f64,
}

/// The estimator `ĝ = (Λg) / (b_k(1 + ε_k/2))` applied entrywise to an observed step.
pub fn estimate_gradient(cfg: &PdsgdConfig, k: f64, step: &[f64]) -> Vec<f64> {
    let midpoint = cfg.stepsize(k, 0.5);
    step.iter().map(|s| s / midpoint).collect()
}

/// The estimator's error at iteration `k`, in closed form (`ĝ/g = (1 + ζε)/(1 + ε/2)`).
pub fn gradient_recovery(cfg: &PdsgdConfig, k: u64) -> GradientRecovery {
    let eps = 1.0 / (k as f64).powf(cfg.zeta_decay);
    GradientRecovery {
        k,
        mean_relative_error: (eps / 4.0) / (1.0 + eps / 2.0),
        worst_relative_error: (eps / 2.0) / (1.0 + eps / 2.0),
    }
}

/// [`gradient_recovery`] at k = 1, 10, 100, 1000 and the run's last iteration (keys
/// `k1`, `k10`, …).
pub fn recovery_table(cfg: &PdsgdConfig) -> std::collections::BTreeMap<String, GradientRecovery> {
    let mut ks = vec![1, 10, 100, 1000];
    ks.retain(|&k| k < cfg.iterations);
    ks.push(cfg.iterations.max(1));
    ks.into_iter()
        .map(|k| (format!("k{k}"), gradient_recovery(cfg, k)))
        .collect()
}

/// Theorem 2's external eavesdropper, measured: every message on every edge (both directions,
/// as bytes) of two runs on different data with the same keys, compared by a two-sample
/// Kolmogorov–Smirnov test on each ciphertext's leading 64 bits. Under Paillier the two views
/// should be indistinguishable; the transparent scheme's messages (the quantized states in the
/// clear) are the control that shows the test can see a dependence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EavesdropperReport {
    /// Iterations observed.
    pub iterations: u64,
    /// Paillier: the KS statistic D from the messages of the first `k` iterations, k = 1, 2, ….
    pub ks_paillier: Vec<f64>,
    /// The same on the plaintext messages.
    pub ks_plaintext: Vec<f64>,
    /// The test's critical value at α = 0.001 for that many values per view.
    pub critical: Vec<f64>,
    /// `ks_paillier` over all iterations observed.
    pub final_ks_paillier: f64,
    /// `ks_plaintext` over all iterations observed.
    pub final_ks_plaintext: f64,
    /// `critical` over all iterations observed.
    pub final_critical: f64,
}

/// Two-sample Kolmogorov–Smirnov statistic `sup_x |F_a(x) − F_b(x)|` (ties advance both
/// samples before the difference is taken).
pub fn ks_statistic(a: &[f64], b: &[f64]) -> f64 {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0.0_f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

/// Every message of trial `t` on every edge, as the eavesdropper sees it.
fn tapped<S: Scheme>(
    cfg: &PdsgdConfig,
    graph: &Graph,
    seeds: &SeedTree,
    t: u64,
    keys: Vec<(S::PublicKey, S::SecretKey)>,
) -> Result<Vec<Vec<u8>>> {
    let trial = cfg.trial(graph, seeds, t)?;
    let mut agents = cfg.agents::<S>(graph, &trial, keys)?;
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut tap = |bytes: &[u8]| seen.push(bytes.to_vec());
    cfg.run_trial(
        graph,
        &trial,
        Variant::Proposed,
        &mut agents,
        &mut Transport::Tapped(&mut tap),
        seeds,
        t,
    )?;
    Ok(seen)
}

/// The leading 64 bits of each of a message's `d` values of `width` bytes (they sit just
/// before the 8-byte checksum), for each prefix of whole iterations.
fn leading_words(messages: &[Vec<u8>], d: usize, width: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(messages.len() * d);
    for m in messages {
        let end = m
            .len()
            .checked_sub(8)
            .ok_or(SimError::Mismatch("a message too short"))?;
        let start = end
            .checked_sub(d * width)
            .ok_or(SimError::Mismatch("a message shorter than its values"))?;
        for v in m[start..end].chunks(width) {
            let mut top = [0u8; 8];
            top.copy_from_slice(&v[..8]);
            out.push(u64::from_be_bytes(top) as f64);
        }
    }
    Ok(out)
}

/// Runs trials 0 and 1 for `iterations` iterations under Paillier (keys from `make_keys`, called
/// once per run so both runs share them) and under the transparent scheme, and compares what
/// an eavesdropper sees.
pub fn eavesdropper(
    cfg: &PdsgdConfig,
    graph: &Graph,
    seeds: &SeedTree,
    iterations: u64,
    make_keys: &dyn Fn() -> Result<Vec<(PublicKey, KeyPair)>>,
) -> Result<EavesdropperReport> {
    let short = PdsgdConfig {
        iterations,
        eval_every: iterations,
        ..cfg.clone()
    };
    let width = make_keys()?
        .first()
        .map(|(pk, _)| pk.ciphertext_bytes())
        .ok_or(SimError::Mismatch("no Paillier keys"))?;
    let plain_key = TransparentKey {
        ciphertext_bytes: width,
    };
    let mut views = Vec::with_capacity(4);
    for t in [0, 1] {
        views.push((
            tapped::<Paillier>(&short, graph, seeds, t, make_keys()?)?,
            tapped::<Transparent>(&short, graph, seeds, t, vec![(plain_key, ()); graph.len()])?,
        ));
    }
    let per_iter = views[0].0.len() / iterations.max(1) as usize;
    let (mut ks_paillier, mut ks_plaintext, mut critical) = (vec![], vec![], vec![]);
    for k in 1..=iterations as usize {
        let upto = k * per_iter;
        let words = |m: &[Vec<u8>], w: usize| leading_words(&m[..upto.min(m.len())], cfg.d, w);
        let (a, b) = (words(&views[0].0, width)?, words(&views[1].0, width)?);
        ks_paillier.push(ks_statistic(&a, &b));
        let (pa, pb) = (words(&views[0].1, 8)?, words(&views[1].1, 8)?);
        ks_plaintext.push(ks_statistic(&pa, &pb));
        // c(α) = √(−ln(α/2)/2) = 1.95 at α = 0.001, times √((n + m)/(n·m)).
        critical.push(1.95 * (2.0 / a.len() as f64).sqrt());
    }
    let last = |v: &[f64]| v.last().copied().unwrap_or(f64::NAN);
    Ok(EavesdropperReport {
        iterations,
        final_ks_paillier: last(&ks_paillier),
        final_ks_plaintext: last(&ks_plaintext),
        final_critical: last(&critical),
        ks_paillier,
        ks_plaintext,
        critical,
    })
}
