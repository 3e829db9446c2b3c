//! Everything the evaluator precomputes once per parameter set: Barrett constants, the level
//! scales, the hybrid key-switching digits with their base-conversion tables, rescaling
//! inverses, and where each NTT evaluation point sits (for automorphisms in evaluation form).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use num_bigint::BigUint;
use privopt_math::modarith::{Modulus, ShoupConst, inv_mod, mul_mod};

use crate::encoding::SlotEncoder;
use crate::error::CkksError;
use crate::params::CkksParams;

/// Fast base conversion from a set of source primes to any other prime of `Q·P`
/// (Bajard et al.), centred: each term `[x_k (B/b_k)^{-1}]_{b_k}` is taken in
/// `(−b_k/2, b_k/2]`, so the result is `x + u·B` with `|u| ≤ #sources/2` around a centred `x`.
/// Uncentred terms would give every output coefficient a positive mean offset, which the
/// canonical embedding concentrates into a few slots (seen as a 20× error spike at slot 0
/// after a rotation).
#[derive(Debug)]
pub(crate) struct BaseConversion {
    /// Indices (into the full prime list) of the source primes.
    pub(crate) sources: Vec<usize>,
    /// `(B/b_k)^{-1} mod b_k` per source.
    pub(crate) hat_inv: Vec<ShoupConst>,
    /// `[target][k] = (B/b_k) mod target` for every prime of `Q·P` (unused rows for sources).
    pub(crate) hat_mod: Vec<Vec<u64>>,
    /// `B mod target` for every prime (to centre the conversion).
    pub(crate) product_mod: Vec<u64>,
}

impl BaseConversion {
    pub(crate) fn new(all: &[u64], sources: Vec<usize>) -> Self {
        let product: BigUint = sources.iter().map(|&i| BigUint::from(all[i])).product();
        let hats: Vec<BigUint> = sources
            .iter()
            .map(|&i| &product / BigUint::from(all[i]))
            .collect();
        let small = |x: &BigUint, q: u64| {
            (x % BigUint::from(q))
                .to_u64_digits()
                .first()
                .copied()
                .unwrap_or(0)
        };
        let hat_inv = sources
            .iter()
            .zip(&hats)
            .map(|(&i, h)| {
                let m = modulus(all[i]);
                m.shoup(inv_mod(small(h, all[i]), all[i]))
            })
            .collect();
        let hat_mod = all
            .iter()
            .map(|&t| hats.iter().map(|h| small(h, t)).collect())
            .collect();
        let product_mod = all.iter().map(|&t| small(&product, t)).collect();
        Self {
            sources,
            hat_inv,
            hat_mod,
            product_mod,
        }
    }
}

fn modulus(q: u64) -> Modulus {
    // Every prime of a validated basis is below 2^62, so this cannot fail.
    Modulus::new(q).unwrap_or_else(|_| unreachable!("basis primes are below 2^62"))
}

/// Precomputed tables for one parameter set. Shared (`Arc`) by key generation, encryption and
/// evaluation.
#[derive(Debug)]
pub struct EvalContext {
    params: Arc<CkksParams>,
    encoder: SlotEncoder,
    /// `Q` primes then `P` primes.
    pub(crate) primes: Vec<u64>,
    pub(crate) moduli: Vec<Modulus>,
    pub(crate) q_count: usize,
    /// Digit `j` covers ciphertext primes `digits[j]`.
    pub(crate) digits: Vec<Range<usize>>,
    /// `mod_up[j][len − 1]`: conversion from the first `len` primes of digit `j`.
    pub(crate) mod_up: Vec<Vec<BaseConversion>>,
    /// Conversion from `P` to the ciphertext primes.
    pub(crate) mod_down: BaseConversion,
    /// `P^{-1} mod q_i`.
    pub(crate) p_inv: Vec<u64>,
    /// `P mod q_i`, for key generation.
    pub(crate) p_mod: Vec<u64>,
    /// `rescale_inv[l][i] = q_l^{-1} mod q_i` for `i < l`.
    pub(crate) rescale_inv: Vec<Vec<u64>>,
    /// `rescale_from[l]`: conversion from `q_l` alone (a centred lift), for rescaling.
    pub(crate) rescale_from: Vec<BaseConversion>,
    /// `mod_down_rescale[l]`: conversion from `q_l` and `P`, for a key switch's ModDown and
    /// the rescale after it in one division by `q_l·P`.
    pub(crate) mod_down_rescale: Vec<BaseConversion>,
    /// `mod_down_rescale_inv[l][i] = (q_l·P)^{-1} mod q_i` for `i < l`.
    pub(crate) mod_down_rescale_inv: Vec<Vec<u64>>,
    /// Evaluation `i` of an NTT is the value at `ψ^{exponents[i]}` (odd, below `2n`).
    exponents: Vec<usize>,
    /// Inverse of `exponents`: position of each odd exponent.
    position: Vec<u32>,
    /// `X^{n/2}` in evaluation form over the ciphertext primes, made on first use.
    /// `X^{n/2}` in evaluation form, made on first use (see `ring`).
    pub(super) i_monomial: OnceLock<Vec<u64>>,
}

