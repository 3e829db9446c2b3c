//! A DOME client's part of a round (Alg. 1 lines 9–14): remove the broadcast mean, project onto
//! the sketch, clip to `C`, add its share of the Gaussian noise, and quantize for SecAgg+
//! (whose client state machine, [`privopt_secagg::Client`], then carries the vector).

use privopt_secagg::Quantizer;
use rand::Rng;
use rand_distr::{Distribution, Normal};

use super::messages::RoundBroadcast;
use super::sketch::Basis;
use crate::error::{Error, Result};

/// What a client releases, and (for its own records or a simulation's diagnostics) the noise
/// it added.
#[derive(Clone, Debug)]
pub struct Release {
    /// The clipped, noised sketch of the gradient.
    pub vector: Vec<f64>,
    /// The noise that was added.
    pub noise: Vec<f64>,
}

/// Privatizes one gradient `grad` (length `d`, changed in place to `grad − m̂`) under this
/// round's broadcast and basis.
pub fn release(
    grad: &mut [f64],
    round: &RoundBroadcast,
    basis: Basis<'_>,
    rng: &mut impl Rng,
) -> Result<Release> {
    if grad.len() != basis.d() || round.m_hat.len() != basis.d() {
        return Err(Error::Parameters(format!(
            "a gradient of {} and a mean of {} for a model of dimension {}",
            grad.len(),
            round.m_hat.len(),
            basis.d()
        )));
    }
    let noise = Normal::new(0.0, round.noise_std)
        .map_err(|e| Error::Parameters(format!("DOME noise: {e}")))?;
    grad.iter_mut().zip(&round.m_hat).for_each(|(x, m)| *x -= m);
    let mut vector = basis.project(grad);
    privopt_dp::clip_l2(&mut vector, round.clip);
    let mut added = Vec::with_capacity(vector.len());
    for x in &mut vector {
        let z = noise.sample(rng);
        *x += z;
        added.push(z);
    }
    Ok(Release {
        vector,
        noise: added,
    })
}

/// The quantizer of this round's SecAgg+ sum.
pub fn quantizer(round: &RoundBroadcast) -> Result<Quantizer> {
    Ok(Quantizer::new(
        round.quantizer_bound,
        round.participants as usize,
    )?)
}
