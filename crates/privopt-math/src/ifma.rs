//! AVX-512 IFMA row kernels for primes below 2^51.
//!
//! The 52-bit multiplier lanes (`vpmadd52lo/hi`) give the high half of a 52 × 52-bit
//! product directly, which is all Shoup's product by a constant needs when every operand is
//! below 2^52: eight products per instruction where the scalar path needs a 64 × 64 → 128-bit
//! multiply each. [`Ifma::detect`] returns `None` on machines without IFMA; callers keep their
//! scalar path for those and for larger primes.

use pulp::{as_arrays, as_arrays_mut, cast};

#[cfg(target_arch = "x86_64")]
pulp::simd_type! {
    struct V4Ifma {
        pub sse: "sse",
        pub sse2: "sse2",
        pub fxsr: "fxsr",
        pub sse3: "sse3",
        pub ssse3: "ssse3",
        pub sse4_1: "sse4.1",
        pub sse4_2: "sse4.2",
        pub popcnt: "popcnt",
        pub avx: "avx",
        pub avx2: "avx2",
        pub bmi1: "bmi1",
        pub bmi2: "bmi2",
        pub fma: "fma",
        pub lzcnt: "lzcnt",
        pub avx512f: "avx512f",
        pub avx512ifma: "avx512ifma",
    }
}

/// Moduli must be below this: a Shoup product lands in `[0, 2q)`, below 2^52, the lanes'
/// width (products and running sums are then brought into `[0, q)`).
pub const MAX_MODULUS: u64 = 1 << 51;

/// Row entries must be below this (the multiplier's operand width).
pub const MAX_INPUT: u64 = 1 << 52;

/// A constant `w < q` with its Shoup factor `⌊w·2^52/q⌋` for [`Ifma::dot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constant52 {
    w: u64,
    shoup: u64,
}

impl Constant52 {
    /// `w mod q` prepared for products modulo `q` (`q < MAX_MODULUS`).
    pub fn new(w: u64, q: u64) -> Self {
        let w = w % q;
        Self {
            w,
            shoup: ((u128::from(w) << 52) / u128::from(q)) as u64,
        }
    }
}

