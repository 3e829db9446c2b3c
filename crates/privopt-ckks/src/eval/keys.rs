//! Keys of the leveled scheme: the secret (zeroized on drop), the public key, and the
//! switching keys of hybrid key switching — relinearization (`s² → s`) and Galois keys
//! (`σ_g(s) → s`), generated only for the rotations a circuit asks for.
//!
//! A switching key from `s'` to `s` has one pair per digit `j` over `Q·P`:
//! `(−a_j·s + e_j + P·T_j·s', a_j)` with `T_j ≡ 1 mod` the primes of digit `j` and `≡ 0` mod
//! every other prime, so in RNS the term `P·T_j·s'` is `P·s'` on digit `j`'s rows and zero
//! elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use privopt_math::chacha::ChaCha20x16;
use privopt_math::sample::{signs, sparse_ternary, ternary};
use rand::{CryptoRng, Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use zeroize::Zeroize;

use super::ciphertext::{Ciphertext, KeyId, Plaintext, check_key, check_params};
use super::context::EvalContext;
use super::ring;
use crate::error::CkksError;
use crate::params::CkksParams;
use crate::params::SecretDistribution;

/// The secret key `s`, in evaluation form over `Q·P`. Wiped on drop.
pub struct SecretKey {
    pub(crate) ctx: Arc<EvalContext>,
    pub(crate) s: Vec<u64>,
    pub(crate) id: KeyId,
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.s.zeroize();
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// The public key `(b, a) = (−a·s + e, a)` over `Q`.
#[derive(Clone, Debug)]
pub struct PublicKey {
    pub(crate) ctx: Arc<EvalContext>,
    pub(crate) b: Vec<u64>,
    pub(crate) a: Vec<u64>,
    pub(crate) key: KeyId,
}

/// A hybrid key-switching key: one `(b_j, a_j)` pair per digit, over `Q_l·P` for the key's
/// level `l`. A key made at level `l` is the top-level key restricted to the primes
/// `q_0 … q_l` (and the digits that start there): it switches ciphertexts at level `l` and
/// below, and costs `(l + 1 + |P|)/(L + 1 + |P|)` of the top-level key's rows in each of
/// fewer digits. Bootstrapping's SlotsToCoeffs and a training circuit's rotations run far
/// below the top, so their keys are made at their level.
#[derive(Clone, Debug)]
pub struct SwitchingKey {
    /// `b_j` of each digit, rows `q_0 … q_level` then `P`.
    pub(crate) b: Vec<Vec<u64>>,
    /// `a_j` of each digit, if kept in memory; a compact key (`None`) regenerates each row
    /// from `mask_seed` where it is used ([`mask_row`]).
    pub(crate) a: Option<Vec<Vec<u64>>>,
    /// The seed every `a_j` is expanded from (uniform, so it is drawn straight in evaluation
    /// form); only it crosses the wire.
    pub(crate) mask_seed: [u8; 32],
    /// The highest level the key switches at.
    pub(crate) level: usize,
    /// The secret it switches to (a relinearization or Galois key's owner).
    pub(crate) target: KeyId,
}

impl SwitchingKey {
    /// The highest level the key switches at.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The identifier of the secret the key switches to.
    pub fn key_id(&self) -> KeyId {
        self.target
    }

    /// Refuses a ciphertext under another secret than the key's (`what` names the use).
    pub(crate) fn check_owner(&self, ct: KeyId, what: &str) -> Result<(), CkksError> {
        check_key(self.target, ct, what)
    }

    /// Refuses a ciphertext above the key's level.
    pub(crate) fn check_level(&self, level: usize, what: &str) -> Result<(), CkksError> {
        if level > self.level {
            return Err(CkksError::MissingKey(format!(
                "{what} at level {level}: the key was made for level {} and below",
                self.level
            )));
        }
        Ok(())
    }

    /// Bytes held in memory: every `b_j`, and every `a_j` unless the key is compact.
    pub fn byte_len(&self) -> usize {
        let half: usize = self.b.iter().map(|b| 8 * b.len()).sum();
        if self.a.is_some() { 2 * half } else { half }
    }

    /// Drops the `a_j` from memory: half the bytes, for a pseudorandom expansion of each row
    /// at every use.
    pub fn compact(&mut self) {
        self.a = None;
    }

    /// `a_j` of `digit` over the primes `rows` (indices into the context's chain), expanded
    /// from the seed.
    pub(crate) fn expand_mask(
        &self,
        primes: &[u64],
        digit: usize,
        rows: &[usize],
        n: usize,
    ) -> Vec<u64> {
        let mut a = vec![0u64; rows.len() * n];
        for (row, &i) in a.chunks_mut(n).zip(rows) {
            mask_row(&self.mask_seed, digit, i, primes[i], row);
        }
        a
    }
}

/// Row `prime` of digit `digit`'s uniform `a_j`, expanded from `seed`: ChaCha20 keyed by the
/// seed, one stream per (digit, prime), so any row can be regenerated alone, each
/// coefficient `random_range(0..q)` on it (the wire carries only the seed, so this is part
/// of the format). On AVX-512 the stream comes sixteen blocks at a time
/// ([`ChaCha20x16::keystream`]), the same words.
pub(crate) fn mask_row(seed: &[u8; 32], digit: usize, prime: usize, q: u64, out: &mut [u64]) {
    mask_row_with(ChaCha20x16::detect(), seed, digit, prime, q, out);
}

/// [`mask_row`] with the wide kernel or (`None`) `rand_chacha`'s generator.
fn mask_row_with(
    kernel: Option<ChaCha20x16>,
    seed: &[u8; 32],
    digit: usize,
    prime: usize,
    q: u64,
    out: &mut [u64],
) {
    fn fill(rng: &mut impl Rng, q: u64, out: &mut [u64]) {
        out.iter_mut().for_each(|x| *x = rng.random_range(0..q));
    }
    let stream = ((digit as u64) << 32) | prime as u64;
    match kernel {
        Some(kernel) => fill(&mut kernel.keystream(seed, stream), q, out),
        None => {
            let mut rng = ChaCha20Rng::from_seed(*seed);
            rng.set_stream(stream);
            fill(&mut rng, q, out);
        }
    }
}

/// The relinearization key (`s² → s`).
#[derive(Clone, Debug)]
pub struct RelinKey(pub(crate) SwitchingKey);

impl RelinKey {
    /// The identifier of the secret it belongs to.
    pub fn key_id(&self) -> KeyId {
        self.0.target
    }

    /// Bytes held in memory.
    pub fn byte_len(&self) -> usize {
        self.0.byte_len()
    }

    /// See [`SwitchingKey::compact`].
    pub fn compact(&mut self) {
        self.0.compact();
    }
}

/// A Galois key for `X ↦ X^g`, with the evaluation-form permutation it applies.
#[derive(Clone, Debug)]
pub struct GaloisKey {
    pub(crate) perm: Vec<u32>,
    pub(crate) key: SwitchingKey,
}

/// A Galois key a circuit needs, with the highest level it is used at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRequest {
    /// Left rotation by `steps` slots (negative: right).
    Rotation {
        /// Slots.
        steps: i64,
        /// Highest level of a ciphertext it rotates.
        level: usize,
    },
    /// Complex conjugation of the slots.
    Conjugation {
        /// Highest level of a ciphertext it conjugates.
        level: usize,
    },
}

/// Galois keys by Galois element.
#[derive(Clone, Debug, Default)]
pub struct GaloisKeys {
    pub(crate) keys: BTreeMap<usize, GaloisKey>,
}

impl GaloisKeys {
    /// The identifier of the secret the keys belong to (`None` for an empty set).
    pub fn key_id(&self) -> Option<KeyId> {
        self.keys.values().next().map(|k| k.key.target)
    }

    /// Galois elements covered.
    pub fn elements(&self) -> impl Iterator<Item = usize> + '_ {
        self.keys.keys().copied()
    }

    /// Total size in bytes.
    pub fn byte_len(&self) -> usize {
        self.keys.values().map(|k| k.key.byte_len()).sum()
    }

    /// Makes every key compact (see [`SwitchingKey::compact`]).
    pub fn compact(&mut self) {
        self.keys.values_mut().for_each(|k| k.key.compact());
    }

    /// One set per key, in increasing element order (to send a large key set as messages
    /// of one key each).
    pub fn split(self) -> Vec<GaloisKeys> {
        self.keys
            .into_iter()
            .map(|(g, k)| GaloisKeys {
                keys: BTreeMap::from([(g, k)]),
            })
            .collect()
    }

    /// The union of `parts`; refuses an element given twice, or keys of two secrets.
    pub fn merge(parts: impl IntoIterator<Item = GaloisKeys>) -> Result<Self, CkksError> {
        let mut keys = BTreeMap::new();
        let mut owner = None;
        for part in parts {
            for (g, k) in part.keys {
                let first = *owner.get_or_insert(k.key.target);
                if first != k.key.target {
                    return Err(CkksError::Mismatch(format!(
                        "Galois element {g}: a key of secret {}, the others are of {first}",
                        k.key.target
                    )));
                }
                if keys.insert(g, k).is_some() {
                    return Err(CkksError::Mismatch(format!(
                        "Galois element {g} given twice"
                    )));
                }
            }
        }
        Ok(Self { keys })
    }
}

