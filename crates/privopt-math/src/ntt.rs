//! The negacyclic NTT over `Z_q[X]/(X^n + 1)` behind a small trait.
//!
//! The evaluation order is a backend's own business (tfhe-ntt uses bit-reversed order): the
//! only contract is that `inverse(forward(a)) = a` and that pointwise products in evaluation
//! form are negacyclic products in coefficient form. Mixing backends within one basis is
//! therefore not allowed, and an [`crate::rns::RnsBasis`] uses one backend throughout.

use std::sync::Arc;

use crate::MathError;
use crate::modarith::{add_mod, inv_mod, is_prime, mul_mod, pow_mod, sub_mod};

/// A negacyclic NTT of fixed size modulo one prime.
pub trait Ntt: Send + Sync {
    /// Transform size (ring degree).
    fn n(&self) -> usize;
    /// The prime modulus.
    fn modulus(&self) -> u64;
    /// Coefficient form → evaluation form, in place.
    fn forward(&self, a: &mut [u64]);
    /// Evaluation form → coefficient form, in place (the exact inverse of `forward`).
    fn inverse(&self, a: &mut [u64]);
    /// `acc += lhs ∘ rhs` (pointwise, evaluation form).
    fn mul_acc(&self, acc: &mut [u64], lhs: &[u64], rhs: &[u64]);
}

/// Which NTT implementation a basis uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NttBackend {
    /// `tfhe-ntt` (AVX-512/IFMA where available).
    #[default]
    Fast,
    /// The plain radix-2 reference below; for differential tests.
    Reference,
}

impl NttBackend {
    /// A plan for size `n` modulo `q`.
    pub fn plan(self, n: usize, q: u64) -> Result<Arc<dyn Ntt>, MathError> {
        if !n.is_power_of_two() || !(16..=1 << 17).contains(&n) {
            return Err(MathError::RingDegree(n));
        }
        if !is_prime(q) || q % (2 * n as u64) != 1 {
            return Err(MathError::BadModulus { q, two_n: 2 * n });
        }
        Ok(match self {
            NttBackend::Fast => Arc::new(FastNtt::new(n, q)?),
            NttBackend::Reference => Arc::new(ReferenceNtt::new(n, q)?),
        })
    }
}

/// The `tfhe-ntt` backend.
pub struct FastNtt {
    plan: tfhe_ntt::prime64::Plan,
}

impl FastNtt {
    /// A plan for size `n` modulo the NTT-friendly prime `q`.
    pub fn new(n: usize, q: u64) -> Result<Self, MathError> {
        tfhe_ntt::prime64::Plan::try_new(n, q)
            .map(|plan| Self { plan })
            .ok_or(MathError::BadModulus { q, two_n: 2 * n })
    }
}

impl Ntt for FastNtt {
    fn n(&self) -> usize {
        self.plan.ntt_size()
    }
    fn modulus(&self) -> u64 {
        self.plan.modulus()
    }
    fn forward(&self, a: &mut [u64]) {
        self.plan.fwd(a);
    }
    fn inverse(&self, a: &mut [u64]) {
        // tfhe-ntt's inverse omits the 1/n factor.
        self.plan.inv(a);
        self.plan.normalize(a);
    }
    fn mul_acc(&self, acc: &mut [u64], lhs: &[u64], rhs: &[u64]) {
        self.plan.mul_accumulate(acc, lhs, rhs);
    }
}

/// A textbook negacyclic NTT: twist by powers of ψ (a primitive 2n-th root of unity), then an
/// iterative radix-2 cyclic NTT with ω = ψ², outputs in natural order.
pub struct ReferenceNtt {
    n: usize,
    q: u64,
    psi_pows: Vec<u64>,
    psi_inv_pows: Vec<u64>,
    omega: u64,
    omega_inv: u64,
    n_inv: u64,
}

/// A primitive `order`-th root of unity mod prime `q` (`order` a power of two dividing q − 1).
pub fn primitive_root_of_unity(order: u64, q: u64) -> Option<u64> {
    if !(q - 1).is_multiple_of(order) {
        return None;
    }
    (2..q.min(10_000)).find_map(|g| {
        let w = pow_mod(g, (q - 1) / order, q);
        // w has order exactly `order` iff w^(order/2) = −1.
        (pow_mod(w, order / 2, q) == q - 1).then_some(w)
    })
}

impl ReferenceNtt {
    /// A plan for size `n` modulo the NTT-friendly prime `q`.
    pub fn new(n: usize, q: u64) -> Result<Self, MathError> {
        let psi = primitive_root_of_unity(2 * n as u64, q)
            .ok_or(MathError::BadModulus { q, two_n: 2 * n })?;
        let psi_inv = inv_mod(psi, q);
        let pows = |b: u64| {
            let mut v = Vec::with_capacity(n);
            let mut x = 1u64;
            for _ in 0..n {
                v.push(x);
                x = mul_mod(x, b, q);
            }
            v
        };
        Ok(Self {
            n,
            q,
            psi_pows: pows(psi),
            psi_inv_pows: pows(psi_inv),
            omega: mul_mod(psi, psi, q),
            omega_inv: mul_mod(psi_inv, psi_inv, q),
            n_inv: inv_mod(n as u64, q),
        })
    }

