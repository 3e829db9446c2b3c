//! CKKS parameters and their security check.
//!
//! The ciphertext modulus `q` is realised in RNS as a product of NTT-friendly primes below
//! 2^50 (so the NTT takes its IFMA fast path): the paper's `(n = 4096, log2 q ≈ 109)` is three
//! primes of 37, 36 and 36 bits, and `(n = 8192, log2 q ≈ 218)` is five primes of 44, 44, 44,
//! 43 and 43 bits. Each prime is the largest `p < 2^bits` with `p ≡ 1 mod 2n`, so
//! `log2 q` is just under the sum of the bit sizes, i.e. within the standard's bound.

use std::collections::BTreeMap;
use std::sync::Arc;

use privopt_math::ntt::NttBackend;
use privopt_math::rns::RnsBasis;
use privopt_math::sample::DiscreteGaussian;
use privopt_math::sample::MAX_WIDE_SIGMA_LOG2;
use sha2::{Digest, Sha256};

use crate::error::CkksError;

/// Most RNS primes (ciphertext and special together) a parameter set may name.
pub const MAX_PRIMES: usize = 256;

/// The homomorphic-encryption standard's maximum `log2 q` for 128-bit classical security
/// with a ternary secret. Entries for 2^16 and 2^17 are not in the standard: they extend its
/// (almost exactly) doubling pattern and are marked as such in errors and docs.
pub const HE_STANDARD_128: &[(usize, u32)] = &[
    (1 << 10, 27),
    (1 << 11, 54),
    (1 << 12, 109),
    (1 << 13, 218),
    (1 << 14, 438),
    (1 << 15, 881),
    (1 << 16, 1762),
    (1 << 17, 3524),
];

/// 128-bit points for sparse ternary secrets: `(n, h, max log2 q)` — a secret of at least `h`
/// non-zeros in degree `n` under a modulus of at most `2^{max}`. The HE standard's table does
/// not cover sparse secrets; these are the sets whose security Bossuat, Troncoso-Pastoriza
/// and Hubaux estimated with the lattice estimator, hybrid attacks included (ePrint 2022/024,
/// Lattigo's default bootstrapping parameters): their `h = 32` ephemeral secret lives modulo
/// `q_0·p_0` (40 + 56 bits at `2^15`, 60 + 61 at `2^16`), their `h = 192` main secrets under
/// the whole `Q·P`. privopt certifies nothing beyond them: a larger modulus or a smaller weight
/// is refused. (Security only grows as the modulus shrinks or the weight grows towards `n/2`.)
pub const SPARSE_128: &[(usize, usize, u32)] = &[
    (1 << 15, 32, 96),
    (1 << 16, 32, 121),
    (1 << 15, 192, 768),
    (1 << 16, 192, 1553),
];

/// The largest `log2 q` [`SPARSE_128`] certifies for a sparse secret of weight `h` in degree
/// `n`, if any.
pub fn sparse_max_log_q(n: usize, h: usize) -> Option<u32> {
    SPARSE_128
        .iter()
        .filter(|&&(m, w, _)| m == n && w <= h)
        .map(|&(_, _, max)| max)
        .max()
}

/// The law of each secret-key coefficient.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SecretDistribution {
    /// Uniform in {−1, 1} (Bernoulli(½) signs): the EEZOFL paper's choice. Variance 1.
    #[default]
    Signs,
    /// Uniform in {−1, 0, 1}: the standard's assumption. Variance 2/3.
    Ternary,
    /// Exactly `h` coefficients ±1, the rest 0 (bootstrapping's small ModRaise overflow).
    /// The standard's table does not cover sparse secrets: such parameters build only within
    /// [`SPARSE_128`]'s points, or with `insecure_for_testing`.
    Sparse(usize),
}

impl SecretDistribution {
    /// Variance of one coefficient in a ring of degree `n`.
    pub fn variance(self, n: usize) -> f64 {
        match self {
            SecretDistribution::Signs => 1.0,
            SecretDistribution::Ternary => 2.0 / 3.0,
            SecretDistribution::Sparse(h) => h as f64 / n as f64,
        }
    }

    /// The fingerprint's encoding of the law (one byte for the dense laws, as before the
    /// sparse one existed, so their fingerprints did not change).
    fn tag(self) -> Vec<u8> {
        match self {
            SecretDistribution::Signs => vec![0],
            SecretDistribution::Ternary => vec![1],
            SecretDistribution::Sparse(h) => {
                let mut out = vec![2];
                out.extend((h as u64).to_le_bytes());
                out
            }
        }
    }
}