/// Sparse-secret encapsulation keys (Bossuat et al., 2022): bootstrapping switches the
/// ciphertext from the dense secret `s` to a sparse ephemeral `s'` just before ModRaise and
/// back just after, so ModRaise's overflow is bounded by the sparse weight while every other
/// key, and the data, stay under the dense `s`.
#[derive(Clone, Debug)]
pub struct EncapsulationKeys {
    /// `s → s'`, modulo `q_0·p_e` only (one digit, one other prime `p_e`, see
    /// [`encapsulation_prime`]): level 0 is all it serves, and at a larger modulus the sparse
    /// secret would not be certified.
    pub(crate) to_sparse: SwitchingKey,
    /// Index of `p_e` in `Q·P`.
    pub(crate) prime: usize,
    /// `s' → s`, an encryption under the dense `s`.
    pub(crate) to_dense: SwitchingKey,
    /// Non-zeros of `s'`.
    pub(crate) weight: usize,
}

impl EncapsulationKeys {
    /// The identifier of the dense secret the keys leave and return to.
    pub fn key_id(&self) -> KeyId {
        self.to_dense.target
    }

    /// Non-zeros of the sparse ephemeral secret.
    pub fn weight(&self) -> usize {
        self.weight
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.to_sparse.byte_len() + self.to_dense.byte_len()
    }