impl EvalContext {
    /// Builds the tables; fails when the parameters have no special primes (no key
    /// switching is possible) or when the NTT backend orders evaluations differently per prime.
    pub fn new(params: &Arc<CkksParams>) -> Result<Arc<Self>, CkksError> {
        if params.special_count() == 0 {
            return Err(CkksError::InvalidParams(
                "evaluation needs key-switching primes: build the parameters with special_primes"
                    .into(),
            ));
        }
        let kb = params.key_basis();
        let primes = kb.moduli().to_vec();
        let q_count = params.basis().moduli().len();
        let moduli: Vec<Modulus> = primes.iter().map(|&q| modulus(q)).collect();
        let digits = params.digit_ranges();
        let mod_up = digits
            .iter()
            .map(|d| {
                (1..=d.len())
                    .map(|len| BaseConversion::new(&primes, (d.start..d.start + len).collect()))
                    .collect()
            })
            .collect();
        let mod_down = BaseConversion::new(&primes, (q_count..primes.len()).collect());
        let p_mod: Vec<u64> = primes[..q_count]
            .iter()
            .map(|&q| {
                primes[q_count..]
                    .iter()
                    .fold(1u64, |acc, &p| mul_mod(acc, p % q, q))
            })
            .collect();
        let p_inv: Vec<u64> = p_mod
            .iter()
            .zip(&moduli)
            .map(|(&pm, m)| inv_mod(pm, m.value()))
            .collect();
        let rescale_inv: Vec<Vec<u64>> = (0..q_count)
            .map(|l| {
                (0..l)
                    .map(|i| inv_mod(primes[l] % primes[i], primes[i]))
                    .collect()
            })
            .collect();
        let rescale_from = (0..q_count)
            .map(|l| BaseConversion::new(&primes, vec![l]))
            .collect();
        let mod_down_rescale = (0..q_count)
            .map(|l| {
                BaseConversion::new(
                    &primes,
                    std::iter::once(l).chain(q_count..primes.len()).collect(),
                )
            })
            .collect();
        let mod_down_rescale_inv = rescale_inv
            .iter()
            .map(|row: &Vec<u64>| {
                row.iter()
                    .enumerate()
                    .map(|(i, &ql_inv)| mul_mod(ql_inv, p_inv[i], primes[i]))
                    .collect()
            })
            .collect();
        let exponents = evaluation_exponents(params)?;
        let mut position = vec![u32::MAX; 2 * params.n()];
        for (i, &e) in exponents.iter().enumerate() {
            position[e] = i as u32;
        }
        Ok(Arc::new(Self {
            params: Arc::clone(params),
            encoder: SlotEncoder::new(params.n())?,
            primes,
            moduli,
            q_count,
            digits,
            mod_up,
            mod_down,
            p_inv,
            p_mod,
            rescale_inv,
            rescale_from,
            mod_down_rescale,
            mod_down_rescale_inv,
            exponents,
            position,
            i_monomial: OnceLock::new(),
        }))
    }