/// Validated CKKS parameters, shared by every party (`Arc`).
#[derive(Debug)]
pub struct CkksParams {
    basis: RnsBasis,
    /// `Q · P`: the ciphertext primes followed by the key-switching (special) primes.
    key_basis: RnsBasis,
    special: usize,
    digits: usize,
    scale_log2: u32,
    /// `Δ_0 … Δ_L`, the scale a ciphertext has at each level.
    level_scales: Vec<f64>,
    error: DiscreteGaussian,
    secret: SecretDistribution,
    smudging_log2: f64,
    insecure: bool,
    fingerprint: [u8; 32],
}

/// Builder for [`CkksParams`].
#[derive(Clone, Debug)]
pub struct CkksParamsBuilder {
    n: usize,
    prime_bits: Vec<u32>,
    /// Rescaling primes chosen from the level scales (see [`CkksParamsBuilder::leveled`] and
    /// [`CkksParamsBuilder::profiled`]), after the base prime.
    chain: Option<Chain>,
    /// Levels rescaled only after plaintext products, with their prime sizes (see
    /// [`CkksParamsBuilder::linear_level`]).
    linear: BTreeMap<usize, u32>,
    special_bits: Vec<u32>,
    digits: Option<usize>,
    scale_log2: u32,
    error_sigma: f64,
    secret: SecretDistribution,
    smudging_log2: f64,
    insecure_for_testing: bool,
    backend: NttBackend,
}

/// Smallest key error σ without `insecure_for_testing`: the HE standard's 3.19 (≈ 8/√(2π)).
pub const MIN_ERROR_SIGMA: f64 = 3.19;

/// Smallest decryption-share smudging (log2 σ*) without `insecure_for_testing`: each share's
/// flooding noise must dominate the ciphertext noise it hides (docs/mkckks.md).
pub const MIN_SMUDGING_LOG2: f64 = 20.0;

/// Default decryption-share smudging: σ* = 2^20 (see `docs/mkckks.md` for the rationale).
pub const DEFAULT_SMUDGING_LOG2: f64 = 20.0;

impl CkksParamsBuilder {
    /// Ring degree `n` and the bit sizes of the RNS primes; defaults: scale 2^40, σ = 3.2,
    /// sign secrets, smudging σ* = 2^20, security check on.
    pub fn new(n: usize, prime_bits: &[u32]) -> Self {
        Self {
            n,
            prime_bits: prime_bits.to_vec(),
            chain: None,
            linear: BTreeMap::new(),
            special_bits: Vec::new(),
            digits: None,
            scale_log2: 40,
            error_sigma: 3.2,
            secret: SecretDistribution::Signs,
            smudging_log2: DEFAULT_SMUDGING_LOG2,
            insecure_for_testing: false,
            backend: NttBackend::Fast,
        }
    }

    /// A leveled evaluation set: a base prime `q_0` of `base_bits` bits, `levels` rescaling
    /// primes and key-switching primes of the given sizes. The rescaling primes are chosen from
    /// the top level down, each the NTT-friendly prime nearest to the scale its level will
    /// have (`Δ_{l−1} = Δ_l² / q_l`), so every level's scale stays within a hair of `2^scale_log2`
    /// instead of drifting with the squared ratio at each rescale.
    pub fn leveled(
        n: usize,
        base_bits: u32,
        scale_log2: u32,
        levels: usize,
        special_bits: &[u32],
    ) -> Self {
        let mut b = Self::new(n, &[base_bits]);
        b.chain = Some(Chain::Uniform(levels));
        b.scale_log2 = scale_log2;
        b.special_bits = special_bits.to_vec();
        b
    }

    /// A leveled set whose scale follows a profile: `scales_log2[l]` is the target `log2 Δ_l`
    /// for levels `0 … L` (so `L = scales_log2.len() − 1`). Each rescaling prime is the
    /// NTT-friendly prime nearest `Δ_l² / 2^{scales_log2[l−1]}`, chosen from the top down on
    /// the scales actually reached. Bootstrapping wants this: large scales where CtS and
    /// EvalMod run, small ones for the user's levels. A profile may fall by at most
    /// `60 − log2 Δ_l` bits per level (primes stop at 60 bits).
    pub fn profiled(n: usize, base_bits: u32, scales_log2: &[u32], special_bits: &[u32]) -> Self {
        let mut b = Self::new(n, &[base_bits]);
        b.chain = Some(Chain::Profile(scales_log2.to_vec()));
        b.scale_log2 = scales_log2.last().copied().unwrap_or(0);
        b.special_bits = special_bits.to_vec();
        b
    }

