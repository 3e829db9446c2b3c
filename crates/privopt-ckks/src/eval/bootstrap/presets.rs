//! 128-bit bootstrapping parameter sets: a dense ternary secret with sparse-secret
//! encapsulation (weight 32), every prime of `Q·P` within the HE standard's bound and the
//! encapsulation key's `q_0·p_e` within [`crate::params::SPARSE_128`], so both build with the
//! security check on. `docs/ckks-eval.md` has their measured precision, time and memory.
//!
//! The layout, bottom up: `q_0` and the user's levels; SlotsToCoeffs; EvalMod, whose last
//! levels ramp the scale down so it lands high above the user's scale (its output
//! `≈ 2π·c/q_0` is small, and the landing scale sets its noise floor); CoeffsToSlots at the
//! top. The key-switching primes are what make the precision: their product must exceed
//! each digit by several bits (ModRaise's overflow `q_0·I` meets the key-switching noise in
//! CtS), while the encapsulation key needs one prime `p_e` small enough for its certificate
//! (the first special prime if it is, else a ciphertext prime).

use super::BootstrapConfig;
use crate::params::{CkksParamsBuilder, SecretDistribution};

/// A named bootstrapping set: the parameters and the bootstrapper's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootstrapPreset {
    /// `n = 2^15`, 16 384 slots.
    N15,
    /// `n = 2^16`, 32 768 slots.
    N16,
    /// `n = 2^16`, 32 768 slots, SlotsToCoeffs first (see
    /// [`BootstrapConfig::slots_to_coeffs_first`]): inputs at level 3, the same nine levels
    /// of 45 bits between input and output as [`BootstrapPreset::N16`].
    N16StcFirst,
}

impl BootstrapPreset {
    /// Every preset.
    pub const ALL: [BootstrapPreset; 3] = [
        BootstrapPreset::N15,
        BootstrapPreset::N16,
        BootstrapPreset::N16StcFirst,
    ];

    /// The preset called `name` (see [`BootstrapPreset::name`]), if any.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Every preset's name (for errors that list them).
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|p| p.name()).collect()
    }

    /// `n15`, `n16` or `n16-stc-first`.
    pub fn name(self) -> &'static str {
        match self {
            BootstrapPreset::N15 => "n15",
            BootstrapPreset::N16 => "n16",
            BootstrapPreset::N16StcFirst => "n16-stc-first",
        }
    }

    /// The ring degree.
    pub fn n(self) -> usize {
        match self {
            BootstrapPreset::N15 => 1 << 15,
            BootstrapPreset::N16 | BootstrapPreset::N16StcFirst => 1 << 16,
        }
    }

    /// The parameters (dense ternary secret, security check on).
    pub fn params(self) -> CkksParamsBuilder {
        let b = match self {
            BootstrapPreset::N15 => {
                CkksParamsBuilder::profiled(self.n(), N15_Q0, &N15_SCALES, &N15_SPECIAL)
                    .linear_level(N15_STC_LEVEL, 60)
                    .digits(N15_DIGITS)
            }
            BootstrapPreset::N16 => {
                CkksParamsBuilder::profiled(self.n(), N16_Q0, &N16_SCALES, &N16_SPECIAL)
            }
            BootstrapPreset::N16StcFirst => {
                CkksParamsBuilder::profiled(self.n(), N16_Q0, &N16_STC_FIRST_SCALES, &N16_SPECIAL)
            }
        };
        b.secret(SecretDistribution::Ternary)
    }

    /// The bootstrapper's configuration.
    pub fn config(self) -> BootstrapConfig {
        match self {
            BootstrapPreset::N15 => BootstrapConfig {
                cts_levels: 3,
                stc_levels: 1,
                stc_factors_per_level: 2,
                encapsulation: Some(32),
                ..BootstrapConfig::default()
            },
            BootstrapPreset::N16 => BootstrapConfig {
                cts_levels: 3,
                stc_levels: 3,
                stc_factors_per_level: 1,
                arcsine_degree: 3,
                encapsulation: Some(32),
                // Whole, the dense diagonals take the peak past 6 GB (6.2–6.3 GiB); rebuilt
                // where used they cost no time measurable here.
                compact_transforms: true,
                ..BootstrapConfig::default()
            },
            BootstrapPreset::N16StcFirst => BootstrapConfig {
                slots_to_coeffs_first: true,
                ..BootstrapPreset::N16.config()
            },
        }
    }
}

