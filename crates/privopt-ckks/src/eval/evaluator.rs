//! Homomorphic operations.
//!
//! **Scale policy.** Every ciphertext at level `l` carries the level's scale `Δ_l`
//! (`Δ_{l−1} = Δ_l² / q_l`, with rescaling primes chosen to keep `Δ_l ≈ 2^scale_log2`).
//! A product of two level-`l` ciphertexts has scale `Δ_l²` and rescales to exactly `Δ_{l−1}`;
//! a constant `c` is multiplied in as the integer `round(c · Δ_{l−1} q_l / Δ_l)` so that it,
//! too, rescales onto `Δ_{l−1}`; and bringing a ciphertext down to a lower level multiplies
//! it by the constant 1 that way. Operands of additions and products are first brought to
//! the lower of their levels, so circuits need no manual scale bookkeeping ("automatic
//! rescale"), and every multiplication costs exactly one level.

use std::sync::Arc;

use rayon::ThreadPool;

use super::ciphertext::{Ciphertext, KeyId, Plaintext, Product, check_key, check_params};
use super::context::EvalContext;
use super::keys::{EncapsulationKeys, GaloisKey, GaloisKeys, RelinKey, SwitchingKey};
use super::{keyswitch, ring};
use crate::encoding::Complex;
use crate::error::CkksError;

mod hoisted;

pub(crate) use hoisted::{Extended, PlainRows};

/// Relative scale difference tolerated between operands of an addition (the level-scale
/// invariant holds to about `2^{-40}`; anything larger is a bug in the caller's circuit).
const SCALE_TOLERANCE: f64 = 1e-9;

/// Evaluates circuits on ciphertexts with the keys it was given.
pub struct Evaluator {
    ctx: Arc<EvalContext>,
    relin: Option<RelinKey>,
    galois: GaloisKeys,
    encapsulation: Option<EncapsulationKeys>,
    /// The secret its keys belong to: every ciphertext it is given must be under it. `None`
    /// for an evaluator without keys, which checks only that operands agree.
    key: Option<KeyId>,
    pool: Option<Threads>,
}

/// How many threads operations use.
enum Threads {
    /// Everything on the calling thread.
    One,
    /// A dedicated pool.
    Pool(ThreadPool),
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator")
            .field("relin", &self.relin.is_some())
            .field("galois", &self.galois.keys.len())
            .field(
                "encapsulation",
                &self.encapsulation.as_ref().map(|e| e.weight),
            )
            .finish()
    }
}

impl Evaluator {
    /// An evaluator with a relinearization key (for products) and Galois keys (for rotations).
    /// It refuses ciphertexts under another secret than its keys' (see [`KeyId`]); keys of
    /// two secrets are refused where they are used, or up front by [`Evaluator::check_keys`].
    pub fn new(ctx: &Arc<EvalContext>, relin: Option<RelinKey>, galois: GaloisKeys) -> Self {
        let key = relin.as_ref().map(RelinKey::key_id).or(galois.key_id());
        Self {
            ctx: Arc::clone(ctx),
            relin,
            galois,
            encapsulation: None,
            key,
            pool: None,
        }
    }

    /// Adds sparse-secret encapsulation keys, for bootstrapping under a dense secret.
    pub fn with_encapsulation(mut self, keys: EncapsulationKeys) -> Self {
        self.key = self.key.or(Some(keys.key_id()));
        self.encapsulation = Some(keys);
        self
    }

    /// The secret the evaluator's keys belong to (`None` without keys).
    pub fn key_id(&self) -> Option<KeyId> {
        self.key
    }

    /// Refuses an evaluator whose keys belong to more than one secret (a relinearization key
    /// of one and Galois keys of another), naming both.
    pub fn check_keys(&self) -> Result<(), CkksError> {
        let Some(key) = self.key else {
            return Ok(());
        };
        let galois = self.galois.keys.values().map(|k| k.key.target);
        let encapsulation = self.encapsulation.iter().map(EncapsulationKeys::key_id);
        for other in galois.chain(encapsulation) {
            if other != key {
                return Err(CkksError::Mismatch(format!(
                    "the evaluator holds keys of two secrets, {key} and {other}"
                )));
            }
        }
        Ok(())
    }

    /// The Galois keys held.
    pub fn galois_keys(&self) -> &GaloisKeys {
        &self.galois
    }