    /// Marks level `level` of a scale profile as *linear*: only plaintext products (a linear
    /// transform's diagonals, whose scale is free) are rescaled there, so its prime need not
    /// be `Δ_l² / Δ_{l−1}`. It is the NTT-friendly prime nearest `2^prime_bits`, and
    /// `Δ_{l−1}` is exactly the profile's target: a plaintext at scale `Δ_{l−1} q_l / Δ_l`
    /// lands a product there. Bootstrapping's SlotsToCoeffs wants this: a 60-bit prime
    /// holds two transform factors of 30-bit plaintexts and drops the scale from EvalMod's
    /// to the user's. A ciphertext product at such a level comes out at its true scale, which
    /// the evaluator then refuses to add to the level's nominal one.
    pub fn linear_level(mut self, level: usize, prime_bits: u32) -> Self {
        self.linear.insert(level, prime_bits);
        self
    }

    /// Key-switching (special) primes `P` of the given sizes, for hybrid key switching.
    pub fn special_primes(mut self, bits: &[u32]) -> Self {
        self.special_bits = bits.to_vec();
        self
    }

    /// Number of digits `dnum` of the hybrid key-switching decomposition (default: as many as
    /// make each digit no wider than `P`, i.e. `⌈#q / #p⌉`).
    pub fn digits(mut self, v: usize) -> Self {
        self.digits = Some(v);
        self
    }

    /// Encoding scale `Λ = 2^scale_log2`.
    pub fn scale_log2(mut self, v: u32) -> Self {
        self.scale_log2 = v;
        self
    }

    /// Standard deviation of the RLWE error.
    pub fn error_sigma(mut self, v: f64) -> Self {
        self.error_sigma = v;
        self
    }

    /// Secret-key distribution.
    pub fn secret(mut self, v: SecretDistribution) -> Self {
        self.secret = v;
        self
    }

    /// `log2` of the standard deviation of the decryption-share smudging noise.
    pub fn smudging_log2(mut self, v: f64) -> Self {
        self.smudging_log2 = v;
        self
    }

    /// Accept parameters beyond the 128-bit bound (tests and toy examples only).
    pub fn insecure_for_testing(mut self, v: bool) -> Self {
        self.insecure_for_testing = v;
        self
    }