/// `n = 2^15`: every ciphertext prime but StC's below 2^51, where the NTT, the key products
/// and the base conversions run on AVX-512 IFMA's 52-bit lanes (2–3× faster than 64-bit
/// primes on such CPUs; the same work elsewhere). `q_0` of 39 bits under three user levels at
/// 2^35 (message ratio 2^4: the coefficients `c/q_0` stay below 2^-13, where the sine's cubic
/// error is still negligible, and the smaller ratio leaves EvalMod's own error, set by its
/// 2^50 scale, less to amplify: 17.0 bits, against 15.1 at `q_0` of 41 bits). StC's two
/// factors on one 60-bit linear level (at 50 bits its diagonals' rounding costs 3 bits);
/// EvalMod's levels ramp 50 → 49 → 48 → 47, landing at 2^44; CtS in three factors at 2^50
/// (radices 2^5, 2^5, 2^4 instead of two of 2^7: about a third of the diagonals and fewer
/// rotations, CtS about 40% faster and 5.4 → 3.8 GB peak, for one level and more, smaller
/// rotation keys: 52 of 1.9 GB, not 30 of 2.1).
/// Two 57-bit key-switching primes against two-prime digits (9 digits; `P` of 114 bits above
/// the digits' 100: two 50-bit primes, equal to a digit, cost 9 bits, and three would not fit
/// the bound with CtS's third level). `q_0·p_0` = 96 bits is within the 96 the sparse secret
/// is certified at, so the encapsulation key takes the first special prime. log QP = 868.
const N15_Q0: u32 = 39;
const N15_SCALES: [u32; 16] = [
    35, 35, 35, 35, 44, 47, 48, 49, 50, 50, 50, 50, 50, 50, 50, 50,
];
const N15_SPECIAL: [u32; 2] = [57, 57];
const N15_DIGITS: usize = 9;
const N15_STC_LEVEL: usize = 4;

/// `n = 2^16`: `q_0` of 49 bits under nine user levels at 2^45 (message ratio 2^4, with the
/// arcsine correction of degree 3 removing the sine's cubic error that ratio brings: 23.7 bits
/// against 19.0 without it, and 21.4 at ratio 2^6 without); StC in three levels ramping
/// 45 → 50 → 54 → 57; EvalMod and CtS at 2^58. Six 60-bit key-switching primes against
/// six-prime digits (5 digits, not 7 under four primes): the bound's spare 140 bits buy keys a
/// quarter smaller (3.7 GB, not 5.0) and a fifth less peak memory, at the same time and
/// precision. `q_0·p_0` = 109 bits, certified for weight 32 at 2^16. log QP = 1742 (bound 1762).
/// The dense diagonals (CtS's first factor and StC's last) are kept as coefficients
/// (`compact_transforms`): 86 MB of transforms instead of 874, the peak 5.3–5.5 GiB instead of
/// 6.2–6.3, and no measurable time (9.41, 9.83 s against 9.66, 10.58 s whole).
const N16_Q0: u32 = 49;
const N16_SCALES: [u32; 26] = [
    45, 45, 45, 45, 45, 45, 45, 45, 45, 45, 50, 54, 57, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58,
    58, 58,
];
const N16_SPECIAL: [u32; 6] = [60, 60, 60, 60, 60, 60];

/// `n = 2^16` with SlotsToCoeffs first: the same primes as [`N16_SCALES`] rearranged. StC's
/// three levels sit at the bottom (45-bit plaintexts on 45–49-bit primes, one digit each:
/// about a fifth of the work at 11–13 primes), landing at `Δ_0 = 2^41` under `q_0` of 49 bits:
/// a message ratio of 2^8, because the message now fills the coefficients at its own size
/// (with the arcsine of degree 3 the sine's remaining fifth-order error is about 2^-25 of
/// the largest slot). The nine user levels at 2^45 above them; EvalMod's last two levels
/// ramp 58 → 56 → 52 → 45 to land its output at the user's scale; EvalMod and CtS at 2^58.
/// log QP = 1712 (30 bits below [`N16_SCALES`]').
const N16_STC_FIRST_SCALES: [u32; 26] = [
    41, 45, 45, 45, 45, 45, 45, 45, 45, 45, 45, 45, 45, 52, 56, 58, 58, 58, 58, 58, 58, 58, 58, 58,
    58, 58,
];