    fn cyclic(&self, a: &mut [u64], root: u64) {
        let (n, q) = (self.n, self.q);
        bit_reverse_permute(a);
        let mut len = 2;
        while len <= n {
            let w_len = pow_mod(root, (n / len) as u64, q);
            for start in (0..n).step_by(len) {
                let mut w = 1u64;
                for k in 0..len / 2 {
                    let u = a[start + k];
                    let v = mul_mod(a[start + k + len / 2], w, q);
                    a[start + k] = add_mod(u, v, q);
                    a[start + k + len / 2] = sub_mod(u, v, q);
                    w = mul_mod(w, w_len, q);
                }
            }
            len *= 2;
        }
    }
}

impl Ntt for ReferenceNtt {
    fn n(&self) -> usize {
        self.n
    }
    fn modulus(&self) -> u64 {
        self.q
    }
    fn forward(&self, a: &mut [u64]) {
        for (x, p) in a.iter_mut().zip(&self.psi_pows) {
            *x = mul_mod(*x, *p, self.q);
        }
        self.cyclic(a, self.omega);
    }
    fn inverse(&self, a: &mut [u64]) {
        self.cyclic(a, self.omega_inv);
        for (x, p) in a.iter_mut().zip(&self.psi_inv_pows) {
            *x = mul_mod(mul_mod(*x, *p, self.q), self.n_inv, self.q);
        }
    }
    fn mul_acc(&self, acc: &mut [u64], lhs: &[u64], rhs: &[u64]) {
        for ((c, l), r) in acc.iter_mut().zip(lhs).zip(rhs) {
            *c = add_mod(*c, mul_mod(*l, *r, self.q), self.q);
        }
    }
}

/// Reorders `a` (length a power of two) by bit-reversed index, in place: the permutation
/// every iterative radix-2 transform starts or ends with.
pub fn bit_reverse_permute<T>(a: &mut [T]) {
    let bits = a.len().trailing_zeros();
    if bits == 0 {
        return;
    }
    for i in 0..a.len() {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            a.swap(i, j);
        }
    }
}

/// Schoolbook negacyclic product `a · b mod (X^n + 1, q)`: the O(n²) ground truth.
pub fn schoolbook_negacyclic(a: &[u64], b: &[u64], q: u64) -> Vec<u64> {
    let n = a.len();
    let mut c = vec![0u64; n];
    for (i, &ai) in a.iter().enumerate() {
        for (j, &bj) in b.iter().enumerate() {
            let p = mul_mod(ai, bj, q);
            let k = i + j;
            if k < n {
                c[k] = add_mod(c[k], p, q);
            } else {
                c[k - n] = sub_mod(c[k - n], p, q);
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SeedTree;
    use crate::modarith::ntt_primes;
    use rand::Rng;

    fn random_poly(n: usize, q: u64, seed: u64) -> Vec<u64> {
        let mut r = SeedTree::new(seed).stream("ntt-test", &[]);
        (0..n).map(|_| r.random_range(0..q)).collect()
    }

    fn ntt_product(ntt: &dyn Ntt, a: &[u64], b: &[u64]) -> Vec<u64> {
        let (mut fa, mut fb) = (a.to_vec(), b.to_vec());
        ntt.forward(&mut fa);
        ntt.forward(&mut fb);
        let mut c = vec![0; a.len()];
        ntt.mul_acc(&mut c, &fa, &fb);
        ntt.inverse(&mut c);
        c
    }

    #[test]
    fn ntt_multiply_equals_schoolbook_for_both_backends() {
        for (n, bits) in [(16usize, 30u32), (256, 44), (1024, 50), (1024, 60)] {
            let q = ntt_primes(n, bits, 1, &[]).unwrap()[0];
            let (a, b) = (random_poly(n, q, 1), random_poly(n, q, 2));
            let truth = schoolbook_negacyclic(&a, &b, q);
            for backend in [NttBackend::Fast, NttBackend::Reference] {
                let plan = backend.plan(n, q).unwrap();
                assert_eq!(
                    ntt_product(plan.as_ref(), &a, &b),
                    truth,
                    "{backend:?} n={n} q={q}"
                );
                let mut rt = a.clone();
                plan.forward(&mut rt);
                plan.inverse(&mut rt);
                assert_eq!(rt, a);
            }
        }
    }

    #[test]
    fn every_supported_degree_round_trips() {
        for log_n in 10..=17 {
            let n = 1usize << log_n;
            let q = ntt_primes(n, 50, 1, &[]).unwrap()[0];
            let plan = NttBackend::Fast.plan(n, q).unwrap();
            let a = random_poly(n, q, log_n as u64);
            let mut b = a.clone();
            plan.forward(&mut b);
            assert_ne!(a, b);
            plan.inverse(&mut b);
            assert_eq!(a, b, "n = 2^{log_n}");
        }
    }

    #[test]
    fn negacyclic_wraps_with_a_sign() {
        // X^(n−1) · X = X^n = −1.
        let n = 16;
        let q = ntt_primes(n, 30, 1, &[]).unwrap()[0];
        let mut a = vec![0; n];
        a[n - 1] = 1;
        let mut b = vec![0; n];
        b[1] = 1;
        let plan = NttBackend::Fast.plan(n, q).unwrap();
        let c = ntt_product(plan.as_ref(), &a, &b);
        assert_eq!(c[0], q - 1);
        assert!(c[1..].iter().all(|&x| x == 0));
    }

    #[test]
    fn plans_reject_bad_parameters() {
        assert!(NttBackend::Fast.plan(1000, 12289).is_err());
        assert!(NttBackend::Fast.plan(1024, 12289 + 2048).is_err());
        assert!(NttBackend::Reference.plan(1 << 18, 12289).is_err());
    }
}