/// Proof that the CPU has AVX-512F and IFMA.
#[derive(Clone, Copy, Debug)]
pub struct Ifma(#[cfg(target_arch = "x86_64")] V4Ifma);

impl Ifma {
    /// The kernels, if this CPU can run them.
    pub fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            V4Ifma::try_new().map(Self)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// `dst[i] ← v·dst[i] + Σ_k rows[k][i] · w_k mod q` (`v` is `dst_weight`; without one,
    /// `dst`'s old entries are ignored), fully reduced, where the caller vouches that every
    /// row entry and every old `dst` entry it weighs is below `entries_below` (residues of
    /// primes below it, say). Wants `q < MAX_MODULUS`, `entries_below ≤ MAX_INPUT`, every row
    /// as long as `dst` and the length a multiple of 8; returns `false` (and leaves `dst`
    /// alone) otherwise, for the caller's scalar path.
    pub fn dot(
        self,
        q: u64,
        dst: &mut [u64],
        dst_weight: Option<Constant52>,
        rows: &[&[u64]],
        constants: &[Constant52],
        entries_below: u64,
    ) -> bool {
        let fits = q < MAX_MODULUS
            && entries_below <= MAX_INPUT
            && dst.len().is_multiple_of(8)
            && rows.len() == constants.len()
            && rows.iter().all(|r| r.len() == dst.len());
        if !fits {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let simd = self.0;
            simd.vectorize(
                #[inline(always)]
                || {
                    let f = simd.avx512f;
                    let ifma = simd.avx512ifma;
                    let zero = f._mm512_setzero_si512();
                    let mask52 = f._mm512_set1_epi64(((1u64 << 52) - 1) as i64);
                    let q1 = f._mm512_set1_epi64(q as i64);
                    let rows: Vec<&[[u64; 8]]> =
                        rows.iter().map(|r| as_arrays::<8, _>(r).0).collect();
                    let splat = |c: &Constant52| {
                        (
                            f._mm512_set1_epi64(c.w as i64),
                            f._mm512_set1_epi64(c.shoup as i64),
                        )
                    };
                    let consts: Vec<_> = constants.iter().map(splat).collect();
                    let keep = dst_weight.as_ref().map(splat);
                    // y·w mod q in [0, q): Shoup's r = y·w − ⌊y·w'/2^52⌋·q ∈ [0, 2q) is exact
                    // modulo 2^52; then the unsigned min with the wrapped r − q.
                    let product = |y, (w, shoup)| {
                        let hi = ifma._mm512_madd52hi_epu64(zero, y, shoup);
                        let r = f._mm512_and_si512(
                            f._mm512_sub_epi64(
                                ifma._mm512_madd52lo_epu64(zero, y, w),
                                ifma._mm512_madd52lo_epu64(zero, hi, q1),
                            ),
                            mask52,
                        );
                        f._mm512_min_epu64(r, f._mm512_sub_epi64(r, q1))
                    };
                    for (i, out) in as_arrays_mut::<8, _>(dst).0.iter_mut().enumerate() {
                        let mut acc = match keep {
                            Some(v) => product(cast(*out), v),
                            None => zero,
                        };
                        for (row, &c) in rows.iter().zip(&consts) {
                            let sum = f._mm512_add_epi64(acc, product(cast(row[i]), c));
                            acc = f._mm512_min_epu64(sum, f._mm512_sub_epi64(sum, q1));
                        }
                        *out = cast(acc);
                    }
                },
            );
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modarith::ntt_primes;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn dot_equals_the_exact_sum_of_products() {
        let Some(ifma) = Ifma::detect() else {
            eprintln!("no IFMA on this CPU: nothing to compare");
            return;
        };
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        // The largest primes allowed and a small one; inputs up to 2^52 (a larger source
        // prime's residues) and the extremes.
        for q in ntt_primes(1 << 10, 51, 1, &[])
            .unwrap()
            .into_iter()
            .chain(ntt_primes(1 << 10, 30, 1, &[]).unwrap())
        {
            let len = 64;
            let rows: Vec<Vec<u64>> = (0..5)
                .map(|k| {
                    (0..len)
                        .map(|i| match (i + k) % 4 {
                            0 => MAX_INPUT - 1,
                            1 => 0,
                            _ => rng.random_range(0..MAX_INPUT),
                        })
                        .collect()
                })
                .collect();
            let ws: Vec<u64> = vec![q - 1, 0, 1, rng.random_range(0..q), rng.random_range(0..q)];
            let constants: Vec<_> = ws.iter().map(|&w| Constant52::new(w, q)).collect();
            let refs: Vec<&[u64]> = rows.iter().map(|r| &r[..]).collect();
            let mut dst = vec![u64::MAX; len];
            assert!(ifma.dot(q, &mut dst, None, &refs, &constants, MAX_INPUT));
            for (i, &got) in dst.iter().enumerate() {
                let want = rows
                    .iter()
                    .zip(&ws)
                    .map(|(r, &w)| u128::from(r[i]) * u128::from(w))
                    .sum::<u128>()
                    % u128::from(q);
                assert_eq!(u128::from(got), want, "q = {q}, entry {i}");
            }
            // Weighing the old entries: 3·dst + rows[0]·w_0.
            let mut again = dst.clone();
            let three = Constant52::new(3, q);
            assert!(ifma.dot(
                q,
                &mut again,
                Some(three),
                &refs[..1],
                &constants[..1],
                MAX_INPUT
            ));
            for (i, (&got, &old)) in again.iter().zip(&dst).enumerate() {
                let want = (3 * u128::from(old) + u128::from(rows[0][i]) * u128::from(ws[0]))
                    % u128::from(q);
                assert_eq!(u128::from(got), want, "weighted, entry {i}");
            }
        }
    }

    #[test]
    fn dot_refuses_what_it_cannot_do_exactly() {
        let Some(ifma) = Ifma::detect() else {
            return;
        };
        let q = ntt_primes(1 << 10, 51, 1, &[]).unwrap()[0];
        let big = ntt_primes(1 << 10, 52, 1, &[]).unwrap()[0];
        let row = vec![1u64; 16];
        let c = [Constant52::new(3, q)];
        let mut dst = vec![7u64; 16];
        let b = MAX_INPUT;
        let big_c = [Constant52::new(3, big)];
        assert!(!ifma.dot(big, &mut dst, None, &[&row], &big_c, b));
        assert!(!ifma.dot(q, &mut dst, None, &[&row], &c, b + 1));
        assert!(!ifma.dot(q, &mut dst[..12], None, &[&row[..12]], &c, b));
        assert!(!ifma.dot(q, &mut dst, None, &[&row[..8]], &c, b));
        assert!(!ifma.dot(q, &mut dst, None, &[&row, &row], &c, b));
        assert_eq!(dst, vec![7u64; 16], "a refused call leaves dst alone");
    }
}