    /// Makes both keys compact (see [`SwitchingKey::compact`]).
    pub fn compact(&mut self) {
        self.to_sparse.compact();
        self.to_dense.compact();
    }
}

/// The prime `p_e` the dense-to-sparse encapsulation key is made over with `q_0`, as an index
/// into `Q·P`: the first special prime when `q_0·p_0` is within [`crate::params::SPARSE_128`]'s
/// bound for `weight` (or no bound applies), else the largest other prime that keeps `q_0·p_e`
/// within it. The key's noise `d·e/p_e` wants `p_e` large; the certificate wants `q_0·p_e`
/// small, and with two-prime digits (`P` of 120 bits) `q_0·p_0` can exceed the bound while a
/// ciphertext prime of `Q` still fits. The choice depends only on the parameters and the
/// weight, so a decoder makes the same one. Falls back to `p_0` when nothing fits (insecure
/// sets; key generation refuses secure ones).
pub fn encapsulation_prime(params: &CkksParams, weight: usize) -> usize {
    let primes = params.key_basis().moduli();
    let q_count = params.basis().moduli().len();
    let Some(max) = crate::params::sparse_max_log_q(params.n(), weight) else {
        return q_count;
    };
    let log_q0 = (primes[0] as f64).log2();
    let fits = |i: &usize| log_q0 + (primes[*i] as f64).log2() <= f64::from(max);
    if fits(&q_count) {
        return q_count;
    }
    (1..primes.len())
        .filter(fits)
        .max_by_key(|&i| primes[i])
        .unwrap_or(q_count)
}

