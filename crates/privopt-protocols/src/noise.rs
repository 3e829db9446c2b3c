//! Gaussian noise that a secure sum carries, added in equal shares by its contributors
//! (distributed DP): DOME's sketches and the scalar channel of DeComFL/HiSo size their shares
//! here, so the two agree on what a dropout does to the noise.

use privopt_secagg::Quantizer;

use crate::error::{Result, check_param};

/// The noise of one round's secure sum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SharedNoise {
    /// The variance per coordinate the released sum must carry (0: no noise).
    pub variance: f64,
    /// `None`: each of `B` participants adds `variance / B`, so every dropout leaves the sum
    /// with less noise than `variance`. `Some(f)` (in (0, 1]): each adds the share of
    /// `⌈f·B⌉` contributors, and a round with fewer is refused, so a released sum always
    /// carries at least `variance`.
    pub floor: Option<f64>,
}

impl SharedNoise {
    /// Checks the ranges (finite variance ≥ 0, floor in (0, 1]); `what` names the owner.
    pub fn validate(&self, what: &str) -> Result<()> {
        check_param(self.variance.is_finite() && self.variance >= 0.0, || {
            format!(
                "{what}: the noise variance {} must be finite and >= 0",
                self.variance
            )
        })?;
        check_param(self.floor.is_none_or(|f| f > 0.0 && f <= 1.0), || {
            format!(
                "{what}: the noise floor {} must be in (0, 1]",
                self.floor.unwrap_or(f64::NAN)
            )
        })
    }

    /// The contributor count each participant's share is sized for (≥ 1).
    pub fn shares(&self, participants: usize) -> usize {
        match self.floor {
            // f ≤ 1, so the product is at most `participants`.
            Some(f) => ((f * participants as f64).ceil() as usize).clamp(1, participants.max(1)),
            None => participants.max(1),
        }
    }

    /// The variance each participant adds.
    pub fn share_variance(&self, participants: usize) -> f64 {
        self.variance / self.shares(participants) as f64
    }

    /// The fewest contributors a round may be released with: the shares under a floor, else 1.
    pub fn required_contributors(&self, participants: usize) -> usize {
        if self.floor.is_some() {
            self.shares(participants)
        } else {
            1
        }
    }

    /// The quantizer of a sum of `participants` vectors clipped to `clip` in L2 and noised
    /// with this share: each coordinate is within `clip + 10·std` with probability
    /// `1 − 1e-23`, so its clip never bites in practice.
    pub fn quantizer(&self, clip: f64, participants: usize) -> Result<Quantizer> {
        Ok(Quantizer::new(
            clip + 10.0 * self.share_variance(participants).sqrt(),
            participants,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_sizes_shares_for_the_fewest_contributors_it_admits() {
        let paper = SharedNoise {
            variance: 12.0,
            floor: None,
        };
        assert_eq!((paper.shares(4), paper.required_contributors(4)), (4, 1));
        assert_eq!(paper.share_variance(4), 3.0);
        let floored = SharedNoise {
            variance: 12.0,
            floor: Some(0.5),
        };
        // ⌈0.5·5⌉ = 3 shares: any 3 of the 5 carry the full variance.
        assert_eq!(
            (floored.shares(5), floored.required_contributors(5)),
            (3, 3)
        );
        assert_eq!(floored.share_variance(5), 4.0);
        assert_eq!(floored.shares(0), 1);
        assert!(
            SharedNoise {
                variance: 1.0,
                floor: Some(0.0)
            }
            .validate("x")
            .is_err()
        );
        assert!(
            SharedNoise {
                variance: f64::NAN,
                floor: None
            }
            .validate("x")
            .is_err()
        );
    }
}
