//! RNS bases and polynomials of `R_Q = Z_Q[X]/(X^n + 1)`, `Q = q_0 ⋯ q_{L−1}`.
//!
//! A polynomial is stored as `L` rows of `n` residues, one row per prime. Its *form* —
//! coefficients ([`Coeff`]) or NTT evaluations ([`Eval`]) — is part of its type, so a
//! product of coefficient-form polynomials, or a coefficient read from an evaluation-form
//! one, does not compile. Additions work in either form; products only in [`Eval`].
//!
//! CRT lifting gives centered big integers ([`RnsBasis::lift_centered`]), or, for values known
//! to be small, a fast two-prime reconstruction checked against every other prime
//! ([`RnsBasis::lift_small`]). [`RnsBasis::wide`] builds a basis large enough for exact
//! integer polynomial arithmetic: no wrap-around below a stated bit bound.

use std::marker::PhantomData;
use std::sync::Arc;

use num_bigint::BigInt;
use num_traits::{ToPrimitive, Zero};

use crate::MathError;
use crate::modarith::{
    add_mod, center, inv_mod, mul_mod, ntt_primes, reduce_i64, reduce_once, sub_mod,
};
use crate::ntt::{Ntt, NttBackend};

/// Marker: coefficient form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coeff;
/// Marker: evaluation (NTT) form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eval;

/// A polynomial in RNS representation, in form `F`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Poly<F> {
    /// Residues, prime-major: `data[i * n + j]` is coefficient/evaluation `j` mod `q_i`.
    data: Vec<u64>,
    form: PhantomData<F>,
}

impl<F> Poly<F> {
    /// The residues modulo prime `i`.
    pub fn row(&self, i: usize, n: usize) -> &[u64] {
        &self.data[i * n..(i + 1) * n]
    }

    /// All residues, prime-major.
    pub fn as_slice(&self) -> &[u64] {
        &self.data
    }

    /// Mutable residues, prime-major (callers keep every value below its prime).
    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        &mut self.data
    }

    /// Overwrites every residue with zero in a way the compiler does not elide, leaving the
    /// polynomial empty (used to wipe secrets on drop).
    pub fn wipe(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.data);
    }
}

/// An RNS basis: ring degree, primes, and one NTT plan per prime.
pub struct RnsBasis {
    n: usize,
    moduli: Vec<u64>,
    backend: NttBackend,
    ntts: Vec<Arc<dyn Ntt>>,
    /// `q_0^{-1} mod q_1`, for two-prime reconstruction.
    q0_inv_mod_q1: u64,
    /// `Q` and, per prime, `Q/q_i` and `(Q/q_i)^{-1} mod q_i`, for big-integer CRT.
    big_q: BigInt,
    punctured: Vec<BigInt>,
    punctured_inv: Vec<u64>,
}

impl std::fmt::Debug for RnsBasis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RnsBasis")
            .field("n", &self.n)
            .field("moduli", &self.moduli)
            .finish()
    }
}

impl RnsBasis {
    /// A basis of the given distinct NTT-friendly primes for ring degree `n`.
    pub fn new(n: usize, moduli: &[u64], backend: NttBackend) -> Result<Self, MathError> {
        let ntts = moduli
            .iter()
            .map(|&q| backend.plan(n, q))
            .collect::<Result<Vec<_>, _>>()?;
        Self::with_plans(n, moduli, backend, ntts)
    }

    /// This basis followed by `extra` primes; the existing NTT plans are shared, not rebuilt.
    pub fn extended(&self, extra: &[u64]) -> Result<Self, MathError> {
        let mut moduli = self.moduli.clone();
        moduli.extend_from_slice(extra);
        let mut ntts = self.ntts.clone();
        for &q in extra {
            ntts.push(self.backend.plan(self.n, q)?);
        }
        Self::with_plans(self.n, &moduli, self.backend, ntts)
    }

    /// The NTT plan of prime `i`.
    pub fn ntt(&self, i: usize) -> &dyn Ntt {
        self.ntts[i].as_ref()
    }