impl SecretKey {
    /// Encapsulation keys to a fresh sparse secret of `weight` non-zeros (`1..=n`).
    pub fn encapsulation_keys(
        &self,
        weight: usize,
        rng: &mut impl CryptoRng,
    ) -> Result<EncapsulationKeys, CkksError> {
        let ctx = &self.ctx;
        let n = ctx.n();
        if !(1..=n).contains(&weight) {
            return Err(CkksError::InvalidParams(format!(
                "encapsulation weight {weight} is not in 1..={n}"
            )));
        }
        let params = ctx.params();
        if ctx.primes.len() <= ctx.q_count {
            return Err(CkksError::InvalidParams(
                "encapsulation needs a key-switching prime".into(),
            ));
        }
        // The sparse secret exists only in the key modulo q_0·p_e: certify it there.
        let prime = encapsulation_prime(params, weight);
        let log_q = (ctx.primes[0] as f64).log2() + (ctx.primes[prime] as f64).log2();
        let max = crate::params::sparse_max_log_q(n, weight);
        if !params.is_insecure() && !max.is_some_and(|m| log_q <= f64::from(m)) {
            return Err(CkksError::Insecure {
                n,
                log_q,
                max_log_q: max.unwrap_or(0),
            });
        }
        Ok(self.encapsulation_keys_over(weight, prime, rng))
    }

    /// [`Self::encapsulation_keys`] with the level-0 key over `q_0` and prime `prime` of
    /// `Q·P`, unchecked.
    fn encapsulation_keys_over(
        &self,
        weight: usize,
        prime: usize,
        rng: &mut impl CryptoRng,
    ) -> EncapsulationKeys {
        let ctx = &self.ctx;
        let n = ctx.n();
        let mut coeffs = sparse_ternary(n, weight, rng);
        let all: Vec<usize> = (0..ctx.primes.len()).collect();
        let mut s = ring::from_signed(ctx, &coeffs, &all);
        coeffs.zeroize();
        ring::forward(ctx, &mut s, &all);
        let sparse = SecretKey {
            ctx: Arc::clone(ctx),
            s,
            id: KeyId::random(rng),
        };
        let to_sparse = sparse.level0_switching_key(&self.s, prime, rng);
        let to_dense = self.switching_key(&sparse.s, ctx.max_level(), rng);
        EncapsulationKeys {
            to_sparse,
            prime,
            to_dense,
            weight,
        }
    }

    /// A switching key from `s_from` to this secret modulo `q_0·p_e` only (`p_e` = prime
    /// `prime` of `Q·P`), for [`super::keyswitch::switch_level0`]: `(−a·s + e + p_e·s_from,
    /// a)` on the rows `q_0`, `p_e`.
    fn level0_switching_key(
        &self,
        s_from: &[u64],
        prime: usize,
        rng: &mut impl CryptoRng,
    ) -> SwitchingKey {
        let ctx = &self.ctx;
        let n = ctx.n();
        let rows = [0, prime];
        let mut s_rows = self.s[..n].to_vec();
        s_rows.extend_from_slice(&self.s[prime * n..(prime + 1) * n]);
        let mut key = masked_key(0, self.id, rng);
        let a = key.expand_mask(&ctx.primes, 0, &rows, n);
        let mut b = rlwe_body(ctx, &a, &s_rows, &rows, rng);
        s_rows.zeroize();
        let m = &ctx.moduli[0];
        let w = m.shoup(m.reduce(ctx.primes[prime]));
        for (x, &sv) in b[..n].iter_mut().zip(&s_from[..n]) {
            *x = privopt_math::modarith::add_mod(*x, m.mul_shoup(sv, w), m.value());
        }
        key.b.push(b);
        key.a = Some(vec![a]);
        key
    }

    /// A fresh secret of the parameters' distribution.
    pub fn generate(ctx: &Arc<EvalContext>, rng: &mut impl CryptoRng) -> Self {
        let n = ctx.n();
        let mut coeffs = match ctx.params().secret() {
            SecretDistribution::Signs => signs(n, rng),
            SecretDistribution::Ternary => ternary(n, rng),
            SecretDistribution::Sparse(h) => sparse_ternary(n, h, rng),
        };
        let all: Vec<usize> = (0..ctx.primes.len()).collect();
        let mut s = ring::from_signed(ctx, &coeffs, &all);
        coeffs.zeroize();
        ring::forward(ctx, &mut s, &all);
        Self {
            ctx: Arc::clone(ctx),
            s,
            id: KeyId::random(rng),
        }
    }