    /// NTT implementation.
    pub fn backend(mut self, v: NttBackend) -> Self {
        self.backend = v;
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Arc<CkksParams>, CkksError> {
        let invalid = |m: String| Err(CkksError::InvalidParams(m));
        // The security table ends at 2^17; anything that is not a power of two (0 included)
        // would break the NTT and the slot encoding.
        if !self.n.is_power_of_two() || !(8..=1 << 17).contains(&self.n) {
            return invalid(format!(
                "ring degree {} is not a power of two in 8..=131072",
                self.n
            ));
        }
        if self.prime_bits.is_empty() {
            return invalid("at least one RNS prime is needed".into());
        }
        if let Some(b) = self
            .prime_bits
            .iter()
            .chain(&self.special_bits)
            .find(|&&b| !(20..=60).contains(&b))
        {
            return invalid(format!("prime size {b} bits is outside 20..=60"));
        }
        if !(1..=60).contains(&self.scale_log2) {
            return invalid(format!("scale 2^{} is outside 2^1..=2^60", self.scale_log2));
        }
        if !(0.0..=MAX_WIDE_SIGMA_LOG2).contains(&self.smudging_log2) {
            return invalid(format!(
                "smudging 2^{} is outside 2^0..=2^{MAX_WIDE_SIGMA_LOG2}",
                self.smudging_log2
            ));
        }
        if !self.insecure_for_testing && self.error_sigma < MIN_ERROR_SIGMA {
            return Err(CkksError::WeakNoise(format!(
                "error σ = {} is below the HE standard's {MIN_ERROR_SIGMA}",
                self.error_sigma
            )));
        }
        if !self.insecure_for_testing && self.smudging_log2 < MIN_SMUDGING_LOG2 {
            return Err(CkksError::WeakNoise(format!(
                "decryption-share smudging 2^{} is below 2^{MIN_SMUDGING_LOG2} (docs/mkckks.md)",
                self.smudging_log2
            )));
        }
        if let SecretDistribution::Sparse(h) = self.secret
            && (h == 0 || h > self.n)
        {
            return invalid(format!("sparse secret weight {h} is not in 1..={}", self.n));
        }
        let count = self.prime_bits.len() + self.special_bits.len();
        if count > MAX_PRIMES {
            return invalid(format!(
                "{count} RNS primes; at most {MAX_PRIMES} (2^17 at 128-bit holds about 60)"
            ));
        }
        // A b-bit prime exceeds 2^(b−1): refuse a modulus the standard forbids before
        // searching for its primes (thousands of them take minutes to find).
        let at_least: u32 = self
            .prime_bits
            .iter()
            .chain(&self.special_bits)
            .map(|b| b - 1)
            .sum();
        let table = HE_STANDARD_128.iter().find(|(n, _)| *n == self.n);
        let sparse = matches!(self.secret, SecretDistribution::Sparse(_));
        if let Some(&(_, max)) = table
            && !self.insecure_for_testing
            && !sparse
            && at_least > max
        {
            return Err(CkksError::Insecure {
                n: self.n,
                log_q: f64::from(at_least),
                max_log_q: max,
            });
        }
        let error = DiscreteGaussian::new(self.error_sigma)?;
        // Distinct primes: take sizes in decreasing order, avoiding those already chosen.
        let mut primes: Vec<u64> = Vec::new();
        for &bits in &self.prime_bits {
            let p = privopt_math::modarith::ntt_primes(self.n, bits, 1, &primes)?;
            primes.extend(p);
        }
        if let Some(chain) = &self.chain {
            primes.extend(chain_primes(
                self.n,
                self.scale_log2,
                chain,
                &self.linear,
                &primes,
            )?);
        } else if !self.linear.is_empty() {
            return invalid("linear levels need a scale profile".into());
        }
        let mut special: Vec<u64> = Vec::new();
        for &bits in &self.special_bits {
            let avoid: Vec<u64> = primes.iter().chain(&special).copied().collect();
            special.extend(privopt_math::modarith::ntt_primes(self.n, bits, 1, &avoid)?);
        }
        let digits = match self.digits {
            Some(d) if d == 0 || d > primes.len() => {
                return invalid(format!(
                    "{d} key-switching digits for {} ciphertext primes",
                    primes.len()
                ));
            }
            Some(d) => d,
            None => primes.len().div_ceil(special.len().max(1)),
        };
        if !special.is_empty() && digits < primes.len().div_ceil(special.len()) {
            // Fewer digits than that makes a digit wider than P: key switching would amplify
            // the noise by Q_j / P instead of shrinking it.
            let wide = primes.len().div_ceil(digits);
            return invalid(format!(
                "{digits} digits put {wide} ciphertext primes in a digit but P has only {}",
                special.len()
            ));
        }
        let basis = RnsBasis::new(self.n, &primes, self.backend)?;
        let key_basis = basis.extended(&special)?;
        // The standard bounds the whole key modulus Q·P.
        let log_q = key_basis.log_modulus();
        let max = match self.secret {
            SecretDistribution::Sparse(h) => sparse_max_log_q(self.n, h),
            _ => HE_STANDARD_128
                .iter()
                .find(|(n, _)| *n == self.n)
                .map(|(_, m)| *m),
        };
        match max {
            Some(m) if log_q <= f64::from(m) => {}
            _ if self.insecure_for_testing => {}
            _ => {
                return Err(CkksError::Insecure {
                    n: self.n,
                    log_q,
                    max_log_q: max.unwrap_or(0),
                });
            }
        }
        // Room for the message: the scale must sit well below q.
        if f64::from(self.scale_log2) + 10.0 > log_q {
            return invalid(format!(
                "scale 2^{} leaves no room below q = 2^{log_q:.1}",
                self.scale_log2
            ));
        }
        // A fused decryption carries the smudging of every share: ten bits under Q leaves
        // room for a thousand shares at 3σ; beyond that every decryption would wrap.
        if self.smudging_log2 + 10.0 > basis.log_modulus() {
            return invalid(format!(
                "smudging 2^{} leaves no room below Q = 2^{:.1}",
                self.smudging_log2,
                basis.log_modulus()
            ));
        }
        let mut h = Sha256::new();
        h.update(b"privopt/ckks/params/v1");
        h.update((self.n as u64).to_le_bytes());
        for p in primes.iter().chain(&special) {
            h.update(p.to_le_bytes());
        }
        h.update((special.len() as u64).to_le_bytes());
        h.update((digits as u64).to_le_bytes());
        h.update(self.scale_log2.to_le_bytes());
        h.update(self.error_sigma.to_le_bytes());
        h.update(self.secret.tag());
        h.update(self.smudging_log2.to_le_bytes());
        // Linear levels set scales the primes do not imply (absent: fingerprints as before).
        if let Some(Chain::Profile(targets)) = &self.chain {
            for &l in self.linear.keys() {
                h.update((l as u64).to_le_bytes());
                h.update(targets[l - 1].to_le_bytes());
            }
        }
        let level_scales = level_scales(
            self.scale_log2,
            basis.moduli(),
            self.chain.as_ref(),
            &self.linear,
        );
        Ok(Arc::new(CkksParams {
            level_scales,
            basis,
            key_basis,
            special: special.len(),
            digits,
            scale_log2: self.scale_log2,
            error,
            secret: self.secret,
            smudging_log2: self.smudging_log2,
            insecure: self.insecure_for_testing,
            fingerprint: h.finalize().into(),
        }))
    }
}

/// How the rescaling primes follow the level scales.
#[derive(Clone, Debug)]
enum Chain {
    /// `levels` primes, each nearest its level's scale, so the scale stays put.
    Uniform(usize),
    /// Target `log2 Δ_l` for levels `0 … L`.
    Profile(Vec<u32>),
}

/// Rescaling primes `q_L, …, q_1` (returned as `q_1, …, q_L`) from `Δ_L = 2^scale_log2` down,
/// with `Δ_{l−1} = Δ_l² / q_l`: each the NTT-friendly prime nearest `Δ_l` (uniform) or nearest
/// `Δ_l² / 2^{target_{l−1}}` (profile); a linear level's prime is the one nearest its given
/// size, and the scale below it is exactly the target.
fn chain_primes(
    n: usize,
    scale_log2: u32,
    chain: &Chain,
    linear: &BTreeMap<usize, u32>,
    avoid: &[u64],
) -> Result<Vec<u64>, CkksError> {
    let levels = match chain {
        Chain::Uniform(levels) => *levels,
        Chain::Profile(targets) => {
            if targets.len() < 2 {
                return Err(CkksError::InvalidParams(
                    "a scale profile needs targets for level 0 and at least one level above".into(),
                ));
            }
            targets.len() - 1
        }
    };
    if let Some(&l) = linear
        .keys()
        .find(|&&l| !matches!(chain, Chain::Profile(_)) || l == 0 || l > levels)
    {
        return Err(CkksError::InvalidParams(format!(
            "linear level {l} is not a level 1..={levels} of a scale profile"
        )));
    }
    let mut chosen: Vec<u64> = Vec::with_capacity(levels);
    let mut scale = 2f64.powi(scale_log2 as i32);
    for l in (1..=levels).rev() {
        let taken: Vec<u64> = avoid.iter().chain(&chosen).copied().collect();
        if let (Some(&bits), Chain::Profile(targets)) = (linear.get(&l), chain) {
            let q = privopt_math::modarith::ntt_prime_near(n, 2f64.powi(bits as i32), &taken)?;
            let below = 2f64.powi(targets[l - 1] as i32);
            let plaintext = below * q as f64 / scale;
            if plaintext < 2f64.powi(20) {
                return Err(CkksError::InvalidParams(format!(
                    "linear level {l}: a {bits}-bit prime from scale 2^{:.1} to 2^{} leaves \
                     plaintexts a scale of 2^{:.1}, below 2^20",
                    scale.log2(),
                    targets[l - 1],
                    plaintext.log2()
                )));
            }
            chosen.push(q);
            scale = below;
            continue;
        }
        let want = match chain {
            Chain::Uniform(_) => scale,
            Chain::Profile(targets) => scale * scale / 2f64.powi(targets[l - 1] as i32),
        };
        // A target a rounding error above 2^60 (a profile rising by the most it can) takes
        // the prime just below: the realized scale misses its target by a hair.
        if matches!(chain, Chain::Profile(_)) && !(2f64.powi(20)..=2f64.powf(60.01)).contains(&want)
        {
            return Err(CkksError::InvalidParams(format!(
                "level {l} would need a prime near 2^{:.1}; primes are 20 to 60 bits, so the \
                 scale profile changes too fast there",
                want.log2()
            )));
        }
        let want = match chain {
            Chain::Profile(_) => want.min(2f64.powi(60) - 2f64.powi(45)),
            Chain::Uniform(_) => want,
        };
        let q = privopt_math::modarith::ntt_prime_near(n, want, &taken)?;
        chosen.push(q);
        scale = scale * scale / q as f64;
    }
    chosen.reverse();
    Ok(chosen)
}

/// `Δ_0 … Δ_L` for the chosen primes: `Δ_L = 2^scale_log2`, `Δ_{l−1} = Δ_l² / q_l`, except
/// below a linear level, where it is the profile's target.
fn level_scales(
    scale_log2: u32,
    primes: &[u64],
    chain: Option<&Chain>,
    linear: &BTreeMap<usize, u32>,
) -> Vec<f64> {
    let top = primes.len() - 1;
    let mut scales = vec![2f64.powi(scale_log2 as i32); top + 1];
    for l in (1..=top).rev() {
        scales[l - 1] = match (chain, linear.contains_key(&l)) {
            (Some(Chain::Profile(targets)), true) => 2f64.powi(targets[l - 1] as i32),
            _ => scales[l] * scales[l] / primes[l] as f64,
        };
    }
    scales
}

impl CkksParams {
    /// The paper's first set: n = 4096, log2 q ≈ 109 (primes of 37 + 36 + 36 bits), Λ = 2^40.
    pub fn paper_n4096() -> Result<Arc<CkksParams>, CkksError> {
        CkksParamsBuilder::new(4096, &[37, 36, 36]).build()
    }