    /// The encapsulation keys, if given.
    pub fn encapsulation(&self) -> Option<&EncapsulationKeys> {
        self.encapsulation.as_ref()
    }

    /// The relinearization key, if given.
    pub fn relin(&self) -> Option<&RelinKey> {
        self.relin.as_ref()
    }

    /// `a` switched by `key` (from the key's source secret to its target): `(c0 + k0, k1)`.
    pub(crate) fn switch_key(
        &self,
        a: &Ciphertext,
        key: &SwitchingKey,
    ) -> Result<Ciphertext, CkksError> {
        key.check_level(a.level, "a key switch")?;
        self.switched(a, key.target, |c1| {
            keyswitch::switch(&self.ctx, c1, a.level, key)
        })
    }

    /// A level-0 ciphertext switched to the sparse secret by encapsulation keys (a key made
    /// with [`keyswitch::switch_level0`]'s layout, modulo `q_0·p_e` only).
    pub(crate) fn switch_to_sparse(
        &self,
        a: &Ciphertext,
        keys: &super::keys::EncapsulationKeys,
    ) -> Result<Ciphertext, CkksError> {
        if a.level != 0 {
            return Err(CkksError::LevelExhausted(format!(
                "a q_0·p_e key switches level 0 only; the ciphertext is at level {}",
                a.level
            )));
        }
        keys.to_dense.check_owner(a.key, "encapsulation")?;
        self.switched(a, keys.to_sparse.target, |c1| {
            keyswitch::switch_level0(&self.ctx, c1, &keys.to_sparse, keys.prime)
        })
    }

    /// `(c0 + k0, k1)` with `(k0, k1) = switch(c1)`, under the secret `to`. The caller has
    /// checked that `a` is under the key's source secret (a switching key does not name it).
    fn switched(
        &self,
        a: &Ciphertext,
        to: KeyId,
        switch: impl FnOnce(&[u64]) -> (Vec<u64>, Vec<u64>) + Send,
    ) -> Result<Ciphertext, CkksError> {
        check_params(&self.ctx, &a.params, "a ciphertext")?;
        Ok(self.install(|| {
            let switched = switch(&a.c1);
            let mut out = self.with_switched_c1(a, a.c0.clone(), switched);
            out.key = to;
            out
        }))
    }

    /// Runs every operation on a pool of exactly `threads` threads (default: rayon's global
    /// pool). One thread makes timings comparable with single-threaded libraries.
    pub fn with_threads(mut self, threads: usize) -> Result<Self, CkksError> {
        self.set_threads(threads)?;
        Ok(self)
    }

    /// [`Evaluator::with_threads`] in place (the keys stay where they are).
    pub fn set_threads(&mut self, threads: usize) -> Result<(), CkksError> {
        if threads > privopt_math::MAX_THREADS {
            return Err(CkksError::InvalidParams(format!(
                "{threads} threads; at most {}",
                privopt_math::MAX_THREADS
            )));
        }
        if threads <= 1 {
            self.pool = Some(Threads::One);
            return Ok(());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| CkksError::InvalidParams(format!("thread pool: {e}")))?;
        self.pool = Some(Threads::Pool(pool));
        Ok(())
    }

    /// The context.
    pub fn context(&self) -> &Arc<EvalContext> {
        &self.ctx
    }