    /// The identifier every key and ciphertext made from this secret carries.
    pub fn key_id(&self) -> KeyId {
        self.id
    }

    /// The context.
    pub fn context(&self) -> &Arc<EvalContext> {
        &self.ctx
    }

    /// The public key.
    pub fn public_key(&self, rng: &mut impl CryptoRng) -> PublicKey {
        let ctx = &self.ctx;
        let q: Vec<usize> = (0..ctx.q_count).collect();
        let (b, a) = rlwe_sample(ctx, &self.s[..q.len() * ctx.n()], &q, rng);
        PublicKey {
            ctx: Arc::clone(ctx),
            b,
            a,
            key: self.id,
        }
    }

    /// A switching key from `s_from` (evaluation form over `Q·P`) to this secret, for
    /// ciphertexts at `level` and below: rows `q_0 … q_level` then `P`, one pair per digit
    /// that starts at or below `level`.
    fn switching_key(
        &self,
        s_from: &[u64],
        level: usize,
        rng: &mut impl CryptoRng,
    ) -> SwitchingKey {
        let ctx = &self.ctx;
        let n = ctx.n();
        let level = level.min(ctx.max_level());
        let rows: Vec<usize> = (0..=level).chain(ctx.q_count..ctx.primes.len()).collect();
        let mut s_rows = Vec::with_capacity(rows.len() * n);
        for &i in &rows {
            s_rows.extend_from_slice(&self.s[i * n..(i + 1) * n]);
        }
        let mut key = masked_key(level, self.id, rng);
        let mut masks = Vec::new();
        for (j, digit) in ctx
            .digits
            .iter()
            .take_while(|digit| digit.start <= level)
            .enumerate()
        {
            let a = key.expand_mask(&ctx.primes, j, &rows, n);
            let mut b = rlwe_body(ctx, &a, &s_rows, &rows, rng);
            // Q rows come first and in order, so prime `i ≤ level` is row `i`.
            for i in digit.start..digit.end.min(level + 1) {
                let m = &ctx.moduli[i];
                let w = m.shoup(ctx.p_mod[i]);
                let q = m.value();
                for (x, &sv) in b[i * n..(i + 1) * n]
                    .iter_mut()
                    .zip(&s_from[i * n..(i + 1) * n])
                {
                    *x = privopt_math::modarith::add_mod(*x, m.mul_shoup(sv, w), q);
                }
            }
            key.b.push(b);
            masks.push(a);
        }
        s_rows.zeroize();
        key.a = Some(masks);
        key
    }

    /// The relinearization key, for every level.
    pub fn relin_key(&self, rng: &mut impl CryptoRng) -> RelinKey {
        self.relin_key_at(self.ctx.max_level(), rng)
    }

    /// The relinearization key for `level` and below (see [`SwitchingKey`]).
    pub fn relin_key_at(&self, level: usize, rng: &mut impl CryptoRng) -> RelinKey {
        let all: Vec<usize> = (0..self.ctx.primes.len()).collect();
        let mut s2 = ring::mul(&self.ctx, &self.s, &self.s, &all);
        let key = self.switching_key(&s2, level, rng);
        s2.zeroize();
        RelinKey(key)
    }

    /// Galois keys for left rotations by each of `rotations` slots (negative: right), and
    /// for conjugation if `conjugate`, for every level.
    pub fn galois_keys(
        &self,
        rotations: &[i64],
        conjugate: bool,
        rng: &mut impl CryptoRng,
    ) -> GaloisKeys {
        let top = self.ctx.max_level();
        let mut wanted: Vec<KeyRequest> = rotations
            .iter()
            .map(|&k| KeyRequest::Rotation {
                steps: k,
                level: top,
            })
            .collect();
        if conjugate {
            wanted.push(KeyRequest::Conjugation { level: top });
        }
        self.galois_keys_for(&wanted, rng)
    }