    /// The paper's second set: n = 8192, log2 q ≈ 218 (primes of 44·3 + 43·2 bits), Λ = 2^40.
    pub fn paper_n8192() -> Result<Arc<CkksParams>, CkksError> {
        CkksParamsBuilder::new(8192, &[44, 44, 44, 43, 43]).build()
    }

    /// The RNS basis of `q`.
    pub fn basis(&self) -> &RnsBasis {
        &self.basis
    }

    /// The basis of `Q·P` (ciphertext primes, then the special primes), for evaluation keys.
    pub fn key_basis(&self) -> &RnsBasis {
        &self.key_basis
    }

    /// Number of special (key-switching) primes.
    pub fn special_count(&self) -> usize {
        self.special
    }

    /// Number of digits of the hybrid key-switching decomposition.
    pub fn digits(&self) -> usize {
        self.digits
    }

    /// The ciphertext primes of each key-switching digit (contiguous, in order).
    pub fn digit_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let q_count = self.basis.moduli().len();
        let per_digit = q_count.div_ceil(self.digits.max(1));
        (0..q_count)
            .step_by(per_digit)
            .map(|s| s..(s + per_digit).min(q_count))
            .collect()
    }

    /// Highest level: the number of ciphertext primes minus one.
    pub fn max_level(&self) -> usize {
        self.basis.moduli().len() - 1
    }