    fn with_plans(
        n: usize,
        moduli: &[u64],
        backend: NttBackend,
        ntts: Vec<Arc<dyn Ntt>>,
    ) -> Result<Self, MathError> {
        if moduli.is_empty() {
            return Err(MathError::OutOfRange(
                "an RNS basis needs at least one prime".into(),
            ));
        }
        for (i, q) in moduli.iter().enumerate() {
            if moduli[..i].contains(q) {
                return Err(MathError::DuplicateModulus(*q));
            }
            if *q >= 1 << 62 {
                return Err(MathError::OutOfRange(format!(
                    "modulus {q} is not below 2^62"
                )));
            }
        }
        let big_q: BigInt = moduli.iter().map(|&q| BigInt::from(q)).product();
        let punctured: Vec<BigInt> = moduli.iter().map(|&q| &big_q / BigInt::from(q)).collect();
        let punctured_inv = moduli
            .iter()
            .zip(&punctured)
            .map(|(&q, p)| {
                let r = (p % BigInt::from(q))
                    .to_u64_digits()
                    .1
                    .first()
                    .copied()
                    .unwrap_or(0);
                inv_mod(r, q)
            })
            .collect();
        let q0_inv_mod_q1 = if moduli.len() > 1 {
            inv_mod(moduli[0] % moduli[1], moduli[1])
        } else {
            0
        };
        Ok(Self {
            n,
            moduli: moduli.to_vec(),
            backend,
            ntts,
            q0_inv_mod_q1,
            big_q,
            punctured,
            punctured_inv,
        })
    }

    /// A basis of `count` fresh primes of `bits` bits each (the largest such primes).
    pub fn generate(
        n: usize,
        bits: u32,
        count: usize,
        backend: NttBackend,
    ) -> Result<Self, MathError> {
        Self::new(n, &ntt_primes(n, bits, count, &[])?, backend)
    }

    /// A *wide* basis of 60-bit primes whose product exceeds `2^(bound_bits + 1)`: every
    /// polynomial with coefficients `|c| < 2^bound_bits` is represented exactly, so sums and
    /// products that stay below the bound are exact integer arithmetic with no wrap-around.
    pub fn wide(n: usize, bound_bits: u32, backend: NttBackend) -> Result<Self, MathError> {
        let primes = ntt_primes(n, 60, 64, &[])?;
        let mut chosen = Vec::new();
        let mut log_q = 0.0;
        for p in primes {
            if log_q > f64::from(bound_bits) + 1.0 {
                break;
            }
            log_q += (p as f64).log2();
            chosen.push(p);
        }
        if log_q <= f64::from(bound_bits) + 1.0 {
            return Err(MathError::OutOfRange(format!(
                "a wide basis for {bound_bits} bits needs more than 64 primes"
            )));
        }
        Self::new(n, &chosen, backend)
    }

    /// Ring degree.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The primes.
    pub fn moduli(&self) -> &[u64] {
        &self.moduli
    }

    /// `Q`, the product of the primes.
    pub fn modulus(&self) -> &BigInt {
        &self.big_q
    }

    /// `log2 Q`.
    pub fn log_modulus(&self) -> f64 {
        self.moduli.iter().map(|&q| (q as f64).log2()).sum()
    }

    /// Largest `b` such that every integer of absolute value below `2^b` is represented exactly.
    pub fn exact_bits(&self) -> u32 {
        (self.log_modulus() - 1.0).floor().max(0.0) as u32
    }

    /// The zero polynomial in form `F`.
    pub fn zero<F>(&self) -> Poly<F> {
        Poly {
            data: vec![0; self.n * self.moduli.len()],
            form: PhantomData,
        }
    }

    /// Builds a polynomial from raw prime-major residues (each must be below its prime).
    pub fn from_residues<F>(&self, data: Vec<u64>) -> Result<Poly<F>, MathError> {
        if data.len() != self.n * self.moduli.len() {
            return Err(MathError::OutOfRange(format!(
                "{} residues for a basis of {} x {}",
                data.len(),
                self.moduli.len(),
                self.n
            )));
        }
        for (i, &q) in self.moduli.iter().enumerate() {
            if let Some(bad) = data[i * self.n..(i + 1) * self.n].iter().find(|&&x| x >= q) {
                return Err(MathError::OutOfRange(format!(
                    "residue {bad} is not below its prime {q}"
                )));
            }
        }
        Ok(Poly {
            data,
            form: PhantomData,
        })
    }