    /// Galois keys for `requests`, each key made at the highest level any request for its
    /// element names (see [`SwitchingKey`]): a circuit that rotates only low in the chain
    /// gets keys a fraction of the top-level size.
    pub fn galois_keys_for(&self, requests: &[KeyRequest], rng: &mut impl CryptoRng) -> GaloisKeys {
        self.galois_keys_with(requests, |_| false, rng)
    }

    /// [`SecretKey::galois_keys_for`], each key made compact as soon as it is made (see
    /// [`SwitchingKey::compact`]) if `compact` says so for its Galois element.
    pub(crate) fn galois_keys_with(
        &self,
        requests: &[KeyRequest],
        compact: impl Fn(usize) -> bool,
        rng: &mut impl CryptoRng,
    ) -> GaloisKeys {
        let top = self.ctx.max_level();
        let mut levels: BTreeMap<usize, usize> = BTreeMap::new();
        for r in requests {
            let (g, level) = match *r {
                KeyRequest::Rotation { steps, level } => (self.ctx.rotation_element(steps), level),
                KeyRequest::Conjugation { level } => (self.ctx.conjugation_element(), level),
            };
            if g != 1 {
                let l = levels.entry(g).or_insert(0);
                *l = (*l).max(level.min(top));
            }
        }
        let mut keys = GaloisKeys::default();
        for (g, level) in levels {
            let perm = self.ctx.galois_permutation(g);
            let mut sg = ring::permute(&self.ctx, &self.s, &perm);
            let mut key = self.switching_key(&sg, level, rng);
            sg.zeroize();
            if compact(g) {
                key.compact();
            }
            keys.keys.insert(g, GaloisKey { perm, key });
        }
        keys
    }

    /// Symmetric encryption: `(−a·s + e + m, a)`.
    pub fn encrypt(
        &self,
        pt: &Plaintext,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, CkksError> {
        let ctx = &self.ctx;
        check_params(ctx, &pt.params, "a plaintext")?;
        let idx: Vec<usize> = (0..=pt.level).collect();
        let a = uniform_rows(ctx, &idx, rng);
        let mut c0 = ring::error(ctx, &idx, rng);
        ring::add_assign(ctx, &mut c0, &pt.data, &idx);
        let as_ = ring::mul(ctx, &a, &self.s[..a.len()], &idx);
        ring::sub_assign(ctx, &mut c0, &as_, &idx);
        Ok(Ciphertext {
            c0,
            c1: a,
            level: pt.level,
            scale: pt.scale,
            params: pt.params,
            key: self.id,
        })
    }

    /// `c0 + c1·s` as a plaintext (evaluation form).
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Plaintext, CkksError> {
        let ctx = &self.ctx;
        check_params(ctx, &ct.params, "a ciphertext")?;
        check_key(self.id, ct.key, "decryption")?;
        let idx: Vec<usize> = (0..=ct.level).collect();
        let mut m = ct.c0.clone();
        ring::mul_acc(ctx, &mut m, &ct.c1, &self.s[..ct.c1.len()], &idx);
        Ok(Plaintext {
            data: m,
            level: ct.level,
            scale: ct.scale,
            params: ct.params,
        })
    }

    /// Decrypts and decodes the real slots.
    pub fn decrypt_values(&self, ct: &Ciphertext) -> Result<Vec<f64>, CkksError> {
        super::encode::decode(&self.ctx, &self.decrypt(ct)?)
    }
}

impl PublicKey {
    /// The identifier of the secret it belongs to.
    pub fn key_id(&self) -> KeyId {
        self.key
    }

    /// The context.
    pub fn context(&self) -> &Arc<EvalContext> {
        &self.ctx
    }