    /// Ring degree.
    pub fn n(&self) -> usize {
        self.basis.n()
    }

    /// `log2 Λ`.
    pub fn scale_log2(&self) -> u32 {
        self.scale_log2
    }

    /// `Λ`.
    pub fn scale(&self) -> f64 {
        2f64.powi(self.scale_log2 as i32)
    }

    /// `Δ_level`: the scale of a ciphertext at `level` (`Λ` at the top).
    pub fn level_scale(&self, level: usize) -> f64 {
        self.level_scales[level]
    }

    /// The RLWE error sampler.
    pub fn error(&self) -> &DiscreteGaussian {
        &self.error
    }

    /// Secret-key distribution.
    pub fn secret(&self) -> SecretDistribution {
        self.secret
    }

    /// `log2 σ*` of the smudging noise.
    pub fn smudging_log2(&self) -> f64 {
        self.smudging_log2
    }

    /// Whether the security check was waived.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// SHA-256 of everything that defines the parameters; messages carry it.
    pub fn fingerprint(&self) -> &[u8; 32] {
        &self.fingerprint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_sets_are_within_the_standard() {
        let a = CkksParams::paper_n4096().unwrap();
        assert_eq!(a.basis().moduli().len(), 3);
        assert!(a.basis().log_modulus() <= 109.0 && a.basis().log_modulus() > 108.0);
        let b = CkksParams::paper_n8192().unwrap();
        assert_eq!(b.basis().moduli().len(), 5);
        assert!(b.basis().log_modulus() <= 218.0 && b.basis().log_modulus() > 217.0);
        assert!(b.basis().moduli().iter().all(|&q| q < 1 << 50));
        assert_ne!(a.fingerprint(), b.fingerprint());
    }

    /// Finding 5 of the third adversarial pass: 3000 primes were searched for (43 s) before the
    /// set was refused as insecure. Now the size is refused first, and the count always.
    #[test]
    fn oversized_prime_lists_are_refused_before_any_prime_search() {
        let e = CkksParamsBuilder::new(1 << 15, &[50; 3000])
            .build()
            .unwrap_err();
        assert!(matches!(e, CkksError::InvalidParams(_)), "{e}");
        let e = CkksParamsBuilder::new(1 << 15, &[50; 200])
            .build()
            .unwrap_err();
        assert!(
            matches!(e, CkksError::Insecure { max_log_q: 881, .. }),
            "{e}"
        );
        let e = CkksParamsBuilder::new(1 << 15, &[50; 3000])
            .insecure_for_testing(true)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("at most 256"), "{e}");
    }