    /// The parameters.
    pub fn params(&self) -> &Arc<CkksParams> {
        &self.params
    }

    /// Ring degree.
    pub fn n(&self) -> usize {
        self.params.n()
    }

    /// Number of real slots, `n/2`.
    pub fn slots(&self) -> usize {
        self.n() / 2
    }

    /// The slot encoder.
    pub fn encoder(&self) -> &SlotEncoder {
        &self.encoder
    }

    /// Highest level (fresh ciphertexts).
    pub fn max_level(&self) -> usize {
        self.q_count - 1
    }

    /// The scale every ciphertext at level `l` carries, `Δ_l` ([`CkksParams::level_scale`]).
    pub fn level_scale(&self, level: usize) -> f64 {
        self.params.level_scale(level)
    }

    /// Prime indices of `Q_l · P`: the first `l + 1` ciphertext primes, then `P`.
    pub(crate) fn extended_indices(&self, level: usize) -> Vec<usize> {
        (0..=level).chain(self.q_count..self.primes.len()).collect()
    }

    /// The NTT plan of prime `i` (index into `Q` then `P`).
    pub(crate) fn ntt(&self, i: usize) -> &dyn privopt_math::ntt::Ntt {
        self.params.key_basis().ntt(i)
    }

    /// Galois element of a left rotation by `k` slots (`k` may be negative): `5^k mod 2n`.
    pub fn rotation_element(&self, k: i64) -> usize {
        let m = 2 * self.n();
        let half = (self.n() / 2) as i64;
        let mut e = k.rem_euclid(half) as u64;
        let (mut g, mut b) = (1usize, 5usize);
        while e > 0 {
            if e & 1 == 1 {
                g = g * b % m;
            }
            b = b * b % m;
            e >>= 1;
        }
        g
    }

    /// Galois element of complex conjugation, `2n − 1`.
    pub fn conjugation_element(&self) -> usize {
        2 * self.n() - 1
    }

    /// The permutation of evaluation-form entries that applies `X ↦ X^g`:
    /// `out[i] = in[perm[i]]`.
    pub(crate) fn galois_permutation(&self, g: usize) -> Vec<u32> {
        let m = 2 * self.n();
        self.exponents
            .iter()
            .map(|&e| self.position[e * g % m])
            .collect()
    }
}

