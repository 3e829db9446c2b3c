//! Bootstrapping: a ciphertext at level 0 back to a high level, with the same slots.
//!
//! 1. **ModRaise**: the level-0 components, lifted (centred) to every prime. The plaintext
//!    becomes `c + q_0·I` with `I` a small integer polynomial (`|I_k| ≲ 6·√((h+1)/12)` for a
//!    secret of `h` non-zeros: why bootstrapping wants a sparse secret).
//! 2. **CoeffsToSlots**: the inverse encoding transform, factored into one sparse matrix per
//!    level ([`dft`]), so the slots hold the coefficient pairs `c_k + i·c_{k+n/2}` (in
//!    bit-reversed order), scaled to `t/K` with `t = (c + q_0 I)/q_0`; the real and imaginary
//!    parts are split with one conjugation.
//! 3. **EvalMod** on each part: `sin(2πt) ≈ 2π·c/q_0` ([`evalmod`]).
//! 4. **SlotsToCoeffs**: the encoding transform back, which also undoes `2π/q_0·Δ_0`.
//!
//! [`BootstrapConfig::slots_to_coeffs_first`] runs step 4 first, on the input at the bottom
//! levels (2–4 primes instead of 11–13 at the 2^16 presets: StC a third of its time): the
//! coefficients then hold the slots' real and imaginary parts, and EvalMod's two halves are
//! the slots themselves.
//!
//! `q_0/(2πΔ_0)` is folded into StC's first matrix and the scaling to `t/K` (about 2^-13)
//! into CtS's matrices, so no level is spent on either. The scaling is spread evenly over
//! CtS's `m` factors (`(t/K)^{1/m}` each): a plaintext's rounding is about `2^-log2 Δ_l`
//! absolute per slot, so shrinking one factor's entries by 2^-13 would cost that factor 13
//! bits of relative precision (measured: 17.7 → 12.2 bits at `n = 2^12`), while spread over
//! three it costs each about 4 (17.8 bits, one level fewer than a separate product). The precision is set by the message ratio
//! `q_0/Δ_0` (the sine's cubic term: about `(2π·Δ_0/q_0)²/6` relative), the EvalMod
//! interpolant amplified `4^r` times by the double angles, and the transforms' plaintext
//! rounding against `q_0 K`.

pub mod dft;
pub mod evalmod;
pub mod presets;

use std::sync::Arc;

use super::ciphertext::Ciphertext;
use super::context::EvalContext;
use super::evaluator::Evaluator;
use super::keys::{EncapsulationKeys, GaloisKeys, KeyRequest, RelinKey, SecretKey};
use super::linear::{BabySteps, LinearTransform};
use super::ring;
use crate::encoding::Complex;
use crate::error::CkksError;
pub use evalmod::EvalMod;
pub use presets::BootstrapPreset;

