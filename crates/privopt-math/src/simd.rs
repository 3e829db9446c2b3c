//! AVX-512 row kernels: sums of rows times constants modulo a prime, eight lanes at a time.
//!
//! Shoup's product by a constant needs the high half of one product per term. With IFMA the
//! 52-bit multiplier lanes (`vpmadd52lo/hi`) give it directly for primes below 2^51 and
//! operands below 2^52; otherwise AVX-512F/DQ builds the 64-bit high half from four 32-bit
//! products (primes below 2^63). [`Kernels::detect`] returns `None` on machines without
//! AVX-512; callers keep their scalar path for those.

#[cfg(target_arch = "x86_64")]
use pulp::{as_arrays, as_arrays_mut, cast};

// AVX-512F implies AVX2 and FMA for the compiler; the types list only what they add.
#[cfg(target_arch = "x86_64")]
pulp::simd_type! {
    struct V4Dq {
        pub avx512f: "avx512f",
        pub avx512dq: "avx512dq",
    }

    struct V4Ifma {
        pub avx512f: "avx512f",
        pub avx512ifma: "avx512ifma",
    }
}

/// The IFMA path wants moduli below this: a Shoup product lands in `[0, 2q)`, below 2^52,
/// the lanes' width (products and running sums are then brought into `[0, q)`).
pub const IFMA_MAX_MODULUS: u64 = 1 << 51;

/// The IFMA path wants row entries below this (the multiplier's operand width).
pub const IFMA_MAX_INPUT: u64 = 1 << 52;

/// Every path wants moduli below this (`[0, 2q)` must fit a word).
pub const MAX_MODULUS: u64 = 1 << 63;

/// A constant `w < q` with its Shoup factors `⌊w·2^52/q⌋` and `⌊w·2^64/q⌋`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constant {
    w: u64,
    shoup52: u64,
    shoup64: u64,
}

impl Constant {
    /// `w mod q` prepared for products modulo `q` (`q < MAX_MODULUS`).
    pub fn new(w: u64, q: u64) -> Self {
        let w = w % q;
        let shoup = |bits: u32| ((u128::from(w) << bits) / u128::from(q)) as u64;
        Self {
            w,
            shoup52: shoup(52).min((1 << 52) - 1),
            shoup64: shoup(64),
        }
    }
}

/// Proof that the CPU has AVX-512F and DQ, and whether it has IFMA.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    #[cfg(target_arch = "x86_64")]
    dq: V4Dq,
    #[cfg(target_arch = "x86_64")]
    ifma: Option<V4Ifma>,
}