    /// Public-key encryption at the plaintext's level:
    /// `(v·b + e0 + m, v·a + e1)` with ternary `v`.
    pub fn encrypt(
        &self,
        pt: &Plaintext,
        rng: &mut impl CryptoRng,
    ) -> Result<Ciphertext, CkksError> {
        let ctx = &self.ctx;
        check_params(ctx, &pt.params, "a plaintext")?;
        let n = ctx.n();
        let rows = pt.level + 1;
        let idx: Vec<usize> = (0..rows).collect();
        let mut v = ring::from_signed(ctx, &ternary(n, rng), &idx);
        ring::forward(ctx, &mut v, &idx);
        let mut c0 = ring::error(ctx, &idx, rng);
        ring::add_assign(ctx, &mut c0, &pt.data, &idx);
        ring::mul_acc(ctx, &mut c0, &v, &self.b[..rows * n], &idx);
        let mut c1 = ring::error(ctx, &idx, rng);
        ring::mul_acc(ctx, &mut c1, &v, &self.a[..rows * n], &idx);
        v.zeroize();
        Ok(Ciphertext {
            c0,
            c1,
            level: pt.level,
            scale: pt.scale,
            params: pt.params,
            key: self.key,
        })
    }
}

/// `(−a·s + e, a)` over the primes `rows` (`s` given on those rows, in that order).
fn rlwe_sample(
    ctx: &EvalContext,
    s: &[u64],
    rows: &[usize],
    rng: &mut impl CryptoRng,
) -> (Vec<u64>, Vec<u64>) {
    let a = uniform_rows(ctx, rows, rng);
    let b = rlwe_body(ctx, &a, s, rows, rng);
    (b, a)
}

/// `−a·s + e` over the primes `rows`.
fn rlwe_body(
    ctx: &EvalContext,
    a: &[u64],
    s: &[u64],
    rows: &[usize],
    rng: &mut impl CryptoRng,
) -> Vec<u64> {
    let mut b = ring::error(ctx, rows, rng);
    let as_ = ring::mul(ctx, a, s, rows);
    ring::sub_assign(ctx, &mut b, &as_, rows);
    b
}

/// An empty switching key to the secret `target` at `level`, with a fresh mask seed.
fn masked_key(level: usize, target: KeyId, rng: &mut impl CryptoRng) -> SwitchingKey {
    let mut mask_seed = [0u8; 32];
    rng.fill_bytes(&mut mask_seed);
    SwitchingKey {
        b: Vec::new(),
        a: None,
        mask_seed,
        level,
        target,
    }
}

/// Uniform residues for the given primes (evaluation form; the NTT is a bijection).
fn uniform_rows(ctx: &EvalContext, indices: &[usize], rng: &mut impl CryptoRng) -> Vec<u64> {
    indices
        .iter()
        .flat_map(|&i| {
            let q = ctx.primes[i];
            (0..ctx.n())
                .map(|_| rng.random_range(0..q))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::RngCore;

    use super::*;
    use crate::eval::bootstrap::BootstrapPreset;
    use crate::eval::encode::encode_at;
    use crate::eval::evaluator::Evaluator;
    use crate::params::CkksParamsBuilder;

    fn worst(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn a_ciphertext_prime_carries_the_encapsulation_key_when_p0_is_too_large() {
        // A level-0 ciphertext goes to the sparse secret and back to the dense one, with the
        // level-0 key over q_0 and a ciphertext prime (50 bits) or the first special prime.
        let params = CkksParamsBuilder::leveled(1 << 12, 60, 50, 3, &[60, 60])
            .insecure_for_testing(true)
            .build()
            .unwrap();
        let ctx = EvalContext::new(&params).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let sk = SecretKey::generate(&ctx, &mut rng);
        let v: Vec<f64> = (0..ctx.slots()).map(|i| (i as f64 * 0.37).sin()).collect();
        let pt = encode_at(&ctx, &v, 0, ctx.level_scale(0)).unwrap();
        let ct = sk.encrypt(&pt, &mut rng).unwrap();
        let round_trip = |keys: EncapsulationKeys| {
            let to_dense = keys.to_dense.clone();
            let ev = Evaluator::new(&ctx, None, GaloisKeys::default()).with_encapsulation(keys);
            let keys = ev.encapsulation().unwrap();
            let sparse = ev.switch_to_sparse(&ct, keys).unwrap();
            let back = ev.switch_key(&sparse, &to_dense).unwrap();
            worst(&sk.decrypt_values(&back).unwrap(), &v)
        };
        for prime in [1, ctx.q_count] {
            let err = round_trip(sk.encapsulation_keys_over(32, prime, &mut rng));
            assert!(err < 1e-6, "p_e = prime {prime}: error {err}");
        }
        // The switch must use the prime the key was made over.
        let mut keys = sk.encapsulation_keys_over(32, 1, &mut rng);
        keys.prime = ctx.q_count;
        let err = round_trip(keys);
        assert!(
            err > 1.0,
            "a key over q_1 switched as if over p_0: error {err}"
        );
    }

    #[test]
    fn mask_rows_are_rands_random_range_on_the_row_stream() {
        // The wire carries only the seed, so the expansion must stay `random_range(0..q)`
        // on ChaCha20's stream (digit, prime), whichever path the CPU takes. The 62-bit
        // modulus takes the second-word branch about once in four coefficients.
        let mut seeds = ChaCha20Rng::seed_from_u64(12);
        for (q, digit, prime, len) in [
            (3u64, 0usize, 0usize, 40usize),
            ((1 << 35) + 1, 1, 2, 1000),
            ((1 << 50) - (1 << 17) + 1, 8, 17, 4096),
            ((1 << 57) + (1 << 20) + 1, 3, 19, 777),
            ((1 << 62) - 57, 0, 5, 2048),
        ] {
            let mut seed = [0u8; 32];
            seeds.fill_bytes(&mut seed);
            let mut rng = ChaCha20Rng::from_seed(seed);
            rng.set_stream(((digit as u64) << 32) | prime as u64);
            let want: Vec<u64> = (0..len).map(|_| rng.random_range(0..q)).collect();
            for kernel in [ChaCha20x16::detect(), None] {
                let mut got = vec![0u64; len];
                mask_row_with(kernel, &seed, digit, prime, q, &mut got);
                assert_eq!(got, want, "q = {q}, wide kernel {}", kernel.is_some());
            }
        }
    }

    #[test]
    fn the_encapsulation_prime_is_p0_when_certified_else_the_largest_prime_that_is() {
        // N16: q_0·p_0 = 109 bits, within the 121 certified for weight 32 at 2^16.
        let n16 = BootstrapPreset::N16.params().build().unwrap();
        assert_eq!(encapsulation_prime(&n16, 32), n16.basis().moduli().len());
        // N15: q_0·p_0 = 96 bits, within the 96 certified for weight 32 at 2^15.
        let n15 = BootstrapPreset::N15.params().build().unwrap();
        assert_eq!(encapsulation_prime(&n15, 32), n15.basis().moduli().len());
        // Two 60-bit special primes over q_0 of 41 bits (N15's earlier layout): q_0·p_0 = 101
        // bits exceeds the 96, so the largest prime that keeps q_0·p_e within them is chosen.
        let scales = [35, 35, 35, 35, 44, 52, 56, 55, 55, 55, 55, 55, 55, 53, 52];
        let two_prime = crate::params::CkksParamsBuilder::profiled(1 << 15, 41, &scales, &[60, 60])
            .linear_level(4, 60)
            .digits(8)
            .secret(crate::params::SecretDistribution::Ternary)
            .build()
            .unwrap();
        let primes = two_prime.key_basis().moduli();
        let log = |i: usize| (primes[i] as f64).log2();
        let e = encapsulation_prime(&two_prime, 32);
        assert_ne!(e, two_prime.basis().moduli().len());
        assert!(log(0) + log(e) <= 96.0, "{} bits", log(0) + log(e));
        for i in 1..primes.len() {
            if log(0) + log(i) <= 96.0 {
                assert!(primes[i] <= primes[e], "prime {i} fits and is larger");
            }
        }
        assert!(log(e) > 54.0, "p_e of {:.1} bits", log(e));
        // Certified, so key generation accepts it.
        let ctx = EvalContext::new(&two_prime).unwrap();
        let sk = SecretKey::generate(&ctx, &mut ChaCha20Rng::seed_from_u64(1));
        let weight_32 = sk.encapsulation_keys(32, &mut ChaCha20Rng::seed_from_u64(2));
        assert_eq!(weight_32.map(|k| k.prime).ok(), Some(e));
    }
}