/// How to bootstrap: the level budgets of the two transforms and EvalMod's settings.
#[derive(Clone, Debug)]
pub struct BootstrapConfig {
    /// Levels (matrices) of CoeffsToSlots.
    pub cts_levels: usize,
    /// Levels of SlotsToCoeffs.
    pub stc_levels: usize,
    /// FFT factors per SlotsToCoeffs level, applied unrescaled and rescaled once (their
    /// plaintexts share the level's product scale): `2` on a 60-bit linear level holds two
    /// factors of 30-bit plaintexts in one level (see
    /// [`crate::params::CkksParamsBuilder::linear_level`]).
    pub stc_factors_per_level: usize,
    /// `K`: the bound on `|t|`; `None` picks it by [`BootstrapConfig::failure_bits`].
    pub k: Option<f64>,
    /// Without `k`: the smallest integer `K` whose [`Bootstrapper::failure_probability`] is at
    /// most `2^-failure_bits`; `None`: `⌈6σ⌉` of ModRaise's overflow for the secret (about
    /// 2^-20 per bootstrap for the presets' weight-32 encapsulation at 2^16).
    pub failure_bits: Option<f64>,
    /// Double-angle steps of EvalMod.
    pub double_angles: u32,
    /// Target sup error of EvalMod's interpolant.
    pub interpolation_error: f64,
    /// Degree of the `arcsin` correction after EvalMod (0: none; 3, 5, 7).
    pub arcsine_degree: usize,
    /// Sparse-secret encapsulation: the weight of the ephemeral sparse secret (the evaluator
    /// then needs [`super::EncapsulationKeys`] of that weight). `None`: ModRaise under the
    /// parameters' own secret.
    pub encapsulation: Option<usize>,
    /// Trade time for memory: the transforms keep each diagonal not stored as runs (see
    /// [`LinearTransform`]) as one row of integer coefficients (encoded again at each use)
    /// and [`Bootstrapper::keys`] makes compact Galois and encapsulation keys (each `a` half
    /// regenerated from a seed at each use; see [`crate::eval::SwitchingKey::compact`]). The
    /// keys used many times per bootstrap stay whole: relinearization (every EvalMod product),
    /// each transform's giant step (every Horner step) and grouped babies' steps. The
    /// results are the same to the bit.
    pub compact: bool,
    /// Keep only the transforms compact (the keys whole): each dense diagonal is stored as
    /// one row of integer coefficients and encoded where it is multiplied (an NTT per prime
    /// per use; the same plaintext to the bit). At [`BootstrapPreset::N16`] the dense
    /// diagonals are CoeffsToSlots' first factor (32 diagonals over 32 primes, 537 MB whole)
    /// and SlotsToCoeffs' last (285 MB): compact, the transforms take 86 MB instead of 874,
    /// for about 1 500 row NTTs per bootstrap. `compact` implies it.
    pub compact_transforms: bool,
    /// How CoeffsToSlots' transforms make their baby rotations: all hoisted from the input (a
    /// Galois key each, the fastest), or a few at a time (a few keys per transform, for a
    /// ModUp and a ModDown per group; see [`BabySteps`]). CtS runs at the top levels, where
    /// its keys are most of the bytes. Unlike `compact`, this changes the result (within its
    /// noise).
    pub cts_babies: BabySteps,
    /// [`BootstrapConfig::cts_babies`] for SlotsToCoeffs, whose keys are made at its low
    /// level and are small.
    pub stc_babies: BabySteps,
    /// Sparse packing: the number `s` of distinct slots (a power of two below `n/2`) of the
    /// ciphertexts to bootstrap, whose slots repeat with period `s` (`s` values encoded
    /// repeated `n/2s` times, i.e. a polynomial in `X^{n/2s}`). The transforms then span
    /// `log2 s` FFT stages instead of `log2(n/2)`, and the real and imaginary parts share one
    /// EvalMod; ModRaise is followed by `log2(n/2s)` rotations that clear the other
    /// coefficients. Slots that do not repeat come out as their average over the period.
    /// `None` (or `n/2`): full packing.
    pub slots: Option<usize>,
    /// SlotsToCoeffs first: StC runs on the input, at the bottom levels `stc_levels … 1` where
    /// a ciphertext has the fewest primes, then ModRaise, CtS and EvalMod, whose output is the
    /// input's slots (`q_0/(2πΔ_0)` folded into EvalMod's last polynomial, see
    /// [`EvalMod::scaled_output`]). Inputs then come at [`Bootstrapper::input_level`]
    /// (`stc_levels`) instead of 0; the levels between input and output are the same for the
    /// same chain, but they sit `stc_levels` primes higher, so a circuit's own operations
    /// between bootstraps cost more (about 30% at the top of the 2^16 presets' nine levels):
    /// the order suits bootstrap-bound circuits. The message sits in the coefficients at its
    /// own size rather than about `√(2/n)` of it, so the parameters want a larger message
    /// ratio `q_0/Δ_0` (the preset [`BootstrapPreset::N16StcFirst`] has 2^8 against 2^4).
    /// Sparse packing then needs an arcsine of degree 3 or none (see
    /// [`EvalMod::apply_masked`]).
    pub slots_to_coeffs_first: bool,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        Self {
            cts_levels: 3,
            stc_levels: 3,
            stc_factors_per_level: 1,
            k: None,
            failure_bits: None,
            double_angles: 3,
            interpolation_error: 1e-13,
            arcsine_degree: 0,
            encapsulation: None,
            compact: false,
            compact_transforms: false,
            cts_babies: BabySteps::Hoisted,
            stc_babies: BabySteps::Hoisted,
            slots: None,
            slots_to_coeffs_first: false,
        }
    }
}

/// The evaluation keys of a bootstrapping evaluator, as its key owner hands them over.
#[derive(Debug)]
pub struct EvaluationKeys {
    /// Relinearization.
    pub relin: RelinKey,
    /// The transforms' rotations and conjugation, and any circuit's own.
    pub galois: GaloisKeys,
    /// Sparse-secret encapsulation, if the bootstrapper is configured for it.
    pub encapsulation: Option<EncapsulationKeys>,
}

impl EvaluationKeys {
    /// Makes every key compact: about half the memory, each `a` half regenerated from its
    /// seed where it is used (see [`crate::eval::SwitchingKey::compact`]).
    pub fn compact(&mut self) {
        self.relin.compact();
        self.galois.compact();
        if let Some(e) = &mut self.encapsulation {
            e.compact();
        }
    }

    /// An evaluator over these keys.
    pub fn evaluator(self, ctx: &Arc<EvalContext>) -> Evaluator {
        let ev = Evaluator::new(ctx, Some(self.relin), self.galois);
        match self.encapsulation {
            Some(keys) => ev.with_encapsulation(keys),
            None => ev,
        }
    }
}

/// Wall-clock seconds of each phase of one bootstrap.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseSeconds {
    /// ModRaise (with the encapsulation's two key switches, if used).
    pub mod_raise: f64,
    /// CoeffsToSlots (with the scaling to `t/K`) and the real/imaginary split; with sparse
    /// packing, the rotations that clear the other coefficients first.
    pub coeffs_to_slots: f64,
    /// EvalMod on both halves (one ciphertext with sparse packing).
    pub eval_mod: f64,
    /// SlotsToCoeffs (first, under [`BootstrapConfig::slots_to_coeffs_first`]).
    pub slots_to_coeffs: f64,
}

/// Prepared transforms and EvalMod for one evaluator's parameters.
#[derive(Debug)]
pub struct Bootstrapper {
    cts: Vec<LinearTransform>,
    /// One group of factors per level, rescaled once after the group.
    stc: Vec<Vec<LinearTransform>>,
    eval_mod: EvalMod,
    output_level: usize,
    /// The level inputs are dropped to: 0, or StC's top under SlotsToCoeffs-first (StC has
    /// at least one level, so a positive input level means StC first).
    input_level: usize,
    /// The level CtS's output is conjugated at.
    conjugation_level: usize,
    /// The encapsulation weight the evaluator's keys must have, if any.
    encapsulation: Option<usize>,
    /// Whether [`Bootstrapper::keys`] makes compact keys.
    compact: bool,
    /// Sparse packing, if configured.
    sparse: Option<SparsePacking>,
    /// How many uniform terms make up ModRaise's overflow `I` per coefficient: the secret's
    /// non-zeros (ModRaise's secret: the encapsulation key's if encapsulated) plus `c_0`'s.
    overflow_terms: u32,
    /// Coefficients EvalMod reads: `n`, or `2s` under sparse packing of period `s`.
    coefficients: usize,
}