    #[test]
    fn sparse_secrets_need_the_opt_in_and_a_weight_in_range() {
        // Within the dense table's bound, but no sparse point covers n = 4096.
        let e = CkksParamsBuilder::new(4096, &[36, 36, 36])
            .secret(SecretDistribution::Sparse(64))
            .build()
            .unwrap_err();
        assert!(matches!(e, CkksError::Insecure { max_log_q: 0, .. }), "{e}");
        let ok = CkksParamsBuilder::new(4096, &[36, 36, 36])
            .secret(SecretDistribution::Sparse(64))
            .insecure_for_testing(true)
            .build()
            .unwrap();
        let dense = CkksParamsBuilder::new(4096, &[36, 36, 36]).build().unwrap();
        assert_ne!(ok.fingerprint(), dense.fingerprint());
        for h in [0, 4097] {
            assert!(
                CkksParamsBuilder::new(4096, &[36, 36, 36])
                    .secret(SecretDistribution::Sparse(h))
                    .insecure_for_testing(true)
                    .build()
                    .is_err()
            );
        }
    }

    #[test]
    fn sparse_points_certify_what_they_cover_and_nothing_more() {
        assert_eq!(sparse_max_log_q(1 << 15, 192), Some(768));
        assert_eq!(sparse_max_log_q(1 << 15, 1000), Some(768));
        assert_eq!(sparse_max_log_q(1 << 15, 64), Some(96));
        assert_eq!(sparse_max_log_q(1 << 15, 31), None);
        assert_eq!(sparse_max_log_q(1 << 14, 192), None);
        let sparse = |primes: usize| {
            CkksParamsBuilder::new(1 << 15, &vec![60; primes])
                .secret(SecretDistribution::Sparse(192))
                .build()
        };
        assert!(sparse(12).is_ok()); // 720 bits
        let e = sparse(13).unwrap_err(); // 780 bits
        assert!(
            matches!(e, CkksError::Insecure { max_log_q: 768, .. }),
            "{e}"
        );
    }