    /// The polynomial with the given signed coefficients (`coeffs.len() == n`).
    pub fn from_signed(&self, coeffs: &[i64]) -> Poly<Coeff> {
        let mut p = self.zero::<Coeff>();
        for (i, &q) in self.moduli.iter().enumerate() {
            for (dst, &c) in p.data[i * self.n..(i + 1) * self.n].iter_mut().zip(coeffs) {
                *dst = reduce_i64(c, q);
            }
        }
        p
    }

    /// [`RnsBasis::from_signed`] for coefficients beyond `i64` (lifted plaintexts, smudging
    /// noise above 2^62); those within `i64` take its path.
    pub fn from_signed_wide(&self, coeffs: &[i128]) -> Poly<Coeff> {
        let mut p = self.zero::<Coeff>();
        for (i, &q) in self.moduli.iter().enumerate() {
            for (dst, &c) in p.data[i * self.n..(i + 1) * self.n].iter_mut().zip(coeffs) {
                *dst = match i64::try_from(c) {
                    Ok(small) => reduce_i64(small, q),
                    Err(_) => c.rem_euclid(i128::from(q)) as u64,
                };
            }
        }
        p
    }

    /// The polynomial with the given big-integer coefficients (reduced mod each prime).
    pub fn from_bigints(&self, coeffs: &[BigInt]) -> Poly<Coeff> {
        let mut p = self.zero::<Coeff>();
        for (i, &q) in self.moduli.iter().enumerate() {
            let bq = BigInt::from(q);
            for (dst, c) in p.data[i * self.n..(i + 1) * self.n].iter_mut().zip(coeffs) {
                let r = ((c % &bq) + &bq) % &bq;
                *dst = r.to_u64_digits().1.first().copied().unwrap_or(0);
            }
        }
        p
    }

    /// `a += b`.
    pub fn add_assign<F>(&self, a: &mut Poly<F>, b: &Poly<F>) {
        self.zip_rows(a, b, add_mod);
    }

    /// `a −= b`.
    pub fn sub_assign<F>(&self, a: &mut Poly<F>, b: &Poly<F>) {
        self.zip_rows(a, b, sub_mod);
    }

    /// `a = −a`.
    pub fn neg_assign<F>(&self, a: &mut Poly<F>) {
        for (i, &q) in self.moduli.iter().enumerate() {
            for x in &mut a.data[i * self.n..(i + 1) * self.n] {
                *x = if *x == 0 { 0 } else { q - *x };
            }
        }
    }

    /// `a *= c` for a small signed integer constant.
    pub fn mul_scalar_assign<F>(&self, a: &mut Poly<F>, c: i64) {
        let constants: Vec<u64> = self.moduli.iter().map(|&q| reduce_i64(c, q)).collect();
        self.mul_constants_assign(a, &constants);
    }

    /// `a *= c_i` in the residues of prime `i` (one constant per prime, e.g. a rational's
    /// value modulo each prime), by Shoup products.
    pub fn mul_constants_assign<F>(&self, a: &mut Poly<F>, constants: &[u64]) {
        let rows = a.data.chunks_mut(self.n).zip(&self.moduli).zip(constants);
        for ((row, &q), &c) in rows {
            let c = c % q;
            // ⌊c·2^64/q⌋: the product's quotient estimate is at most one below (q < 2^63).
            let c_shoup = ((u128::from(c) << 64) / u128::from(q)) as u64;
            for x in row {
                let hi = ((u128::from(*x) * u128::from(c_shoup)) >> 64) as u64;
                *x = reduce_once(x.wrapping_mul(c).wrapping_sub(hi.wrapping_mul(q)), q);
            }
        }
    }

    fn zip_rows<F>(&self, a: &mut Poly<F>, b: &Poly<F>, op: impl Fn(u64, u64, u64) -> u64) {
        for (i, &q) in self.moduli.iter().enumerate() {
            let r = i * self.n..(i + 1) * self.n;
            for (x, &y) in a.data[r.clone()].iter_mut().zip(&b.data[r]) {
                *x = op(*x, y, q);
            }
        }
    }