/// What sparse packing adds to the full-slot bootstrap.
///
/// With slots of period `s`, the coefficient pairs `w` of CtS are `s` complex numbers, and
/// their `2s` real parts fit in one ciphertext: CtS's last factor multiplies the second half
/// of every period `2s` by `−i`, so that `v = b + b̄` holds `Re w` in `[0, s)` and `Im w` in
/// `[s, 2s)` (`Re(−i·w) = Im w`), real slots for one EvalMod. StC's first factor `A` then
/// reads `w = v + i·rot(v, s)` on `[0, s)` (and `rot(v, s) + i·v` on `[s, 2s)`), split into
/// `A·D_0` applied to `v` and `A·D_1` to `rot(v, s)`, which costs no level.
///
/// With SlotsToCoeffs first, EvalMod's output `v` holds the slots' `Re z` in `[0, s)` and
/// `Im z` in `[s, 2s)`, and no transform follows: `q = D_0 ∘ p(v)` (`D_0` is 1 on the first
/// half of each period `2s` and `i` on the second), folded into EvalMod's last polynomial
/// ([`EvalMod::apply_masked`], no level), gives the slots as `q + rot(q, s)`.
#[derive(Debug)]
struct SparsePacking {
    /// The period `s`.
    slots: usize,
    /// The rotations after ModRaise (at the top level) whose sum keeps only the coefficients
    /// of the powers of `X^{n/2s}` (the trace onto that subring, times `n/2s`): by
    /// `s, 2s, …, n/4`.
    sub_sum: Vec<i64>,
    /// How EvalMod's output becomes the slots again.
    rejoin: Rejoin,
}

/// See [`SparsePacking`].
#[derive(Debug)]
enum Rejoin {
    /// StC last: `A·D_1`, at StC's first level, for `rot(v, s)`.
    Shifted(LinearTransform),
    /// StC first: `D_0` in every slot, for EvalMod's last polynomial; `rot(q, s)` runs at
    /// the output level.
    Masked(Vec<Complex>),
}