    #[test]
    fn a_linear_level_takes_its_prime_size_and_lands_on_its_target() {
        let profile = [30, 30, 50, 50];
        // 50 → 30 in one level needs a 70-bit prime under the squared rule.
        let e = CkksParamsBuilder::profiled(4096, 40, &profile, &[60])
            .insecure_for_testing(true)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("changes too fast"), "{e}");
        let p = CkksParamsBuilder::profiled(4096, 40, &profile, &[60])
            .linear_level(2, 60)
            .insecure_for_testing(true)
            .build()
            .unwrap();
        let q2 = p.basis().moduli()[2] as f64;
        assert!((q2.log2() - 60.0).abs() < 0.01, "{}", q2.log2());
        assert_eq!(p.level_scale(1), 2f64.powi(30));
        // Below it the squared rule again: Δ_0 = Δ_1² / q_1 with q_1 nearest 2^30.
        let q1 = p.basis().moduli()[1] as f64;
        assert_eq!(p.level_scale(0), p.level_scale(1).powi(2) / q1);
        let other = CkksParamsBuilder::profiled(4096, 40, &[30, 30, 50, 50], &[60])
            .linear_level(2, 59)
            .insecure_for_testing(true)
            .build()
            .unwrap();
        assert_ne!(p.fingerprint(), other.fingerprint());
        // Not a level of the profile, or a plaintext scale with no room left.
        for (level, bits) in [(0, 60), (4, 60), (2, 20)] {
            assert!(
                CkksParamsBuilder::profiled(4096, 40, &profile, &[60])
                    .linear_level(2, 60)
                    .linear_level(level, bits)
                    .insecure_for_testing(true)
                    .build()
                    .is_err(),
                "level {level}, {bits} bits"
            );
        }
    }

    #[test]
    fn insecure_sets_are_rejected_unless_waived() {
        let e = CkksParamsBuilder::new(4096, &[40, 40, 40])
            .build()
            .unwrap_err();
        assert!(
            matches!(
                e,
                CkksError::Insecure {
                    n: 4096,
                    max_log_q: 109,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("insecure_for_testing"));
        let e = CkksParamsBuilder::new(8192, &[60, 60, 60, 45])
            .build()
            .unwrap_err();
        assert!(matches!(
            e,
            CkksError::Insecure {
                n: 8192,
                max_log_q: 218,
                ..
            }
        ));
        // n = 512 has no 128-bit entry at all.
        assert!(matches!(
            CkksParamsBuilder::new(512, &[30]).build(),
            Err(CkksError::Insecure { .. })
        ));
        let p = CkksParamsBuilder::new(4096, &[40, 40, 40])
            .insecure_for_testing(true)
            .build()
            .unwrap();
        assert!(p.is_insecure());
        // 2^14 and 2^15 bounds.
        assert!(CkksParamsBuilder::new(1 << 14, &[50; 8]).build().is_ok());
        assert!(CkksParamsBuilder::new(1 << 14, &[50; 9]).build().is_err());
        assert!(CkksParamsBuilder::new(1 << 15, &[55; 16]).build().is_ok());
        for n in [0, 3, 6000, 1 << 18, 1 << 63] {
            assert!(matches!(
                CkksParamsBuilder::new(n, &[40]).build(),
                Err(CkksError::InvalidParams(_))
            ));
        }
        assert!(CkksParamsBuilder::new(1 << 15, &[56; 16]).build().is_err());
    }

    #[test]
    fn inconsistent_sets_are_invalid() {
        assert!(matches!(
            CkksParamsBuilder::new(4096, &[]).build(),
            Err(CkksError::InvalidParams(_))
        ));
        assert!(matches!(
            CkksParamsBuilder::new(4096, &[70]).build(),
            Err(CkksError::InvalidParams(_))
        ));
        assert!(matches!(
            CkksParamsBuilder::new(4096, &[36, 36, 36])
                .scale_log2(100)
                .build(),
            Err(CkksError::InvalidParams(_))
        ));
        assert!(
            CkksParamsBuilder::new(4096, &[37, 36, 36])
                .error_sigma(0.0)
                .build()
                .is_err()
        );
        // A weak error σ or no smudging needs the same opt-in as a large modulus (both were
        // accepted silently).
        for b in [
            CkksParamsBuilder::new(4096, &[37, 36, 36]).error_sigma(0.5),
            CkksParamsBuilder::new(4096, &[37, 36, 36]).smudging_log2(0.0),
            CkksParamsBuilder::new(4096, &[37, 36, 36]).smudging_log2(19.5),
        ] {
            assert!(matches!(
                b.clone().build(),
                Err(CkksError::WeakNoise(m)) if !m.is_empty()
            ));
            assert!(b.insecure_for_testing(true).build().unwrap().is_insecure());
        }
        assert!(CkksParamsBuilder::new(4000, &[36]).build().is_err());
        // n = 0 divided by zero and n = 2^63 wrapped `2n` (both panicked).
        assert!(CkksParamsBuilder::new(0, &[36]).build().is_err());
        assert!(CkksParamsBuilder::new(1 << 63, &[36]).build().is_err());
    }
}