    /// `acc += a · b` (evaluation form).
    pub fn mul_acc(&self, acc: &mut Poly<Eval>, a: &Poly<Eval>, b: &Poly<Eval>) {
        for (i, ntt) in self.ntts.iter().enumerate() {
            let r = i * self.n..(i + 1) * self.n;
            ntt.mul_acc(&mut acc.data[r.clone()], &a.data[r.clone()], &b.data[r]);
        }
    }

    /// `a · b` (evaluation form).
    pub fn mul(&self, a: &Poly<Eval>, b: &Poly<Eval>) -> Poly<Eval> {
        let mut c = self.zero();
        self.mul_acc(&mut c, a, b);
        c
    }

    /// Coefficient → evaluation form.
    pub fn to_eval(&self, mut a: Poly<Coeff>) -> Poly<Eval> {
        for (i, ntt) in self.ntts.iter().enumerate() {
            ntt.forward(&mut a.data[i * self.n..(i + 1) * self.n]);
        }
        Poly {
            data: a.data,
            form: PhantomData,
        }
    }

    /// Evaluation → coefficient form.
    pub fn to_coeff(&self, mut a: Poly<Eval>) -> Poly<Coeff> {
        for (i, ntt) in self.ntts.iter().enumerate() {
            ntt.inverse(&mut a.data[i * self.n..(i + 1) * self.n]);
        }
        Poly {
            data: a.data,
            form: PhantomData,
        }
    }

    /// The centered representative in `(−Q/2, Q/2]` of coefficient `j`.
    pub fn lift_centered(&self, a: &Poly<Coeff>, j: usize) -> BigInt {
        let residues: Vec<u64> = (0..self.moduli.len())
            .map(|i| a.data[i * self.n + j])
            .collect();
        self.lift_centered_residues(&residues)
    }

    /// The centered representative of the value with the given residues (one per prime).
    pub fn lift_centered_residues(&self, residues: &[u64]) -> BigInt {
        let mut x = BigInt::zero();
        for (i, (&q, &r)) in self.moduli.iter().zip(residues).enumerate() {
            let y = mul_mod(r, self.punctured_inv[i], q);
            x += &self.punctured[i] * BigInt::from(y);
        }
        x %= &self.big_q;
        if (&x << 1u32) > self.big_q {
            x -= &self.big_q;
        }
        x
    }

    /// The centered value with the given residues as an `f64` (exact below 2^53): the fast
    /// two-prime path when it applies, the full CRT otherwise.
    pub fn centered_f64(&self, residues: &[u64]) -> f64 {
        match self.lift_small_residues(residues) {
            Some(x) => x as f64,
            None => self
                .lift_centered_residues(residues)
                .to_f64()
                .unwrap_or(f64::INFINITY),
        }
    }

    /// All coefficients as centered big integers.
    pub fn lift_all(&self, a: &Poly<Coeff>) -> Vec<BigInt> {
        (0..self.n).map(|j| self.lift_centered(a, j)).collect()
    }

    /// Coefficient `j` as an `i128`, reconstructed from the first two primes and checked
    /// against all others; `None` when its centered value does not fit below `q_0 q_1 / 2`
    /// (that is, when it is not small and this fast path would be wrong).
    pub fn lift_small(&self, a: &Poly<Coeff>, j: usize) -> Option<i128> {
        let residues: Vec<u64> = (0..self.moduli.len())
            .map(|i| a.data[i * self.n + j])
            .collect();
        self.lift_small_residues(&residues)
    }

    /// [`RnsBasis::lift_small`] for one value given by its residues (one per prime).
    pub fn lift_small_residues(&self, residues: &[u64]) -> Option<i128> {
        let q0 = self.moduli[0];
        let r0 = *residues.first()?;
        if self.moduli.len() == 1 {
            return Some(i128::from(center(r0, q0)));
        }
        let (q1, r1) = (self.moduli[1], *residues.get(1)?);
        // x = r0 + q0 · ((r1 − r0) q0^{-1} mod q1) ∈ [0, q0 q1).
        let t = mul_mod(sub_mod(r1, r0 % q1, q1), self.q0_inv_mod_q1, q1);
        let m = q0 as u128 * q1 as u128;
        let x = r0 as u128 + q0 as u128 * t as u128;
        let centered = if x > m / 2 {
            x as i128 - m as i128
        } else {
            x as i128
        };
        for (&q, &r) in self.moduli.iter().zip(residues).skip(2) {
            if centered.rem_euclid(q as i128) as u64 != r {
                return None;
            }
        }
        Some(centered)
    }