impl Bootstrapper {
    /// Encodes the transforms for the context's parameters. Needs levels for CtS, EvalMod
    /// and StC above level 0 (the output level is reported by
    /// [`Bootstrapper::output_level`]). The evaluator that runs it needs the relinearization
    /// key and Galois keys for [`Bootstrapper::rotations`] and conjugation.
    pub fn new(ctx: &Arc<EvalContext>, cfg: &BootstrapConfig) -> Result<Self, CkksError> {
        let full = ctx.slots();
        let slots = cfg.slots.unwrap_or(full);
        if !slots.is_power_of_two() || !(2..=full).contains(&slots) {
            return Err(CkksError::InvalidParams(format!(
                "sparse packing needs a power of two from 2 to {full} slots, got {slots}"
            )));
        }
        let sparse = slots < full;
        let stc_first = cfg.slots_to_coeffs_first;
        let stages = slots.trailing_zeros() as usize;
        let stc_factors = cfg.stc_levels * cfg.stc_factors_per_level;
        for (what, factors) in [("CtS", cfg.cts_levels), ("StC", stc_factors)] {
            if !(1..=stages.max(1)).contains(&factors) {
                return Err(CkksError::InvalidParams(format!(
                    "{what} needs 1 to {stages} factors (one per FFT stage at most of \
                     {slots} slots), got {factors}"
                )));
            }
        }
        if let Some(weight) = cfg.encapsulation
            && !(1..=ctx.n()).contains(&weight)
        {
            return Err(CkksError::InvalidParams(format!(
                "encapsulation weight {weight} is not in 1..={}",
                ctx.n()
            )));
        }
        // Encoding needs no keys.
        let ev = &Evaluator::new(ctx, None, GaloisKeys::default());
        let params = ctx.params();
        let (n, top) = (ctx.n(), ctx.max_level());
        let weight = match cfg.encapsulation {
            Some(weight) => weight as f64,
            None => params.secret().variance(n) * n as f64,
        };
        let overflow_terms = (weight.round() as u32).saturating_add(1);
        let coefficients = 2 * slots;
        let k = match (cfg.k, cfg.failure_bits) {
            (Some(k), _) => k,
            (None, Some(bits)) => range_for_failure(overflow_terms, coefficients, bits)?,
            (None, None) => overflow_bound(weight),
        };
        let q0 = ctx.primes[0] as f64;
        // sin(2πt) ≈ 2π c/q_0 → c/Δ_0, the message: by StC's first matrix, or with StC first
        // (no transform after EvalMod) by EvalMod's last polynomial.
        let out = q0 / (2.0 * std::f64::consts::PI * ctx.level_scale(0));
        let eval_mod = EvalMod::new(
            k,
            cfg.double_angles,
            cfg.interpolation_error,
            cfg.arcsine_degree,
        )?;
        let eval_mod = if stc_first {
            eval_mod.scaled_output(out)?
        } else {
            eval_mod
        };
        let depth =
            cfg.cts_levels + eval_mod_depth(ctx, &eval_mod, cfg.cts_levels)? + cfg.stc_levels;
        if depth > top {
            return Err(CkksError::LevelExhausted(format!(
                "bootstrapping needs {depth} levels above level 0, the parameters have {top}"
            )));
        }
        // CtS: slots (c + q_0 I)/Δ_L (times n/2s after the sub-sum of sparse packing) →
        // half the coefficient pairs (the conjugation doubles them back) as t/K, the scaling
        // spread over the factors (module docs).
        let gap = (full / slots) as f64;
        let mut cts_factors = dft::coeffs_to_slots(slots, cfg.cts_levels);
        let into = (ctx.level_scale(top) / (k * q0 * gap)).powf(1.0 / cts_factors.len() as f64);
        for (i, f) in cts_factors.iter_mut().enumerate() {
            *f = dft::scaled(f, if i == 0 { 0.5 * into } else { into });
        }
        let mut stc_factors = dft::slots_to_coeffs(slots, stc_factors);
        if !stc_first {
            stc_factors[0] = dft::scaled(&stc_factors[0], out);
        }
        let spread = |f: &dft::Diagonals| dft::replicated(f, slots, full);
        let mut stc_shifted = None;
        let mut mask = None;
        if sparse {
            // See `SparsePacking`: −i on the second half of each period 2s after CtS; StC's
            // first factor split into A·D_0 and A·D_1, or (StC first) D_0 after EvalMod.
            let (one, i) = (Complex::new(1.0, 0.0), Complex::new(0.0, 1.0));
            let halves = |a: Complex, b: Complex| {
                dft::diagonal(
                    (0..2 * slots)
                        .map(|j| if j < slots { a } else { b })
                        .collect(),
                )
            };
            let last = cts_factors.len() - 1;
            let widened = dft::replicated(&cts_factors[last], slots, 2 * slots);
            let turned = dft::product(&halves(one, i.scale(-1.0)), &widened, 2 * slots);
            cts_factors = cts_factors[..last].iter().map(spread).collect();
            cts_factors.push(dft::replicated(&turned, 2 * slots, full));
            if stc_first {
                mask = Some(
                    (0..full)
                        .map(|j| if j % (2 * slots) < slots { one } else { i })
                        .collect(),
                );
                stc_factors = stc_factors.iter().map(spread).collect();
            } else {
                let first = dft::replicated(&stc_factors[0], slots, 2 * slots);
                let split = |d: dft::Diagonals| {
                    dft::replicated(&dft::product(&first, &d, 2 * slots), 2 * slots, full)
                };
                stc_shifted = Some(split(halves(i, one)));
                stc_factors[0] = split(halves(one, i));
                for f in &mut stc_factors[1..] {
                    *f = spread(f);
                }
            }
        }
        let compact_transforms = cfg.compact || cfg.compact_transforms;
        let cts = prepare(ev, &cts_factors, top, 1, compact_transforms, cfg.cts_babies)?
            .into_iter()
            .flatten()
            .collect();
        // StC's levels: below the user's (first) or between EvalMod and the user's.
        let input_level = if stc_first { cfg.stc_levels } else { 0 };
        let output_level = top - depth + input_level;
        let stc_top = if stc_first {
            cfg.stc_levels
        } else {
            cfg.stc_levels + output_level
        };
        let stc = prepare(
            ev,
            &stc_factors,
            stc_top,
            cfg.stc_factors_per_level,
            compact_transforms,
            cfg.stc_babies,
        )?;
        let rejoin = match (stc_shifted, mask) {
            (Some(shifted), _) => {
                let scale = group_scale(ev, stc_top, stc[0].len())?;
                Some(Rejoin::Shifted(LinearTransform::build(
                    ev,
                    &shifted,
                    stc_top,
                    scale,
                    compact_transforms,
                    cfg.stc_babies,
                )?))
            }
            (None, Some(mask)) => Some(Rejoin::Masked(mask)),
            (None, None) => None,
        };
        let sparse = rejoin.map(|rejoin| SparsePacking {
            slots,
            sub_sum: std::iter::successors(Some(slots), |&k| Some(2 * k))
                .take_while(|&k| k < full)
                .map(|k| k as i64)
                .collect(),
            rejoin,
        });
        Ok(Self {
            cts,
            stc,
            eval_mod,
            output_level,
            input_level,
            conjugation_level: top - cfg.cts_levels,
            encapsulation: cfg.encapsulation,
            compact: cfg.compact,
            sparse,
            overflow_terms,
            coefficients,
        })
    }

    /// The weight of the sparse secret ModRaise runs under, if encapsulated.
    pub fn encapsulation(&self) -> Option<usize> {
        self.encapsulation
    }

    /// The level bootstrapped ciphertexts come out at.
    pub fn output_level(&self) -> usize {
        self.output_level
    }

    /// Whether SlotsToCoeffs runs first ([`BootstrapConfig::slots_to_coeffs_first`]).
    fn stc_first(&self) -> bool {
        self.input_level > 0
    }

    /// The level inputs are dropped to before bootstrapping (they need at least it): 0, or
    /// SlotsToCoeffs' levels under [`BootstrapConfig::slots_to_coeffs_first`]. A circuit has
    /// `output_level − input_level` levels between bootstraps.
    pub fn input_level(&self) -> usize {
        self.input_level
    }

    /// The probability that one bootstrap fails (some slot comes out wrong, not merely
    /// imprecise): that ModRaise's overflow `|I|` exceeds EvalMod's range `K` in a coefficient
    /// EvalMod reads, union-bounded over them. Per coefficient `t = I + c/q_0` is a sum of
    /// independent uniforms on `[−1/2, 1/2]`, one for `c_0` and one per non-zero of the
    /// secret (`c_1`'s coefficients are uniform mod `q_0`), rounded to the wrong multiple
    /// beyond `|t| > K + 1/2`: the exact Irwin–Hall tail (the normal one where that would
    /// cancel: dense secrets; see [`privopt_math::special::uniform_sum_tail`]). About 2^-20.5
    /// at [`BootstrapPreset::N16`] (`K = 10`, weight 32, `n = 2^16` coefficients).
    pub fn failure_probability(&self) -> f64 {
        failure_probability(self.overflow_terms, self.coefficients, self.eval_mod.k)
    }