    /// Runs `f` on the evaluator's thread pool.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(Threads::Pool(p)) => p.install(f),
            Some(Threads::One) => ring::sequentially(f),
            None => f(),
        }
    }

    fn q_idx(level: usize) -> Vec<usize> {
        (0..=level).collect()
    }

    /// `a + b`.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.combine(a, b, false)
    }

    /// `a − b`.
    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.combine(a, b, true)
    }

    fn combine(
        &self,
        a: &Ciphertext,
        b: &Ciphertext,
        minus: bool,
    ) -> Result<Ciphertext, CkksError> {
        let (a, b) = self.align(a, b)?;
        check_scales(a.scale, b.scale)?;
        let idx = Self::q_idx(a.level);
        let op = if minus { ring::sub } else { ring::add };
        Ok(self.install(|| Ciphertext {
            c0: op(&self.ctx, &a.c0, &b.c0, &idx),
            c1: op(&self.ctx, &a.c1, &b.c1, &idx),
            level: a.level,
            scale: a.scale,
            params: a.params,
            key: a.key,
        }))
    }

    /// `−a`.
    pub fn negate(&self, a: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        let idx = Self::q_idx(a.level);
        let mut out = a.clone();
        self.install(|| {
            ring::negate(&self.ctx, &mut out.c0, &idx);
            ring::negate(&self.ctx, &mut out.c1, &idx);
        });
        Ok(out)
    }

    /// `a + p` for a plaintext at the same scale and at least `a`'s level.
    pub fn add_plain(&self, a: &Ciphertext, p: &Plaintext) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        check_params(&self.ctx, &p.params, "a plaintext")?;
        if p.level < a.level {
            return Err(CkksError::LevelExhausted(format!(
                "plaintext at level {} cannot be added at level {}",
                p.level, a.level
            )));
        }
        check_scales(a.scale, p.scale)?;
        let n = self.ctx.n();
        let idx = Self::q_idx(a.level);
        let mut out = a.clone();
        self.install(|| ring::add_assign(&self.ctx, &mut out.c0, &p.data[..idx.len() * n], &idx));
        Ok(out)
    }

    /// `v` reduced modulo each of `q_0 … q_level`.
    fn residues_of(&self, v: i128, level: usize) -> Vec<u64> {
        self.ctx.moduli[..=level]
            .iter()
            .map(|m| m.reduce_i128(v))
            .collect()
    }

    /// Multiplies both components of `ct` by the integer `k` in place (no rescale).
    fn scale_by_integer(&self, ct: &mut Ciphertext, k: i128) {
        let idx = Self::q_idx(ct.level);
        let consts = self.residues_of(k, ct.level);
        self.install(|| {
            ring::mul_constants(&self.ctx, &mut ct.c0, &consts, &idx);
            ring::mul_constants(&self.ctx, &mut ct.c1, &consts, &idx);
        });
    }

    /// `a + c` in every slot.
    pub fn add_const(&self, a: &Ciphertext, c: f64) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        let consts = self.residues_of(scaled_integer(c * a.scale)?, a.level);
        let idx = Self::q_idx(a.level);
        let mut out = a.clone();
        self.install(|| ring::add_constants(&self.ctx, &mut out.c0, &consts, &idx));
        Ok(out)
    }

    /// `k · a` for an integer `k`, without rescaling (no level used).
    pub fn mul_int(&self, a: &Ciphertext, k: i64) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        let mut out = a.clone();
        self.scale_by_integer(&mut out, i128::from(k));
        Ok(out)
    }

    /// `c · a` for a real constant, rescaled: one level, landing on `Δ_{l−1}`.
    pub fn mul_const(&self, a: &Ciphertext, c: f64) -> Result<Ciphertext, CkksError> {
        let l = self.need_level(a, 1, "a constant product")?;
        self.mul_const_to(a, c, l - 1)
    }

    /// `c · a` delivered at `level` (below `a`'s) with scale `Δ_level`: the primes above
    /// `level + 1` are dropped, then one constant product and one rescale. Costs the same
    /// whatever the gap, so circuits use it both for scalar products and to align levels.
    pub fn mul_const_to(
        &self,
        a: &Ciphertext,
        c: f64,
        level: usize,
    ) -> Result<Ciphertext, CkksError> {
        self.linear_combination_to(&[(a, c)], level)
    }

    /// `Σ c_i · a_i` delivered at `level` (below every `a_i`'s) with scale `Δ_level`: each
    /// term's rows above `level + 1` are dropped and its constant is multiplied in as an
    /// integer that lands it on `Δ_level · q_{level+1}`, so the sum needs one rescale in all
    /// (a polynomial's leaves would otherwise pay one per term).
    pub fn linear_combination_to(
        &self,
        terms: &[(&Ciphertext, f64)],
        level: usize,
    ) -> Result<Ciphertext, CkksError> {
        let Some(&(first, _)) = terms.first() else {
            return Err(CkksError::InvalidParams(
                "a linear combination of no ciphertexts".into(),
            ));
        };
        for &(a, _) in terms {
            self.own(a)?;
            check_key(first.key, a.key, "a linear combination")?;
            if level >= a.level {
                return Err(CkksError::LevelExhausted(format!(
                    "a constant product from level {} cannot land on level {level}",
                    a.level
                )));
            }
        }
        let n = self.ctx.n();
        let l = level + 1;
        let idx = Self::q_idx(l);
        let target = self.ctx.level_scale(level);
        let sum_scale = target * self.ctx.primes[l] as f64;
        let mut factors = Vec::with_capacity(terms.len());
        for &(a, c) in terms {
            factors.push(self.residues_of(scaled_integer(c * sum_scale / a.scale)?, l));
        }
        let rows = (l + 1) * n;
        let mut sum = Ciphertext {
            c0: vec![0; rows],
            c1: vec![0; rows],
            level: l,
            scale: sum_scale,
            params: first.params,
            key: first.key,
        };
        self.install(|| {
            for (&(a, _), k) in terms.iter().zip(&factors) {
                ring::mul_constants_acc(&self.ctx, &mut sum.c0, &a.c0[..rows], k, &idx);
                ring::mul_constants_acc(&self.ctx, &mut sum.c1, &a.c1[..rows], k, &idx);
            }
        });
        let mut r = self.rescale(&sum)?;
        r.scale = target;
        Ok(r)
    }

    /// The plaintext of `values` at the scale that makes its product with a ciphertext at
    /// `level` (scale `Δ_level`) rescale exactly onto `Δ_{level−1}`.
    pub fn encode_for_product(&self, values: &[f64], level: usize) -> Result<Plaintext, CkksError> {
        super::encode::encode_at(&self.ctx, values, level, self.product_scale(level)?)
    }

    /// [`Evaluator::encode_for_product`] for complex slot values.
    pub fn encode_complex_for_product(
        &self,
        values: &[Complex],
        level: usize,
    ) -> Result<Plaintext, CkksError> {
        super::encode::encode_complex_at(&self.ctx, values, level, self.product_scale(level)?)
    }

    /// The plaintext scale `Δ_{l−1} q_l / Δ_l` that lands a product at level `l` on
    /// `Δ_{l−1}` after the rescale.
    pub(crate) fn product_scale(&self, level: usize) -> Result<f64, CkksError> {
        if level == 0 {
            return Err(CkksError::LevelExhausted(
                "no level left for a plaintext product".into(),
            ));
        }
        Ok(
            self.ctx.level_scale(level - 1) * self.ctx.primes[level] as f64
                / self.ctx.level_scale(level),
        )
    }

    /// `a ∘ p` for a plaintext made by [`Evaluator::encode_for_product`] (or any plaintext at
    /// `a`'s level or above), rescaled.
    pub fn mul_plain(&self, a: &Ciphertext, p: &Plaintext) -> Result<Ciphertext, CkksError> {
        self.rescale(&self.mul_plain_unscaled(a, p)?)
    }

    /// `a ∘ p` without the rescale (scale `Δ_a · Δ_p`, level unchanged): sums of such
    /// products, as in a linear transform, need one rescale in all instead of one each.
    pub fn mul_plain_unscaled(
        &self,
        a: &Ciphertext,
        p: &Plaintext,
    ) -> Result<Ciphertext, CkksError> {
        let l = self.need_level(a, 1, "a plaintext product")?;
        check_params(&self.ctx, &p.params, "a plaintext")?;
        if p.level < l {
            return Err(CkksError::LevelExhausted(format!(
                "plaintext at level {} cannot multiply a ciphertext at level {l}",
                p.level
            )));
        }
        let n = self.ctx.n();
        let idx = Self::q_idx(l);
        let pd = &p.data[..idx.len() * n];
        Ok(self.install(|| Ciphertext {
            c0: ring::mul(&self.ctx, &a.c0, pd, &idx),
            c1: ring::mul(&self.ctx, &a.c1, pd, &idx),
            level: l,
            scale: a.scale * p.scale,
            params: a.params,
            key: a.key,
        }))
    }

    /// The tensor product `(a0 b0, a0 b1 + a1 b0, a1 b1)` at the lower level of the two.
    pub fn tensor(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Product, CkksError> {
        let (a, b) = self.align(a, b)?;
        let idx = Self::q_idx(a.level);
        Ok(self.install(|| {
            let ctx = &self.ctx;
            let d0 = ring::mul(ctx, &a.c0, &b.c0, &idx);
            let mut d1 = ring::mul(ctx, &a.c0, &b.c1, &idx);
            ring::mul_acc(ctx, &mut d1, &a.c1, &b.c0, &idx);
            let d2 = ring::mul(ctx, &a.c1, &b.c1, &idx);
            Product {
                d0,
                d1,
                d2,
                level: a.level,
                scale: a.scale * b.scale,
                params: a.params,
                key: a.key,
            }
        }))
    }

    /// Relinearizes a tensor product back to two components (no rescale).
    pub fn relinearize(&self, p: Product) -> Result<Ciphertext, CkksError> {
        check_params(&self.ctx, &p.params, "a product")?;
        let key = self.relin_key(p.level, p.key)?;
        let idx = Self::q_idx(p.level);
        Ok(self.install(|| {
            let (k0, k1) = keyswitch::switch(&self.ctx, &p.d2, p.level, &key.0);
            let (mut c0, mut c1) = (p.d0, p.d1);
            ring::add_assign(&self.ctx, &mut c0, &k0, &idx);
            ring::add_assign(&self.ctx, &mut c1, &k1, &idx);
            Ciphertext {
                c0,
                c1,
                level: p.level,
                scale: p.scale,
                params: p.params,
                key: p.key,
            }
        }))
    }

    /// The relinearization key, checked to serve `level` and the secret `owner`.
    fn relin_key(&self, level: usize, owner: KeyId) -> Result<&RelinKey, CkksError> {
        let key = self
            .relin
            .as_ref()
            .ok_or_else(|| CkksError::MissingKey("relinearization key".into()))?;
        key.0.check_level(level, "relinearization")?;
        key.0.check_owner(owner, "relinearization")?;
        Ok(key)
    }

    /// Divides by the last prime `q_l`: level `l → l − 1`, scale `Δ → Δ / q_l`.
    pub fn rescale(&self, a: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let l = self.need_level(a, 1, "a rescale")?;
        let n = self.ctx.n();
        let ctx = &self.ctx;
        let idx = Self::q_idx(l - 1);
        let inv = &ctx.rescale_inv[l];
        let rescale_poly = |c: &[u64]| {
            let x = c[..(l + 1) * n].to_vec();
            ring::divide_and_round(ctx, x, &idx, &[l], &ctx.rescale_from[l], inv)
        };
        Ok(self.install(|| {
            let (c0, c1) = ring::join(|| rescale_poly(&a.c0), || rescale_poly(&a.c1));
            Ciphertext {
                c0,
                c1,
                level: l - 1,
                scale: a.scale / ctx.primes[l] as f64,
                params: a.params,
                key: a.key,
            }
        }))
    }

    /// `a · b`: tensor, relinearize, rescale (one level). The key switch's ModDown and the
    /// rescale are one division by `q_l·P`: `d0` and `d1` join the key product over `Q_l·P`
    /// (times `P`), which saves a conversion and `l + 1` NTTs per component.
    pub fn multiply(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let (a, b) = self.align(a, b)?;
        let l = self.need_level(&a, 1, "a product")?;
        let key = self.relin_key(l, a.key)?;
        let p = self.tensor(&a, &b)?;
        let ctx = &self.ctx;
        let keep = Self::q_idx(l - 1);
        let ext = ctx.extended_indices(l);
        Ok(self.install(|| {
            let (mut k0, mut k1) = keyswitch::switch_extended(ctx, &p.d2, l, &key.0);
            let down = |k: &mut Vec<u64>, d: &[u64]| {
                keyswitch::add_times_p(ctx, k, d, l);
                ring::divide_and_round(
                    ctx,
                    std::mem::take(k),
                    &keep,
                    &ext[l..],
                    &ctx.mod_down_rescale[l],
                    &ctx.mod_down_rescale_inv[l],
                )
            };
            let (c0, c1) = ring::join(|| down(&mut k0, &p.d0), || down(&mut k1, &p.d1));
            Ciphertext {
                c0,
                c1,
                level: l - 1,
                scale: p.scale / ctx.primes[l] as f64,
                params: p.params,
                key: p.key,
            }
        }))
    }

    /// `a²`.
    pub fn square(&self, a: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.multiply(a, a)
    }

    /// `a` brought down to `level` (one rescale by a constant 1; no-op at its own level).
    pub fn drop_to_level(&self, a: &Ciphertext, level: usize) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        if level > a.level {
            return Err(CkksError::LevelExhausted(format!(
                "cannot raise a ciphertext from level {} to {level}",
                a.level
            )));
        }
        if level == a.level {
            return Ok(a.clone());
        }
        self.mul_const_to(a, 1.0, level)
    }

    /// `i · a` in every slot: a product with the monomial `X^{n/2}`, exact and without a
    /// level.
    pub fn mul_by_i(&self, a: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        let idx = Self::q_idx(a.level);
        let x = &self.ctx.i_monomial()[..idx.len() * self.ctx.n()];
        Ok(self.install(|| Ciphertext {
            c0: ring::mul(&self.ctx, &a.c0, x, &idx),
            c1: ring::mul(&self.ctx, &a.c1, x, &idx),
            level: a.level,
            scale: a.scale,
            params: a.params,
            key: a.key,
        }))
    }

    /// Rotates the slots left by `k` (negative: right).
    pub fn rotate(&self, a: &Ciphertext, k: i64) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        let g = self.ctx.rotation_element(k);
        if g == 1 {
            return Ok(a.clone());
        }
        self.apply_galois(a, g, &format!("rotation by {k}"))
    }

    /// Rotations of one ciphertext by each of `steps`, sharing one ModUp of its `c1`
    /// (hoisting): each rotation then costs a permutation, the key product and a ModDown.
    /// Equal to [`Evaluator::rotate`] step by step up to key-switching noise.
    pub fn rotate_hoisted(
        &self,
        a: &Ciphertext,
        steps: &[i64],
    ) -> Result<Vec<Ciphertext>, CkksError> {
        self.own(a)?;
        let keys = self.rotation_keys(steps, a.level, a.key)?;
        Ok(self.install(|| {
            let ctx = &self.ctx;
            let digits = keyswitch::mod_up(ctx, &a.c1, a.level);
            keys.iter()
                .map(|key| match key {
                    None => a.clone(),
                    Some(key) => {
                        let switched = keyswitch::key_product(
                            ctx,
                            &digits,
                            a.level,
                            &key.key,
                            Some(&key.perm),
                        );
                        self.rotated(a, &key.perm, switched)
                    }
                })
                .collect()
        }))
    }

    /// The Galois key of each rotation in `steps` (`None` for the identity), checked to
    /// serve `level` and the secret `owner`.
    fn rotation_keys(
        &self,
        steps: &[i64],
        level: usize,
        owner: KeyId,
    ) -> Result<Vec<Option<&GaloisKey>>, CkksError> {
        steps
            .iter()
            .map(|&k| {
                let g = self.ctx.rotation_element(k);
                if g == 1 {
                    return Ok(None);
                }
                let key = self.galois.keys.get(&g).ok_or_else(|| {
                    CkksError::MissingKey(format!("Galois key for rotation by {k}"))
                })?;
                let what = format!("rotation by {k}");
                key.key.check_level(level, &what)?;
                key.key.check_owner(owner, &what)?;
                Ok(Some(key))
            })
            .collect()
    }

    /// Complex conjugation of the slots (the identity on real slots; needed by bootstrapping).
    pub fn conjugate(&self, a: &Ciphertext) -> Result<Ciphertext, CkksError> {
        self.apply_galois(a, self.ctx.conjugation_element(), "conjugation")
    }

    fn apply_galois(&self, a: &Ciphertext, g: usize, what: &str) -> Result<Ciphertext, CkksError> {
        let key = self
            .galois
            .keys
            .get(&g)
            .ok_or_else(|| CkksError::MissingKey(format!("Galois key for {what}")))?;
        key.key.check_level(a.level, what)?;
        key.key.check_owner(a.key, what)?;
        self.own(a)?;
        Ok(self.install(|| {
            let c1 = ring::permute(&self.ctx, &a.c1, &key.perm);
            let switched = keyswitch::switch(&self.ctx, &c1, a.level, &key.key);
            self.rotated(a, &key.perm, switched)
        }))
    }

    /// `(σ(c0) + k0, k1)`: an automorphism `σ` (given by `perm`) of `a` once `σ(c1)` has been
    /// key-switched to `(k0, k1)`.
    fn rotated(&self, a: &Ciphertext, perm: &[u32], switched: (Vec<u64>, Vec<u64>)) -> Ciphertext {
        self.with_switched_c1(a, ring::permute(&self.ctx, &a.c0, perm), switched)
    }

    /// `(c0 + k0, k1)` at `a`'s level and scale: a ciphertext whose `c1` was key-switched to
    /// `(k0, k1)`.
    fn with_switched_c1(
        &self,
        a: &Ciphertext,
        mut c0: Vec<u64>,
        (k0, k1): (Vec<u64>, Vec<u64>),
    ) -> Ciphertext {
        ring::add_assign(&self.ctx, &mut c0, &k0, &Self::q_idx(a.level));
        Ciphertext {
            c0,
            c1: k1,
            level: a.level,
            scale: a.scale,
            params: a.params,
            key: a.key,
        }
    }

    /// Sum of each window of `width` consecutive slots (a power of two), by `log2 width`
    /// rotate-and-add steps: slot `i` ends up holding `Σ_{j<width} a[i + j]` (cyclically).
    /// Needs Galois keys for rotations by `1, 2, 4, …, width/2`.
    pub fn sum_slots(&self, a: &Ciphertext, width: usize) -> Result<Ciphertext, CkksError> {
        if !width.is_power_of_two() || width > self.ctx.slots() {
            return Err(CkksError::InvalidParams(format!(
                "window width {width} is not a power of two up to the slot count"
            )));
        }
        let steps: Vec<i64> = (0..width.trailing_zeros()).map(|i| 1i64 << i).collect();
        self.rotate_and_add(a, &steps)
    }

    /// `acc ← acc + rot(acc, k)` for each `k` in turn: with `k = 1, 2, 4, …` a window sum;
    /// with `−1, −2, …` a broadcast to the following slots; with multiples of a block width,
    /// a sum across blocks.
    pub fn rotate_and_add(&self, a: &Ciphertext, steps: &[i64]) -> Result<Ciphertext, CkksError> {
        self.own(a)?;
        let mut acc = a.clone();
        for &k in steps {
            let r = self.rotate(&acc, k)?;
            acc = self.add(&acc, &r)?;
        }
        Ok(acc)
    }

    /// Inner products of `a` and `b` over windows of `width` slots: one product (one level)
    /// and `log2 width` rotations.
    pub fn inner_product(
        &self,
        a: &Ciphertext,
        b: &Ciphertext,
        width: usize,
    ) -> Result<Ciphertext, CkksError> {
        self.sum_slots(&self.multiply(a, b)?, width)
    }

    /// Both operands at the lower of their levels.
    fn align<'a>(
        &self,
        a: &'a Ciphertext,
        b: &'a Ciphertext,
    ) -> Result<
        (
            std::borrow::Cow<'a, Ciphertext>,
            std::borrow::Cow<'a, Ciphertext>,
        ),
        CkksError,
    > {
        use std::borrow::Cow;
        self.own(a)?;
        self.own(b)?;
        check_key(a.key, b.key, "an operation on two ciphertexts")?;
        Ok(match a.level.cmp(&b.level) {
            std::cmp::Ordering::Equal => (Cow::Borrowed(a), Cow::Borrowed(b)),
            std::cmp::Ordering::Greater => (
                Cow::Owned(self.drop_to_level(a, b.level)?),
                Cow::Borrowed(b),
            ),
            std::cmp::Ordering::Less => (
                Cow::Borrowed(a),
                Cow::Owned(self.drop_to_level(b, a.level)?),
            ),
        })
    }

    /// Refuses a ciphertext made under other parameters than the evaluator's, or under
    /// another secret than its keys'.
    fn own(&self, a: &Ciphertext) -> Result<(), CkksError> {
        check_params(&self.ctx, &a.params, "a ciphertext")?;
        match self.key {
            Some(key) => check_key(key, a.key, "the evaluator's keys"),
            None => Ok(()),
        }
    }

    fn need_level(&self, a: &Ciphertext, levels: usize, what: &str) -> Result<usize, CkksError> {
        self.own(a)?;
        if a.level < levels {
            return Err(CkksError::LevelExhausted(format!(
                "{what} needs {levels} level(s); the ciphertext is at level {}",
                a.level
            )));
        }
        Ok(a.level)
    }
}

fn check_scales(a: f64, b: f64) -> Result<(), CkksError> {
    if ((a - b) / a).abs() > SCALE_TOLERANCE {
        return Err(CkksError::ScaleMismatch(format!(
            "{a:e} vs {b:e}: operands must share their level's scale"
        )));
    }
    Ok(())
}

/// `round(x)` as an `i128`, refusing values that do not fit.
fn scaled_integer(x: f64) -> Result<i128, CkksError> {
    let v = x.round();
    if !v.is_finite() || v.abs() >= 1.0e36 {
        return Err(CkksError::Encoding(format!("constant {x:e} is too large")));
    }
    Ok(v as i128)
}
