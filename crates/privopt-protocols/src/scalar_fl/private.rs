//! Client-level differential privacy on the scalar channel, summed by SecAgg+.
//!
//! A participant clips its round's scalars (one per local step and perturbation) to an L2
//! bound `C`, adds its share of Gaussian noise and quantizes them for SecAgg+; the server
//! learns only the noised sum over the contributors, averages it and replays it as any round.
//! The noise is distributed, not central: the server never holds an un-noised sum, so the
//! guarantee holds against the server too. Every participant sizes its share for the fewest
//! contributors the round may be released with ([`SharedNoise`] with a floor), so any
//! released sum carries at least `(σC)²` per scalar whatever the dropouts.
//!
//! Each release is a Gaussian mechanism of noise multiplier `σ·√(k/m)` on a contributor's
//! clipped scalars (`k` contributors, `m` shares): a client's ε follows from the rounds it
//! contributed to (no subsampling amplification — the server chooses the participants).

use rand::Rng;
use rand_distr::{Distribution, Normal};

use super::client::Invitation;
use crate::error::{ProtocolError, Result, check_param};
use crate::noise::SharedNoise;

/// A run's privacy settings, fixed for the run and known to the server and every client (a
/// client adds the noise its own settings call for, whatever the server says).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Privacy {
    /// L2 bound `C` on a client's scalars of one round.
    pub clip: f64,
    /// `σ`: the released sum carries `N(0, (σC)²)` per scalar (0: clipping and secure
    /// aggregation without noise).
    pub noise_multiplier: f64,
    /// Each participant adds the share of `⌈f·B⌉` contributors of a round of `B`; a round with
    /// fewer contributors is never released.
    pub noise_floor: f64,
}

impl Privacy {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        check_param(self.clip.is_finite() && self.clip > 0.0, || {
            format!("the scalar clip must be finite and > 0, got {}", self.clip)
        })?;
        check_param(
            self.noise_multiplier.is_finite() && self.noise_multiplier >= 0.0,
            || {
                format!(
                    "the noise multiplier must be finite and >= 0, got {}",
                    self.noise_multiplier
                )
            },
        )?;
        self.noise().validate("scalar privacy")
    }

    /// The noise of a round's sum.
    pub fn noise(&self) -> SharedNoise {
        let std = self.noise_multiplier * self.clip;
        SharedNoise {
            variance: std * std,
            floor: Some(self.noise_floor),
        }
    }

    /// The noise multiplier of a contributor's scalars in a sum of `contributors` from a round
    /// of `participants`: `σ·√(k/m)` for `k` contributors and `m` shares, at least `σ` in any
    /// released sum.
    pub fn effective_multiplier(&self, participants: usize, contributors: usize) -> f64 {
        let variance = self.noise().share_variance(participants) * contributors as f64;
        variance.sqrt() / self.clip
    }

    /// Client side: the invitation's `scalars` clipped to `C`, noised with this client's share
    /// for the invitation's round, and quantized: the SecAgg+ input. A non-finite scalar is
    /// refused (the client drops out of the round rather than let it reach the sum).
    pub fn privatize(
        &self,
        invitation: &Invitation,
        scalars: &[f32],
        rng: &mut (impl Rng + ?Sized),
    ) -> Result<Vec<u32>> {
        self.validate()?;
        let participants = invitation.participants;
        if let Some(s) = scalars.iter().find(|s| !s.is_finite()) {
            return Err(ProtocolError::Diverged {
                round: invitation.round,
                what: format!("a scalar ({s}) of the reply"),
            });
        }
        let mut v: Vec<f64> = scalars.iter().map(|&s| f64::from(s)).collect();
        privopt_dp::clip_l2(&mut v, self.clip);
        let noise = self.noise();
        let std = noise.share_variance(participants).sqrt();
        if std > 0.0 {
            let normal = Normal::new(0.0, std)
                .map_err(|e| ProtocolError::Parameters(format!("scalar noise: {e}")))?;
            v.iter_mut().for_each(|x| *x += normal.sample(rng));
        }
        Ok(noise.quantizer(self.clip, participants)?.encode(&v)?)
    }

    /// Server side: the mean of the contributors' scalars from SecAgg+'s `sum` of their
    /// quantized vectors, refused below the floor's contributor count.
    pub fn decode_mean(
        &self,
        sum: &[u32],
        participants: usize,
        contributors: usize,
    ) -> Result<Vec<f64>> {
        self.validate()?;
        let noise = self.noise();
        let required = noise.required_contributors(participants);
        if contributors < required {
            return Err(ProtocolError::Incomplete(format!(
                "{contributors} of {participants} participants contributed, below the \
                 {required} the noise floor needs: the sum is not released"
            )));
        }
        let quantizer = noise.quantizer(self.clip, participants)?;
        Ok(quantizer
            .decode_sum(sum)
            .into_iter()
            .map(|s| s / contributors as f64)
            .collect())
    }
}