    /// EvalMod's approximation.
    pub fn eval_mod(&self) -> &EvalMod {
        &self.eval_mod
    }

    /// Bytes held by the transforms' encoded diagonals.
    pub fn transform_bytes(&self) -> usize {
        self.transforms().map(LinearTransform::byte_len).sum()
    }

    /// The transforms, StC's shifted half included.
    fn transforms(&self) -> impl Iterator<Item = &LinearTransform> {
        let shifted = self.sparse.as_ref().and_then(|s| match &s.rejoin {
            Rejoin::Shifted(t) => Some(t),
            Rejoin::Masked(_) => None,
        });
        self.cts
            .iter()
            .chain(self.stc.iter().flatten())
            .chain(shifted)
    }

    /// The period the slots of bootstrapped ciphertexts must repeat with, under sparse
    /// packing (`None`: full packing).
    pub fn slots(&self) -> Option<usize> {
        self.sparse.as_ref().map(|s| s.slots)
    }

    /// Rotations outside the transforms, each with the level it runs at: with sparse packing,
    /// the sub-sum after ModRaise (at the top) and `rot(v, s)` (at StC's first level, or
    /// with StC first at the output level).
    fn packing_rotations(&self) -> Vec<(i64, usize)> {
        let Some(sparse) = &self.sparse else {
            return Vec::new();
        };
        // ModRaise's level: CtS runs one level per transform down to the conjugation.
        let top = self.conjugation_level + self.cts.len();
        let mut out: Vec<(i64, usize)> = sparse.sub_sum.iter().map(|&k| (k, top)).collect();
        let rejoin_level = match &sparse.rejoin {
            Rejoin::Shifted(t) => t.level(),
            Rejoin::Masked(_) => self.output_level,
        };
        out.push((sparse.slots as i64, rejoin_level));
        out
    }