    /// Residues of the constant coefficient of a polynomial in evaluation form, without an
    /// inverse NTT: the evaluations at the `n` roots sum to `n · a_0`.
    pub fn constant_coefficient(&self, a: &Poly<Eval>) -> Vec<u64> {
        self.moduli
            .iter()
            .enumerate()
            .map(|(i, &q)| {
                let sum = a.data[i * self.n..(i + 1) * self.n]
                    .iter()
                    .fold(0u64, |acc, &x| add_mod(acc, x, q));
                mul_mod(sum, inv_mod(self.n as u64 % q, q), q)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SeedTree;
    use num_traits::One;
    use proptest::prelude::*;
    use rand::Rng;

    fn basis(n: usize) -> RnsBasis {
        RnsBasis::generate(n, 44, 5, NttBackend::Fast).unwrap()
    }

    fn random_signed(n: usize, bound: i64, seed: u64) -> Vec<i64> {
        let mut r = SeedTree::new(seed).stream("rns-test", &[]);
        (0..n).map(|_| r.random_range(-bound..=bound)).collect()
    }

    /// Schoolbook negacyclic product over the integers.
    fn bigint_product(a: &[BigInt], b: &[BigInt]) -> Vec<BigInt> {
        let n = a.len();
        let mut c = vec![BigInt::zero(); n];
        for i in 0..n {
            for j in 0..n {
                let p = &a[i] * &b[j];
                if i + j < n {
                    c[i + j] += p;
                } else {
                    c[i + j - n] -= p;
                }
            }
        }
        c
    }

    #[test]
    fn rns_to_bigint_round_trip() {
        let b = basis(64);
        let mut r = SeedTree::new(4).stream("big", &[]);
        let half: BigInt = b.modulus() >> 1u32;
        // Random values spread over the whole centered range, plus the edges.
        let mut vals: Vec<BigInt> = (0..60)
            .map(|_| {
                let hi: u128 = r.random();
                let lo: u128 = r.random();
                let v = (BigInt::from(hi) << 128u32) + BigInt::from(lo);
                let v = v % &half;
                if r.random::<bool>() { -v } else { v }
            })
            .collect();
        vals.extend([
            half.clone(),
            -(&half - BigInt::one()),
            BigInt::zero(),
            BigInt::from(-1),
        ]);
        let p = b.from_bigints(&vals);
        assert_eq!(b.lift_all(&p), vals);
    }

    #[test]
    fn small_lift_agrees_with_bigint_and_detects_large_values() {
        let b = basis(32);
        let coeffs = random_signed(32, 1 << 62, 8);
        let p = b.from_signed(&coeffs);
        for (j, &c) in coeffs.iter().enumerate() {
            assert_eq!(b.lift_small(&p, j), Some(i128::from(c)));
            assert_eq!(b.lift_centered(&p, j), BigInt::from(c));
        }
        // A value beyond q0 q1 / 2 must be refused, not silently wrapped.
        let big = BigInt::from(1u8) << 120u32;
        let p = b.from_bigints(&vec![big; 32]);
        assert_eq!(b.lift_small(&p, 0), None);
    }

    #[test]
    fn exact_wide_products_equal_bigint_products() {
        let n = 64;
        // Coefficients below 2^100: products are below n * 2^200 < 2^207.
        let wide = RnsBasis::wide(n, 207, NttBackend::Fast).unwrap();
        assert!(wide.exact_bits() >= 207);
        let mut r = SeedTree::new(9).stream("wide", &[]);
        let mut big = || -> Vec<BigInt> {
            (0..n)
                .map(|_| {
                    let v: u128 = r.random::<u128>() >> 28;
                    if r.random::<bool>() {
                        -BigInt::from(v)
                    } else {
                        BigInt::from(v)
                    }
                })
                .collect()
        };
        let (a, c) = (big(), big());
        let truth = bigint_product(&a, &c);
        let pa = wide.to_eval(wide.from_bigints(&a));
        let pc = wide.to_eval(wide.from_bigints(&c));
        let prod = wide.to_coeff(wide.mul(&pa, &pc));
        assert_eq!(wide.lift_all(&prod), truth);
        // The same product in a narrow basis wraps around: the bound matters.
        let narrow = RnsBasis::generate(n, 60, 2, NttBackend::Fast).unwrap();
        let prod = narrow.to_coeff(narrow.mul(
            &narrow.to_eval(narrow.from_bigints(&a)),
            &narrow.to_eval(narrow.from_bigints(&c)),
        ));
        assert_ne!(narrow.lift_all(&prod), truth);
    }

    #[test]
    fn reference_and_fast_bases_agree_in_coefficient_form() {
        let primes = ntt_primes(128, 50, 3, &[]).unwrap();
        let fast = RnsBasis::new(128, &primes, NttBackend::Fast).unwrap();
        let slow = RnsBasis::new(128, &primes, NttBackend::Reference).unwrap();
        let (a, c) = (
            random_signed(128, 1 << 40, 1),
            random_signed(128, 1 << 40, 2),
        );
        let f = fast.to_coeff(fast.mul(
            &fast.to_eval(fast.from_signed(&a)),
            &fast.to_eval(fast.from_signed(&c)),
        ));
        let s = slow.to_coeff(slow.mul(
            &slow.to_eval(slow.from_signed(&a)),
            &slow.to_eval(slow.from_signed(&c)),
        ));
        assert_eq!(f, s);
    }

    #[test]
    fn constant_coefficient_from_evaluations() {
        let b = basis(64);
        let c = random_signed(64, 1 << 40, 3);
        let e = b.to_eval(b.from_signed(&c));
        assert_eq!(
            b.lift_small_residues(&b.constant_coefficient(&e)),
            Some(i128::from(c[0]))
        );
    }

    #[test]
    fn basis_rejects_bad_moduli() {
        assert!(matches!(
            RnsBasis::new(64, &[], NttBackend::Fast),
            Err(MathError::OutOfRange(_))
        ));
        let p = ntt_primes(64, 40, 1, &[]).unwrap()[0];
        assert_eq!(
            RnsBasis::new(64, &[p, p], NttBackend::Fast).unwrap_err(),
            MathError::DuplicateModulus(p)
        );
        assert!(RnsBasis::new(64, &[p + 2], NttBackend::Fast).is_err());
        assert!(RnsBasis::new(100, &[p], NttBackend::Fast).is_err());
        let b = basis(16);
        assert!(b.from_residues::<Coeff>(vec![0; 10]).is_err());
        assert!(b.from_residues::<Coeff>(vec![u64::MAX; 80]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Ring axioms through the NTT: distributivity and commutativity of the product.
        #[test]
        fn ring_laws(seed in any::<u64>()) {
            let b = RnsBasis::generate(32, 50, 2, NttBackend::Fast).unwrap();
            let x = b.to_eval(b.from_signed(&random_signed(32, 1 << 45, seed)));
            let y = b.to_eval(b.from_signed(&random_signed(32, 1 << 45, seed ^ 1)));
            let z = b.to_eval(b.from_signed(&random_signed(32, 1 << 45, seed ^ 2)));
            let mut yz = y.clone();
            b.add_assign(&mut yz, &z);
            let lhs = b.mul(&x, &yz);
            let mut rhs = b.mul(&x, &y);
            b.mul_acc(&mut rhs, &x, &z);
            prop_assert_eq!(&lhs, &rhs);
            prop_assert_eq!(b.mul(&x, &y), b.mul(&y, &x));
            let mut d = x.clone();
            b.sub_assign(&mut d, &x);
            prop_assert_eq!(d, b.zero::<Eval>());
            let mut m = x.clone();
            b.neg_assign(&mut m);
            b.add_assign(&mut m, &x);
            prop_assert_eq!(m, b.zero::<Eval>());
        }
    }
}