/// The exponent `e_i` with evaluation `i` at `ψ^{e_i}` for a primitive `2n`-th root `ψ`, found
/// by transforming the monomial `X`, and checked to be the same for every prime.
fn evaluation_exponents(params: &CkksParams) -> Result<Vec<usize>, CkksError> {
    let kb = params.key_basis();
    let n = params.n();
    let m = 2 * n;
    let mut reference: Option<Vec<usize>> = None;
    for (i, &q) in kb.moduli().iter().enumerate() {
        let mut x = vec![0u64; n];
        x[1] = 1;
        kb.ntt(i).forward(&mut x);
        // ψ := the first evaluation point; every point is an odd power of it.
        let psi = x[0];
        let exps: Vec<usize> = match &reference {
            None => {
                let mut table = HashMap::with_capacity(m);
                let mut pw = 1u64;
                for k in 0..m {
                    table.insert(pw, k);
                    pw = mul_mod(pw, psi, q);
                }
                x.iter()
                    .map(|v| table.get(v).copied().unwrap_or(0))
                    .collect()
            }
            Some(r) => r.clone(),
        };
        let mut pows = vec![0u64; m];
        let mut pw = 1u64;
        for p in pows.iter_mut() {
            *p = pw;
            pw = mul_mod(pw, psi, q);
        }
        let consistent = exps
            .iter()
            .zip(&x)
            .all(|(&e, &v)| e % 2 == 1 && pows[e] == v);
        let mut seen = vec![false; m];
        let distinct = exps.iter().all(|&e| !std::mem::replace(&mut seen[e], true));
        if !consistent || !distinct {
            return Err(CkksError::InvalidParams(format!(
                "the NTT of prime {q} does not order its evaluation points like the first prime"
            )));
        }
        reference.get_or_insert(exps);
    }
    reference.ok_or_else(|| CkksError::InvalidParams("no primes".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::CkksParamsBuilder;

    /// `X ↦ X^g` on coefficients: `X^i ↦ ±X^{ig mod n}` (negacyclic).
    fn automorphism_coeff(a: &[u64], g: usize, q: u64) -> Vec<u64> {
        let n = a.len();
        let mut out = vec![0u64; n];
        for (i, &c) in a.iter().enumerate() {
            let e = i * g % (2 * n);
            if e < n {
                out[e] = c;
            } else {
                out[e - n] = (q - c) % q;
            }
        }
        out
    }

    #[test]
    fn evaluation_form_permutation_is_the_automorphism() {
        let params = CkksParamsBuilder::leveled(1024, 50, 40, 2, &[50])
            .insecure_for_testing(true)
            .build()
            .unwrap();
        let ctx = EvalContext::new(&params).unwrap();
        let n = 1024;
        for g in [
            5usize,
            25,
            ctx.rotation_element(-1),
            ctx.conjugation_element(),
        ] {
            let perm = ctx.galois_permutation(g);
            for i in 0..ctx.primes.len() {
                let q = ctx.primes[i];
                let a: Vec<u64> = (0..n as u64).map(|k| (k * k * 7919 + 3) % q).collect();
                let mut ev = a.clone();
                ctx.ntt(i).forward(&mut ev);
                let mut moved: Vec<u64> = perm.iter().map(|&p| ev[p as usize]).collect();
                ctx.ntt(i).inverse(&mut moved);
                assert_eq!(moved, automorphism_coeff(&a, g, q), "g={g} prime {i}");
            }
        }
        assert_eq!(ctx.rotation_element(0), 1);
        assert_eq!(ctx.rotation_element(1), 5);
        assert_eq!(ctx.rotation_element(-1), ctx.rotation_element(511));
    }

    #[test]
    fn level_scales_stay_near_nominal() {
        let params = CkksParamsBuilder::leveled(1 << 15, 50, 40, 16, &[44, 44, 44, 44])
            .build()
            .unwrap();
        let ctx = EvalContext::new(&params).unwrap();
        for l in 0..=ctx.max_level() {
            let r = ctx.level_scale(l) / 2f64.powi(40);
            assert!((r - 1.0).abs() < 1e-3, "level {l}: ratio {r}");
        }
        // Without matching, a 40-bit prime below 2^40 at every level would drift by
        // (1 + ε)^{2^16}; the chain above is the reason it does not.
        assert_eq!(ctx.digits.len(), params.digits());
    }

    #[test]
    fn level_scales_follow_a_profile() {
        let profile = [40, 40, 48, 54, 57, 58, 58, 58];
        let params = CkksParamsBuilder::profiled(1 << 12, 55, &profile, &[60, 60])
            .insecure_for_testing(true)
            .build()
            .unwrap();
        let ctx = EvalContext::new(&params).unwrap();
        assert_eq!(ctx.max_level(), profile.len() - 1);
        for (l, &target) in profile.iter().enumerate() {
            let off = ctx.level_scale(l).log2() - f64::from(target);
            assert!(
                off.abs() < 0.01,
                "level {l}: 2^{:.3}",
                ctx.level_scale(l).log2()
            );
        }
        // A fall of 20 bits in one level would need a 2^76 prime.
        let steep = CkksParamsBuilder::profiled(1 << 12, 55, &[40, 58], &[60])
            .insecure_for_testing(true)
            .build()
            .unwrap_err();
        assert!(steep.to_string().contains("changes too fast"), "{steep}");
        assert!(
            CkksParamsBuilder::profiled(1 << 12, 55, &[40], &[60])
                .insecure_for_testing(true)
                .build()
                .is_err()
        );
    }

    #[test]
    fn parameters_without_special_primes_cannot_evaluate() {
        let params = CkksParams::paper_n8192().unwrap();
        assert!(matches!(
            EvalContext::new(&params),
            Err(CkksError::InvalidParams(_))
        ));
    }
}