    /// The rotations the bootstrap needs Galois keys for (conjugation is needed too).
    pub fn rotations(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self
            .transforms()
            .flat_map(LinearTransform::rotations)
            .chain(self.packing_rotations().into_iter().map(|(k, _)| k))
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// The Galois keys the transforms need, each with the level it is used at: CtS's at the
    /// top, the conjugation below CtS, StC's far down (so their keys are small; see
    /// [`super::SwitchingKey`]).
    pub fn key_requests(&self) -> Vec<KeyRequest> {
        let mut out: Vec<KeyRequest> = self
            .transforms()
            .flat_map(|t| {
                let level = t.level();
                t.rotations().into_iter().map(move |steps| (steps, level))
            })
            .chain(self.packing_rotations())
            .map(|(steps, level)| KeyRequest::Rotation { steps, level })
            .collect();
        out.push(KeyRequest::Conjugation {
            level: self.conjugation_level,
        });
        out
    }

    /// Every key this bootstrapper needs, made from `sk`: the relinearization key, the
    /// Galois keys of [`Bootstrapper::key_requests`] plus `extra` (a circuit's own
    /// rotations), and encapsulation keys of the configured weight (refused where not
    /// certified).
    pub fn keys(
        &self,
        sk: &SecretKey,
        extra: &[KeyRequest],
        rng: &mut impl rand::CryptoRng,
    ) -> Result<EvaluationKeys, CkksError> {
        let relin = sk.relin_key(rng);
        let ctx = sk.context();
        let mut requests = self.key_requests();
        requests.extend_from_slice(extra);
        // The Galois keys are compacted one by one, so that the full set never exists, except
        // the ones each transform uses many times: its giant step (every Horner step) and
        // its chain's stride.
        let repeated: Vec<usize> = self
            .transforms()
            .flat_map(LinearTransform::repeated_rotations)
            .map(|k| ctx.rotation_element(k))
            .collect();
        let galois =
            sk.galois_keys_with(&requests, |g| self.compact && !repeated.contains(&g), rng);
        let encapsulation = self
            .encapsulation
            .map(|weight| sk.encapsulation_keys(weight, rng))
            .transpose()?;
        // Compact keys leave the relinearization key whole: it is one key, and every EvalMod
        // product would regenerate its `a` half.
        let mut keys = EvaluationKeys {
            relin,
            galois,
            encapsulation,
        };
        if self.compact
            && let Some(e) = &mut keys.encapsulation
        {
            e.compact();
        }
        Ok(keys)
    }

    /// An evaluator holding [`Bootstrapper::keys`].
    pub fn evaluator(
        &self,
        sk: &SecretKey,
        extra: &[KeyRequest],
        rng: &mut impl rand::CryptoRng,
    ) -> Result<Evaluator, CkksError> {
        Ok(self.keys(sk, extra, rng)?.evaluator(sk.context()))
    }

    /// A fresh-level ciphertext with the slots of `ct` (dropped to
    /// [`Bootstrapper::input_level`] first if above; refused below it).
    pub fn bootstrap(&self, ev: &Evaluator, ct: &Ciphertext) -> Result<Ciphertext, CkksError> {
        Ok(self.bootstrap_timed(ev, ct)?.0)
    }

    /// [`Bootstrapper::bootstrap`] for slots up to `2^bound_log2` in magnitude. EvalMod is
    /// accurate for messages of about 1 (the sine's period is `q_0/Δ_0` messages), so the
    /// slots are divided by `2^bound_log2` on the way down to the input level (which needs
    /// `ct` above it) and multiplied back exactly afterwards (an integer product: no level).
    /// The absolute error grows by the same factor.
    pub fn bootstrap_bounded(
        &self,
        ev: &Evaluator,
        ct: &Ciphertext,
        bound_log2: u32,
    ) -> Result<Ciphertext, CkksError> {
        if bound_log2 == 0 {
            return self.bootstrap(ev, ct);
        }
        if bound_log2 > 30 {
            return Err(CkksError::InvalidParams(format!(
                "a message bound of 2^{bound_log2} is beyond bootstrapping's precision"
            )));
        }
        if ct.level() <= self.input_level {
            return Err(CkksError::LevelExhausted(format!(
                "bootstrapping slots up to 2^{bound_log2} divides them first, which needs a \
                 level above {}",
                self.input_level
            )));
        }
        let shrunk = ev.mul_const_to(ct, (-f64::from(bound_log2)).exp2(), self.input_level)?;
        let fresh = self.bootstrap(ev, &shrunk)?;
        ev.mul_int(&fresh, 1i64 << bound_log2)
    }

    /// Two bootstraps for about twice the precision (META-BTS, Bae et al., 2022): with
    /// `out = BTS(ct) = m + e_1`, the difference `ct − out` at the input level holds `−e_1`,
    /// which is small, so it is lifted by the integer `2^lift_log2` (no level) and
    /// bootstrapped too: `BTS(2^k·(ct − out)) = −2^k·e_1 + e_2`. Divided by `2^k` (one level)
    /// and added to `out`, it leaves `m + e_2/2^k`. The result is one level below [`Bootstrapper::output_level`].
    /// `lift_log2` wants `2^k·|e_1|` well below 1 (EvalMod's range): about five bits under
    /// the single bootstrap's precision. It gains where the output scale's own rounding is
    /// well below `e_1` (19.6 → 33.8 bits in the n = 2^12 test); the 128-bit presets'
    /// single bootstraps are already near that floor (docs/ckks-eval.md).
    pub fn bootstrap_precise(
        &self,
        ev: &Evaluator,
        ct: &Ciphertext,
        lift_log2: u32,
    ) -> Result<Ciphertext, CkksError> {
        if !(1..=40).contains(&lift_log2) {
            return Err(CkksError::InvalidParams(format!(
                "a META-BTS lift of 2^{lift_log2} is outside 2^1..2^40"
            )));
        }
        if self.output_level <= self.input_level {
            return Err(CkksError::LevelExhausted(
                "a second bootstrap for precision needs a level left after bootstrapping".into(),
            ));
        }
        let ct = ev.drop_to_level(ct, self.input_level)?;
        let out = self.bootstrap(ev, &ct)?;
        let residual = ev.sub(&ct, &ev.drop_to_level(&out, self.input_level)?)?;
        let lifted = ev.mul_int(&residual, 1i64 << lift_log2)?;
        let correction = self.bootstrap(ev, &lifted)?;
        let correction = ev.mul_const(&correction, (-f64::from(lift_log2)).exp2())?;
        ev.add(&out, &correction)
    }

    /// [`Bootstrapper::bootstrap`], with the seconds each phase took.
    pub fn bootstrap_timed(
        &self,
        ev: &Evaluator,
        ct: &Ciphertext,
    ) -> Result<(Ciphertext, PhaseSeconds), CkksError> {
        let ctx = ev.context();
        let level = self.input_level;
        if ct.level() < level {
            return Err(CkksError::LevelExhausted(format!(
                "this bootstrapper takes ciphertexts at level {level} or above (SlotsToCoeffs \
                 runs first), got level {}",
                ct.level()
            )));
        }
        let ct = if ct.level() > level {
            ev.drop_to_level(ct, level)?
        } else {
            ct.clone()
        };
        let want = ctx.level_scale(level);
        if ((ct.scale() - want) / want).abs() > 1e-9 {
            return Err(CkksError::ScaleMismatch(format!(
                "bootstrapping expects level {level}'s scale {want:e}, got {:e}",
                ct.scale()
            )));
        }
        let mut clock = std::time::Instant::now();
        let mut lap = || {
            let s = clock.elapsed().as_secs_f64();
            clock = std::time::Instant::now();
            s
        };
        let (ct, stc_seconds) = if self.stc_first() {
            let coeffs = self.stc_groups(ev, |first| first.apply_unscaled(ev, &ct))?;
            (coeffs, lap())
        } else {
            (ct, 0.0)
        };
        let x = match self.encapsulation {
            None => mod_raise(ev, &ct),
            Some(weight) => {
                let keys = ev
                    .encapsulation()
                    .filter(|k| k.weight == weight)
                    .ok_or_else(|| {
                        CkksError::MissingKey(format!(
                            "encapsulation keys of weight {weight} for bootstrapping"
                        ))
                    })?;
                let sparse = ev.switch_to_sparse(&ct, keys)?;
                ev.switch_key(&mod_raise(ev, &sparse), &keys.to_dense)?
            }
        };
        let mod_raise = lap();
        let parts = self.coeffs_to_slots(ev, &x)?;
        let coeffs_to_slots = lap();
        let (out, eval_mod, slots_to_coeffs) = if self.stc_first() {
            let out = self.eval_mod_to_slots(ev, &parts)?;
            (out, lap(), stc_seconds)
        } else {
            let parts = self.eval_mod_parts(ev, &parts)?;
            let eval_mod = lap();
            let out = self.slots_to_coeffs(ev, &parts)?;
            (out, eval_mod, lap())
        };
        Ok((
            out,
            PhaseSeconds {
                mod_raise,
                coeffs_to_slots,
                eval_mod,
                slots_to_coeffs,
            },
        ))
    }

    /// CoeffsToSlots of a ModRaised ciphertext: the real and imaginary parts of the
    /// (bit-reversed) coefficient pairs, each as `t/K` in real slots; two ciphertexts, or one
    /// holding both with sparse packing ([`SparsePacking`]).
    pub fn coeffs_to_slots(
        &self,
        ev: &Evaluator,
        raised: &Ciphertext,
    ) -> Result<Vec<Ciphertext>, CkksError> {
        let mut x = match &self.sparse {
            Some(sparse) => ev.rotate_and_add(raised, &sparse.sub_sum)?,
            None => raised.clone(),
        };
        for t in &self.cts {
            x = t.apply(ev, &x)?;
        }
        let conj = ev.conjugate(&x)?;
        let re = ev.add(&x, &conj)?;
        if self.sparse.is_some() {
            return Ok(vec![re]);
        }
        let im = ev.mul_by_i(&ev.sub(&conj, &x)?)?; // −i(x − x̄) = 2 Im x
        Ok(vec![re, im])
    }

    /// EvalMod of each part CoeffsToSlots made. The real and imaginary halves are
    /// independent, so on an evaluator with two or more threads they run as two tasks (their
    /// row kernels share what is left of the pool; one thread runs them in turn). Each is the
    /// same computation either way, so the result is the same to the bit.
    fn eval_mod_parts(
        &self,
        ev: &Evaluator,
        parts: &[Ciphertext],
    ) -> Result<Vec<Ciphertext>, CkksError> {
        match parts {
            [re, im] => {
                let (re, im) = ev.install(|| {
                    ring::join(
                        || self.eval_mod.apply(ev, re),
                        || self.eval_mod.apply(ev, im),
                    )
                });
                Ok(vec![re?, im?])
            }
            _ => parts.iter().map(|p| self.eval_mod.apply(ev, p)).collect(),
        }
    }

    /// With StC first, EvalMod of CtS's parts and back to the slots: the two halves are the
    /// slots' real and imaginary parts (`re + i·im`); under sparse packing the one part's
    /// `D_0`-masked output `q` gives `q + rot(q, s)` ([`SparsePacking`]).
    fn eval_mod_to_slots(
        &self,
        ev: &Evaluator,
        parts: &[Ciphertext],
    ) -> Result<Ciphertext, CkksError> {
        match (parts, &self.sparse) {
            ([v], Some(sparse)) => {
                let Rejoin::Masked(mask) = &sparse.rejoin else {
                    return Err(CkksError::InvalidParams(
                        "sparse packing with StC last has no mask to rejoin with".into(),
                    ));
                };
                let q = self.eval_mod.apply_masked(ev, v, mask)?;
                ev.add(&q, &ev.rotate(&q, sparse.slots as i64)?)
            }
            _ => combine_halves(ev, &self.eval_mod_parts(ev, parts)?),
        }
    }

    /// SlotsToCoeffs of EvalMod's outputs (as [`Bootstrapper::coeffs_to_slots`] made them)
    /// through the encoding transform, scaled back to the input's message. Not part of a
    /// SlotsToCoeffs-first bootstrap (which applies StC to its input).
    pub fn slots_to_coeffs(
        &self,
        ev: &Evaluator,
        parts: &[Ciphertext],
    ) -> Result<Ciphertext, CkksError> {
        if self.stc_first() {
            return Err(CkksError::InvalidParams(
                "this bootstrapper runs SlotsToCoeffs first, on its input, not on EvalMod's \
                 outputs"
                    .into(),
            ));
        }
        self.stc_groups(ev, |first| self.first_stc_factor(ev, first, parts))
    }

    /// StC's factors, one group per level rescaled once, the first factor applied by
    /// `first` (to the input, or to EvalMod's outputs).
    fn stc_groups(
        &self,
        ev: &Evaluator,
        first: impl FnOnce(&LinearTransform) -> Result<Ciphertext, CkksError>,
    ) -> Result<Ciphertext, CkksError> {
        let none = || CkksError::InvalidParams("SlotsToCoeffs has no factors".into());
        let mut factors = self.stc.iter().map(|group| group.iter());
        let mut group = factors.next().ok_or_else(none)?;
        let mut y = first(group.next().ok_or_else(none)?)?;
        loop {
            for t in group {
                y = t.apply_unscaled(ev, &y)?;
            }
            y = ev.rescale(&y)?;
            match factors.next() {
                Some(next) => group = next,
                None => return Ok(y),
            }
        }
    }

    /// StC's first factor `a` on EvalMod's outputs, unrescaled: on `re + i·im`, or with
    /// sparse packing on `v` and (its `A·D_1` half) on `rot(v, s)`.
    fn first_stc_factor(
        &self,
        ev: &Evaluator,
        a: &LinearTransform,
        parts: &[Ciphertext],
    ) -> Result<Ciphertext, CkksError> {
        match (parts, &self.sparse) {
            ([_, _], None) => a.apply_unscaled(ev, &combine_halves(ev, parts)?),
            ([v], Some(sparse)) => {
                let Rejoin::Shifted(a_d1) = &sparse.rejoin else {
                    return Err(CkksError::InvalidParams(
                        "sparse packing with StC first has no shifted StC factor".into(),
                    ));
                };
                let shifted = ev.rotate(v, sparse.slots as i64)?;
                ev.add(
                    &a.apply_unscaled(ev, v)?,
                    &a_d1.apply_unscaled(ev, &shifted)?,
                )
            }
            _ => Err(CkksError::InvalidParams(format!(
                "SlotsToCoeffs got {} parts for this packing",
                parts.len()
            ))),
        }
    }
}

/// `re + i·im` of EvalMod's two halves (multiplying by `i` costs no level).
fn combine_halves(ev: &Evaluator, parts: &[Ciphertext]) -> Result<Ciphertext, CkksError> {
    match parts {
        [re, im] => ev.add(re, &ev.mul_by_i(im)?),
        _ => Err(CkksError::InvalidParams(format!(
            "EvalMod made {} parts, not a real and an imaginary half",
            parts.len()
        ))),
    }
}

/// `6σ` of one coefficient of ModRaise's overflow `I = (b + a·s − c)/q_0` for a secret of
/// squared norm `‖s‖²`: a sum of `‖s‖² + 1` terms uniform on `[−½, ½]`, at least 1.
/// [`Bootstrapper::failure_probability`] for EvalMod's range `k`.
fn failure_probability(overflow_terms: u32, coefficients: usize, k: f64) -> f64 {
    let tail = privopt_math::special::uniform_sum_tail(overflow_terms, k + 0.5);
    (coefficients as f64 * tail).min(1.0)
}

/// The smallest integer `K` that fails with probability at most `2^-bits` per bootstrap.
fn range_for_failure(
    overflow_terms: u32,
    coefficients: usize,
    bits: f64,
) -> Result<f64, CkksError> {
    const MAX_K: u32 = 4096;
    if !(1.0..=256.0).contains(&bits) {
        return Err(CkksError::InvalidParams(format!(
            "failure_bits must be in [1, 256], got {bits}"
        )));
    }
    let target = (-bits).exp2();
    (1..=MAX_K)
        .map(f64::from)
        .find(|&k| failure_probability(overflow_terms, coefficients, k) <= target)
        .ok_or_else(|| {
            CkksError::InvalidParams(format!(
                "no EvalMod range up to {MAX_K} fails below 2^-{bits} for this secret"
            ))
        })
}

fn overflow_bound(secret_norm2: f64) -> f64 {
    (6.0 * ((secret_norm2 + 1.0) / 12.0).sqrt()).ceil().max(1.0)
}

/// Levels EvalMod uses, measured by a dry run on an encryption of zero under a throwaway key
/// (the polynomial's depth depends on its coefficients, not only its degree), starting where
/// it will run: below CtS. Fails when too few levels are left for it.
fn eval_mod_depth(
    ctx: &Arc<EvalContext>,
    m: &EvalMod,
    cts_levels: usize,
) -> Result<usize, CkksError> {
    let start = ctx.max_level().checked_sub(cts_levels).ok_or_else(|| {
        CkksError::LevelExhausted(format!(
            "CoeffsToSlots' {cts_levels} levels exceed the {} available",
            ctx.max_level()
        ))
    })?;
    let mut rng = privopt_math::sample::secret_rng(Some(0));
    let sk = SecretKey::generate(ctx, &mut rng);
    let dry = Evaluator::new(ctx, Some(sk.relin_key(&mut rng)), GaloisKeys::default());
    let zero = sk.encrypt(&super::encode::encode(ctx, &[0.0], start)?, &mut rng)?;
    let out = m.apply(&dry, &zero).map_err(|e| match e {
        CkksError::LevelExhausted(why) => CkksError::LevelExhausted(format!(
            "EvalMod does not fit in the {start} levels left after CoeffsToSlots: {why}"
        )),
        other => other,
    })?;
    Ok(start - out.level())
}

/// The factors as transforms, `per_level` of them at each of the levels `top, top − 1, …`
/// (each group's plaintexts at [`group_scale`], so one rescale closes the group).
fn prepare(
    ev: &Evaluator,
    factors: &[dft::Diagonals],
    top: usize,
    per_level: usize,
    compact: bool,
    babies: BabySteps,
) -> Result<Vec<Vec<LinearTransform>>, CkksError> {
    factors
        .chunks(per_level)
        .enumerate()
        .map(|(g, group)| {
            let level = top - g;
            let scale = group_scale(ev, level, group.len())?;
            group
                .iter()
                .map(|f| LinearTransform::build(ev, f, level, scale, compact, babies))
                .collect()
        })
        .collect()
}

/// The diagonals' scale for `m` factors applied at `level` and rescaled once: the `m`-th root
/// of the level's product scale.
fn group_scale(ev: &Evaluator, level: usize, m: usize) -> Result<f64, CkksError> {
    Ok(ev.product_scale(level)?.powf(1.0 / m as f64))
}

/// ModRaise: the level-0 ciphertext's components lifted to every prime (centred in `(−q_0/2, q_0/2]`),
/// at the top level with the top level's scale: its slots read `(c + q_0 I)/Δ_L`.
pub fn mod_raise(ev: &Evaluator, ct: &Ciphertext) -> Ciphertext {
    let ctx = ev.context();
    let (n, top) = (ctx.n(), ctx.max_level());
    let all: Vec<usize> = (0..=top).collect();
    let q0 = ctx.primes[0];
    let raise = |c: &[u64]| {
        let mut row = c[..n].to_vec();
        ring::inverse(ctx, &mut row, &[0]);
        let signed: Vec<i64> = row
            .iter()
            .map(|&x| privopt_math::modarith::center(x, q0))
            .collect();
        let mut out = ring::from_signed(ctx, &signed, &all);
        ring::forward(ctx, &mut out, &all);
        out
    };
    Ciphertext {
        c0: raise(&ct.c0),
        c1: raise(&ct.c1),
        level: top,
        scale: ctx.level_scale(top),
        params: ct.params,
        key: ct.key,
    }
}