impl Kernels {
    /// The kernels, if this CPU can run them.
    pub fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            V4Dq::try_new().map(|dq| Self {
                dq,
                ifma: V4Ifma::try_new(),
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// `dst[i] ← v·dst[i] + Σ_k rows[k][i] · w_k mod q` (`v` is `dst_weight`; without one,
    /// `dst`'s old entries are ignored), fully reduced. The caller vouches that every row
    /// entry and every old `dst` entry it weighs is below `entries_below` (residues of primes
    /// below it, say); the IFMA path runs where `q < IFMA_MAX_MODULUS` and `entries_below ≤
    /// IFMA_MAX_INPUT`, the 64-bit path elsewhere. Wants `q < MAX_MODULUS`, every row as long
    /// as `dst` and the length a multiple of 8; returns `false` (and leaves `dst` alone)
    /// otherwise, for the caller's scalar path.
    pub fn dot(
        self,
        q: u64,
        dst: &mut [u64],
        dst_weight: Option<Constant>,
        rows: &[&[u64]],
        constants: &[Constant],
        entries_below: u64,
    ) -> bool {
        let fits = q < MAX_MODULUS
            && dst.len().is_multiple_of(8)
            && rows.len() == constants.len()
            && rows.iter().all(|r| r.len() == dst.len());
        if !fits {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let rows: Vec<&[[u64; 8]]> = rows.iter().map(|r| as_arrays::<8, _>(r).0).collect();
            let dst = as_arrays_mut::<8, _>(dst).0;
            let dq = self.dq;
            match self.ifma {
                Some(simd) if q < IFMA_MAX_MODULUS && entries_below <= IFMA_MAX_INPUT => simd
                    .vectorize(
                        #[inline(always)]
                        || {
                            let p = Shoup52 {
                                lanes: Lanes::new(dq.avx512f, q),
                                ifma: simd.avx512ifma,
                            };
                            accumulate(p, dst, dst_weight, &rows, constants);
                        },
                    ),
                _ => dq.vectorize(
                    #[inline(always)]
                    || {
                        let p = Shoup64 {
                            lanes: Lanes::new(dq.avx512f, q),
                            dq: dq.avx512dq,
                        };
                        accumulate(p, dst, dst_weight, &rows, constants);
                    },
                ),
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

#[cfg(target_arch = "x86_64")]
use pulp::core_arch::x86::{Avx512dq, Avx512f, Avx512ifma};
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::__m512i;

/// The lanes' common state: the AVX-512F token and the modulus, splat.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Lanes {
    f: Avx512f,
    q: __m512i,
}

#[cfg(target_arch = "x86_64")]
impl Lanes {
    #[inline(always)]
    fn new(f: Avx512f, q: u64) -> Self {
        Self {
            f,
            q: f._mm512_set1_epi64(q as i64),
        }
    }
}

/// Shoup's product by a constant splat across the lanes, landing in `[0, 2q)`. (Named
/// functions, not closures: only `#[inline(always)]` code is compiled with the caller's
/// target features, and closures cannot carry the attribute here.)
#[cfg(target_arch = "x86_64")]
trait ShoupProduct: Copy {
    /// The constant, splat.
    type Splat;
    fn lanes(self) -> Lanes;
    fn splat(self, c: &Constant) -> Self::Splat;
    fn product(self, y: __m512i, c: &Self::Splat) -> __m512i;
}

/// IFMA: `r = y·w − ⌊y·w'/2^52⌋·q`, exact modulo 2^52.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Shoup52 {
    lanes: Lanes,
    ifma: Avx512ifma,
}

#[cfg(target_arch = "x86_64")]
impl ShoupProduct for Shoup52 {
    type Splat = (__m512i, __m512i);
    #[inline(always)]
    fn lanes(self) -> Lanes {
        self.lanes
    }
    #[inline(always)]
    fn splat(self, c: &Constant) -> Self::Splat {
        let f = self.lanes.f;
        (
            f._mm512_set1_epi64(c.w as i64),
            f._mm512_set1_epi64(c.shoup52 as i64),
        )
    }
    #[inline(always)]
    fn product(self, y: __m512i, &(w, shoup): &Self::Splat) -> __m512i {
        let (Lanes { f, q }, ifma) = (self.lanes, self.ifma);
        let zero = f._mm512_setzero_si512();
        let hi = ifma._mm512_madd52hi_epu64(zero, y, shoup);
        f._mm512_and_si512(
            f._mm512_sub_epi64(
                ifma._mm512_madd52lo_epu64(zero, y, w),
                ifma._mm512_madd52lo_epu64(zero, hi, q),
            ),
            f._mm512_set1_epi64(((1u64 << 52) - 1) as i64),
        )
    }
}

/// AVX-512F/DQ: `r = y·w − ⌊y·w'/2^64⌋·q` in wrapping 64-bit words, the high half of `y·w'`
/// from four 32 × 32-bit products.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Shoup64 {
    lanes: Lanes,
    dq: Avx512dq,
}

#[cfg(target_arch = "x86_64")]
impl ShoupProduct for Shoup64 {
    type Splat = (__m512i, __m512i, __m512i);
    #[inline(always)]
    fn lanes(self) -> Lanes {
        self.lanes
    }
    #[inline(always)]
    fn splat(self, c: &Constant) -> Self::Splat {
        let f = self.lanes.f;
        let shoup = f._mm512_set1_epi64(c.shoup64 as i64);
        (
            f._mm512_set1_epi64(c.w as i64),
            shoup,
            f._mm512_srli_epi64::<32>(shoup),
        )
    }
    #[inline(always)]
    fn product(self, y: __m512i, &(w, shoup, shoup_hi): &Self::Splat) -> __m512i {
        let Lanes { f, q } = self.lanes;
        let y_hi = f._mm512_srli_epi64::<32>(y);
        let lo_lo = f._mm512_mul_epu32(y, shoup);
        let lo_hi = f._mm512_mul_epu32(y, shoup_hi);
        let hi_lo = f._mm512_mul_epu32(y_hi, shoup);
        let hi_hi = f._mm512_mul_epu32(y_hi, shoup_hi);
        let mid = f._mm512_add_epi64(lo_hi, f._mm512_srli_epi64::<32>(lo_lo));
        let low32 = f._mm512_set1_epi64(0xFFFF_FFFF);
        let mid2 = f._mm512_add_epi64(hi_lo, f._mm512_and_si512(mid, low32));
        let hi = f._mm512_add_epi64(
            hi_hi,
            f._mm512_add_epi64(
                f._mm512_srli_epi64::<32>(mid),
                f._mm512_srli_epi64::<32>(mid2),
            ),
        );
        f._mm512_sub_epi64(
            self.dq._mm512_mullo_epi64(y, w),
            self.dq._mm512_mullo_epi64(hi, q),
        )
    }
}

/// `x mod q` for `x < 2q`: the unsigned min with the wrapped `x − q`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn reduce_once(f: Avx512f, q: __m512i, x: __m512i) -> __m512i {
    f._mm512_min_epu64(x, f._mm512_sub_epi64(x, q))
}

/// The loop of [`Kernels::dot`]: each product and each running sum brought into `[0, q)`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn accumulate<P: ShoupProduct>(
    p: P,
    dst: &mut [[u64; 8]],
    dst_weight: Option<Constant>,
    rows: &[&[[u64; 8]]],
    constants: &[Constant],
) {
    let Lanes { f, q } = p.lanes();
    let consts: Vec<P::Splat> = constants.iter().map(|c| p.splat(c)).collect();
    let keep = dst_weight.map(|c| p.splat(&c));
    for (i, out) in dst.iter_mut().enumerate() {
        let mut acc = match &keep {
            Some(v) => reduce_once(f, q, p.product(cast(*out), v)),
            None => f._mm512_setzero_si512(),
        };
        for (row, c) in rows.iter().zip(&consts) {
            let term = reduce_once(f, q, p.product(cast(row[i]), c));
            acc = reduce_once(f, q, f._mm512_add_epi64(acc, term));
        }
        *out = cast(acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modarith::ntt_primes;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// `v·dst + Σ rows·w mod q`, exactly.
    fn reference(q: u64, old: &[u64], v: Option<u64>, rows: &[Vec<u64>], ws: &[u64]) -> Vec<u64> {
        (0..old.len())
            .map(|i| {
                let start = v.map_or(0, |v| u128::from(old[i]) * u128::from(v % q));
                let sum = rows
                    .iter()
                    .zip(ws)
                    .map(|(r, &w)| u128::from(r[i]) * u128::from(w % q))
                    .fold(start, |a, t| (a + t) % u128::from(q));
                sum as u64
            })
            .collect()
    }

    #[test]
    fn dot_equals_the_exact_sum_of_products_on_both_paths() {
        let Some(kernels) = Kernels::detect() else {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        };
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        // The IFMA path's largest primes and a small one (inputs up to 2^52, the extremes),
        // then 60- and 62-bit primes on the 64-bit path (inputs up to 2^64 − 1).
        let cases = [
            (51, IFMA_MAX_INPUT),
            (30, IFMA_MAX_INPUT),
            (60, u64::MAX),
            (62, u64::MAX),
        ];
        for (bits, below) in cases {
            let q = ntt_primes(1 << 10, bits, 1, &[]).unwrap()[0];
            let len = 64;
            let entry = |rng: &mut ChaCha20Rng, i: usize| match i % 4 {
                0 => below - 1,
                1 => 0,
                _ => rng.random_range(0..below),
            };
            let rows: Vec<Vec<u64>> = (0..5)
                .map(|k| (0..len).map(|i| entry(&mut rng, i + k)).collect())
                .collect();
            let ws = [q - 1, 0, 1, rng.random_range(0..q), rng.random_range(0..q)];
            let constants: Vec<_> = ws.iter().map(|&w| Constant::new(w, q)).collect();
            let refs: Vec<&[u64]> = rows.iter().map(|r| &r[..]).collect();
            let mut dst = vec![u64::MAX; len];
            assert!(kernels.dot(q, &mut dst, None, &refs, &constants, below));
            assert_eq!(dst, reference(q, &dst, None, &rows, &ws), "{bits}-bit q");
            // Weighing the old entries (residues): 3·dst + rows[0]·w_0.
            let mut again = dst.clone();
            let three = Some(Constant::new(3, q));
            assert!(kernels.dot(q, &mut again, three, &refs[..1], &constants[..1], below));
            assert_eq!(again, reference(q, &dst, Some(3), &rows[..1], &ws[..1]));
        }
    }

    #[test]
    fn dot_refuses_what_it_cannot_do_exactly() {
        let Some(kernels) = Kernels::detect() else {
            return;
        };
        let q = ntt_primes(1 << 10, 51, 1, &[]).unwrap()[0];
        let row = vec![1u64; 16];
        let c = [Constant::new(3, q)];
        let mut dst = vec![7u64; 16];
        let b = IFMA_MAX_INPUT;
        assert!(!kernels.dot(MAX_MODULUS + 1, &mut dst, None, &[&row], &c, b));
        assert!(!kernels.dot(q, &mut dst[..12], None, &[&row[..12]], &c, b));
        assert!(!kernels.dot(q, &mut dst, None, &[&row[..8]], &c, b));
        assert!(!kernels.dot(q, &mut dst, None, &[&row, &row], &c, b));
        assert_eq!(dst, vec![7u64; 16], "a refused call leaves dst alone");
    }
}
