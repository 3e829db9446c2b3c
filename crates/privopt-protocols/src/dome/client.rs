//! A DOME client's part of a round (Alg. 1 lines 9–14): remove the broadcast mean, project onto
//! the sketch, clip to `C`, add its share of the Gaussian noise, and quantize for SecAgg+
//! (whose client state machine, [`privopt_secagg::Client`], then carries the vector).

use privopt_secagg::Quantizer;
use rand::Rng;
use rand_distr::{Distribution, Normal};

use super::messages::RoundBroadcast;
use super::sketch::Basis;
use crate::error::{Misbehavior, Peer, ProtocolError, Result};
use crate::noise::SharedNoise;

/// What a client releases, and (for its own records or a simulation's diagnostics) the noise
/// it added.
#[derive(Clone, Debug)]
pub struct Release {
    /// The clipped, noised sketch of the gradient.
    pub vector: Vec<f64>,
    /// The noise that was added.
    pub noise: Vec<f64>,
}

/// Checks a round's broadcast against the terms the client holds itself (the run's clip `C`
/// and noise): a broadcast asking for a larger clip or a smaller noise share than the run's
/// for its `B` participants would have the secure sum carry less noise than the privacy
/// accounting assumes. Returns the fewest contributors the share is sized for: the client
/// helps unmask no sum of fewer (see `privopt_secagg::UnmaskRequest::require_survivors`).
pub fn check_broadcast(round: &RoundBroadcast, clip: f64, noise: &SharedNoise) -> Result<usize> {
    noise.validate("the client's DOME noise")?;
    let participants = round.participants as usize;
    let share_std = noise.share_variance(participants).sqrt();
    // The server computes the same f64 expressions; allow only rounding.
    let slack = 1e-9;
    if round.clip > clip * (1.0 + slack) || round.noise_std < share_std * (1.0 - slack) {
        return Err(ProtocolError::PeerMisbehaved {
            peer: Peer::Server,
            kind: Misbehavior::OutOfBounds,
            detail: format!(
                "round {} asks for clip {} and noise {} per participant of {participants}; \
                 this client's terms are clip {clip} and noise {share_std}",
                round.round, round.clip, round.noise_std
            ),
        });
    }
    Ok(noise.required_contributors(participants))
}

/// Privatizes one gradient `grad` (length `d`, changed in place to `grad − m̂`) under this
/// round's broadcast and basis.
pub fn release(
    grad: &mut [f64],
    round: &RoundBroadcast,
    basis: Basis<'_>,
    rng: &mut impl Rng,
) -> Result<Release> {
    let mut releases = release_many(grad, round, basis, rng)?;
    releases
        .pop()
        .ok_or_else(|| ProtocolError::Parameters("an empty gradient".into()))
}

/// Privatizes the gradients in `grads`, `d` values after `d` values, each changed in place to
/// `grad − m̂`, as [`release`] does one by one: the noise is drawn from `rng` in the same order.
/// A simulation of many clients uses it so that the sketch is read once for all of them.
pub fn release_many(
    grads: &mut [f64],
    round: &RoundBroadcast,
    basis: Basis<'_>,
    rng: &mut impl Rng,
) -> Result<Vec<Release>> {
    let d = basis.d();
    if grads.is_empty() || !grads.len().is_multiple_of(d) || round.m_hat.len() != d {
        return Err(ProtocolError::Parameters(format!(
            "gradients of {} values in all and a mean of {} for a model of dimension {d}",
            grads.len(),
            round.m_hat.len(),
        )));
    }
    // A non-finite gradient would clip to NaN and reach the sum as zeros: refuse it.
    if let Some(i) = grads.iter().position(|g| !g.is_finite()) {
        return Err(ProtocolError::Diverged {
            round: round.round,
            what: format!(
                "gradient value {} of client vector {} ({})",
                i % d,
                i / d,
                grads[i]
            ),
        });
    }
    let noise = Normal::new(0.0, round.noise_std)
        .map_err(|e| ProtocolError::Parameters(format!("DOME noise: {e}")))?;
    for grad in grads.chunks_mut(d) {
        grad.iter_mut().zip(&round.m_hat).for_each(|(x, m)| *x -= m);
    }
    let releases = basis
        .project_columns(grads)
        .into_iter()
        .map(|mut vector| {
            privopt_dp::clip_l2(&mut vector, round.clip);
            let mut added = Vec::with_capacity(vector.len());
            for x in &mut vector {
                let z = noise.sample(rng);
                *x += z;
                added.push(z);
            }
            Release {
                vector,
                noise: added,
            }
        })
        .collect();
    Ok(releases)
}

/// The quantizer of this round's SecAgg+ sum.
pub fn quantizer(round: &RoundBroadcast) -> Result<Quantizer> {
    Ok(Quantizer::new(
        round.quantizer_bound,
        round.participants as usize,
    )?)
}
