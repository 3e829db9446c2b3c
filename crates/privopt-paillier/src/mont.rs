//! Montgomery arithmetic on little-endian `u64` limbs: the hot paths of Paillier
//! (exponentiation and products mod `p²`, `q²`, `n²`) in pure Rust, with no GMP.
//!
//! A [`Modulus`] fixes an odd modulus `m` of `k` limbs and `R = 2^(64k)`. Values live in
//! Montgomery form `x·R mod m` as `k`-limb slices. A product is the full double-length product
//! followed by a Montgomery reduction; a square forms only the half product (about 25% fewer
//! limb products). Both are rows of one kernel, `t += a·b` ([`Kernel`]): `mulx`/`adcx`/`adox`
//! assembly on x86-64 CPUs that have them, portable Rust elsewhere. Every product ends in a
//! masked conditional subtraction, so [`Modulus::pow_secret`] — fixed window, every table entry
//! read on every lookup — takes a time that depends only on the exponent's public bit length.

use num_bigint::BigUint;
use zeroize::Zeroize;

#[cfg(target_arch = "x86_64")]
mod adx;

/// Largest modulus handled: 8192 bits (`n²` of a 4096-bit key).
pub(crate) const MAX_LIMBS: usize = 128;

/// Window of the constant-time exponentiation (a table of 32 entries).
const SECRET_WINDOW: u32 = 5;

/// An odd modulus with its Montgomery constants.
#[derive(Clone, Debug)]
pub(crate) struct Modulus {
    m: Vec<u64>,
    /// `−m⁻¹ mod 2^64`.
    m_inv: u64,
    /// `R² mod m` (to enter Montgomery form).
    r2: Vec<u64>,
    /// `R³ mod m` (to enter Montgomery form after a reduction of a double-length value).
    r3: Vec<u64>,
    /// `R mod m`, the Montgomery form of 1.
    one: Vec<u64>,
    big: BigUint,
    kernel: Kernel,
}

impl Drop for Modulus {
    /// A modulus may be secret (`p²`, `q²`): its limbs and constants are wiped, and the big
    /// integer's buffer is overwritten in place (best effort: `num-bigint` may have copied it
    /// before).
    fn drop(&mut self) {
        self.m.zeroize();
        self.r2.zeroize();
        self.r3.zeroize();
        self.one.zeroize();
        wipe(&mut self.big);
    }
}

/// Overwrites a big integer's buffer with zeros in place (best effort: `num-bigint` may have
/// copied it before, e.g. when it grew).
pub(crate) fn wipe(x: &mut BigUint) {
    let words = x.bits().div_ceil(32) as usize;
    x.assign_from_slice(&vec![0u32; words]);
}

/// A secret big integer (a prime, `φ(n)`, a CRT half) wiped when dropped.
pub(crate) struct Wiped(pub(crate) BigUint);

impl std::ops::Deref for Wiped {
    type Target = BigUint;
    fn deref(&self) -> &BigUint {
        &self.0
    }
}

impl Drop for Wiped {
    fn drop(&mut self) {
        wipe(&mut self.0);
    }
}

/// Little-endian limbs of `x`, zero-padded to `len`.
pub(crate) fn limbs(x: &BigUint, len: usize) -> Vec<u64> {
    let mut out = x.to_u64_digits();
    out.resize(len, 0);
    out
}

/// The integer of little-endian limbs.
pub(crate) fn from_limbs(x: &[u64]) -> BigUint {
    let bytes: Vec<u8> = x.iter().flat_map(|l| l.to_le_bytes()).collect();
    BigUint::from_bytes_le(&bytes)
}

/// `t[..a.len()] += a·b` in plain Rust, returning the limb carried out.
#[inline(always)]
fn addmul_1_portable(t: &mut [u64], a: &[u64], b: u64) -> u64 {
    let mut carry = 0u64;
    for (x, &aj) in t.iter_mut().zip(a) {
        let (s, c) = mac(*x, aj, b, carry);
        *x = s;
        carry = c;
    }
    carry
}

/// The row kernel `t += a·b` under every product and square: `mulx`/`adcx`/`adox` assembly
/// where the CPU has them, plain Rust elsewhere (same results, both constant time).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kernel {
    /// Portable Rust (`u128` products).
    Portable,
    /// x86-64 with BMI2 and ADX.
    #[cfg(target_arch = "x86_64")]
    Adx(adx::Adx),
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if let Some(token) = adx::Adx::detect() {
            return Self::Adx(token);
        }
        Self::Portable
    }

    #[inline(always)]
    fn addmul_1(self, t: &mut [u64], a: &[u64], b: u64) -> u64 {
        match self {
            Self::Portable => addmul_1_portable(t, a, b),
            #[cfg(target_arch = "x86_64")]
            Self::Adx(token) => token.addmul_1(t, a, b),
        }
    }
}

/// `a + b·c + carry` split into (low, high) limbs; never overflows 128 bits.
#[inline(always)]
fn mac(a: u64, b: u64, c: u64, carry: u64) -> (u64, u64) {
    let t = u128::from(a) + u128::from(b) * u128::from(c) + u128::from(carry);
    (t as u64, (t >> 64) as u64)
}

/// `a + b + carry` with the carry out.
#[inline(always)]
fn adc(a: u64, b: u64, carry: u64) -> (u64, u64) {
    let t = u128::from(a) + u128::from(b) + u128::from(carry);
    (t as u64, (t >> 64) as u64)
}

/// All ones if `a == b`, else zero, without branching on either.
#[inline(always)]
fn ct_eq_mask(a: u64, b: u64) -> u64 {
    let x = a ^ b;
    // (x | −x) has its top bit set iff x ≠ 0.
    let nonzero = (x | x.wrapping_neg()) >> 63;
    nonzero.wrapping_sub(1)
}

impl Modulus {
    /// The Montgomery context of an odd `m > 1` of at most [`MAX_LIMBS`] limbs.
    pub(crate) fn new(m: &BigUint) -> Option<Self> {
        Self::with_kernel(m, Kernel::detect())
    }

    /// [`Modulus::new`] with a chosen row kernel (tests compare them).
    pub(crate) fn with_kernel(m: &BigUint, kernel: Kernel) -> Option<Self> {
        let digits = m.to_u64_digits();
        let k = digits.len();
        if k == 0 || k > MAX_LIMBS || digits[0] & 1 == 0 || *m == BigUint::from(1u8) {
            return None;
        }
        // Newton iteration for m⁻¹ mod 2^64: each step doubles the correct low bits.
        let m0 = digits[0];
        let mut inv = 1u64;
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(m0.wrapping_mul(inv)));
        }
        let r = BigUint::from(1u8) << (64 * k);
        let one = &r % m;
        let r2 = (&one * &one) % m;
        let r3 = (&r2 * &one) % m;
        Some(Self {
            m: digits,
            m_inv: inv.wrapping_neg(),
            r2: limbs(&r2, k),
            r3: limbs(&r3, k),
            one: limbs(&one, k),
            big: m.clone(),
            kernel,
        })
    }

    /// Limbs per value.
    pub(crate) fn len(&self) -> usize {
        self.m.len()
    }

    /// The modulus.
    pub(crate) fn value(&self) -> &BigUint {
        &self.big
    }

    /// The Montgomery form of 1.
    pub(crate) fn one(&self) -> Vec<u64> {
        self.one.clone()
    }

    /// `t − m` if `t ≥ m` (with `t`'s extra top limb `top`), else `t`, written to `out`;
    /// the choice is a mask, not a branch.
    #[inline(always)]
    fn final_subtract(&self, t: &[u64], top: u64, out: &mut [u64]) {
        let mut borrow = 0u64;
        for ((o, &x), &m) in out.iter_mut().zip(t).zip(&self.m) {
            let (d, b1) = x.overflowing_sub(m);
            let (d, b2) = d.overflowing_sub(borrow);
            *o = d;
            borrow = u64::from(b1 | b2);
        }
        // Keep the difference unless it borrowed past the top limb.
        let (_, under) = top.overflowing_sub(borrow);
        let keep_t = u64::from(under).wrapping_neg();
        for (o, &x) in out.iter_mut().zip(t) {
            *o = (*o & !keep_t) | (x & keep_t);
        }
    }

    /// `out = a·b·R⁻¹ mod m`: the full product (one row `t += a·b_i` per limb of `b`), then
    /// a Montgomery reduction. Inputs below `m`; `out` may not alias them.
    pub(crate) fn mul(&self, a: &[u64], b: &[u64], out: &mut [u64]) {
        let k = self.m.len();
        let (a, b) = (&a[..k], &b[..k]);
        let mut t = [0u64; 2 * MAX_LIMBS];
        let t = &mut t[..2 * k];
        for (i, &bi) in b.iter().enumerate() {
            // Rows before this one reached at most limb i + k − 1: limb i + k is still zero.
            t[i + k] = self.kernel.addmul_1(&mut t[i..i + k], a, bi);
        }
        self.reduce(t, out);
    }

    /// `out = t·R⁻¹ mod m` for a double-length `t < m·R` (Montgomery reduction); `t` is
    /// consumed as scratch.
    fn reduce(&self, t: &mut [u64], out: &mut [u64]) {
        let k = self.m.len();
        let m = &self.m[..k];
        for i in 0..k {
            // Row i zeroes limb i; its carry belongs at limb i + k. No later row's quotient
            // reads a limb at or above k, so the carries wait in the zeroed limbs and are
            // added in one pass at the end.
            let q = t[i].wrapping_mul(self.m_inv);
            t[i] = self.kernel.addmul_1(&mut t[i..i + k], m, q);
        }
        let (carries, high) = t.split_at_mut(k);
        let mut top = 0u64;
        for (x, &c) in high.iter_mut().zip(carries.iter()) {
            let (s, cc) = adc(*x, c, top);
            *x = s;
            top = cc;
        }
        self.final_subtract(high, top, out);
    }

    /// `out = a²·R⁻¹ mod m`: the half product, doubled, plus the squares, then reduced.
    pub(crate) fn sqr(&self, a: &[u64], out: &mut [u64]) {
        let k = self.m.len();
        let a = &a[..k];
        let mut t = [0u64; 2 * MAX_LIMBS];
        let t = &mut t[..2 * k];
        // Off-diagonal products a_i·a_j (j > i), row i starting at limb 2i + 1.
        for i in 0..k.saturating_sub(1) {
            t[i + k] = self
                .kernel
                .addmul_1(&mut t[2 * i + 1..i + k], &a[i + 1..], a[i]);
        }
        let mut hi = 0u64;
        for x in t.iter_mut() {
            let next = *x >> 63;
            *x = (*x << 1) | hi;
            hi = next;
        }
        let mut c = 0u64;
        for i in 0..k {
            let sq = u128::from(a[i]) * u128::from(a[i]);
            let (s, cc) = adc(t[2 * i], sq as u64, c);
            t[2 * i] = s;
            let (s, cc) = adc(t[2 * i + 1], (sq >> 64) as u64, cc);
            t[2 * i + 1] = s;
            c = cc;
        }
        self.reduce(t, out);
    }

    /// The Montgomery form of `x` (any size below `m·R`; reduced here).
    pub(crate) fn to_mont(&self, x: &BigUint) -> Vec<u64> {
        let k = self.m.len();
        if *x < self.big {
            let mut out = vec![0u64; k];
            self.mul(&limbs(x, k), &self.r2, &mut out);
            out
        } else {
            let mut wide = limbs(&(x % (&self.big << (64 * k))), 2 * k);
            let out = self.to_mont_wide(&wide);
            wide.zeroize();
            out
        }
    }

    /// The Montgomery form of the double-length `x < m·R` given as limbs, without a generic
    /// big-integer division (the secret path of decryption reduces `c mod p²` this way):
    /// `x·R⁻¹` by a reduction, then a product by `R³` gives `x·R`.
    pub(crate) fn to_mont_wide(&self, x: &[u64]) -> Vec<u64> {
        let k = self.m.len();
        let mut t = [0u64; 2 * MAX_LIMBS];
        let n = x.len().min(2 * k);
        t[..n].copy_from_slice(&x[..n]);
        let mut y = vec![0u64; k];
        self.reduce(&mut t[..2 * k], &mut y);
        let mut out = vec![0u64; k];
        self.mul(&y, &self.r3, &mut out);
        t.zeroize();
        y.zeroize();
        out
    }

    /// The ordinary integer of a Montgomery-form value.
    pub(crate) fn out_of_mont(&self, x: &[u64]) -> BigUint {
        let k = self.m.len();
        let mut t = [0u64; 2 * MAX_LIMBS];
        t[..k].copy_from_slice(&x[..k]);
        let mut out = vec![0u64; k];
        self.reduce(&mut t[..2 * k], &mut out);
        from_limbs(&out)
    }

    /// `x·R mod m`: one more Montgomery factor (a product by `R²`).
    pub(crate) fn lift(&self, x: &[u64]) -> Vec<u64> {
        self.mul_new(x, &self.r2)
    }

    /// Montgomery form of `a·b` from Montgomery forms (a fresh vector).
    pub(crate) fn mul_new(&self, a: &[u64], b: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; self.m.len()];
        self.mul(a, b, &mut out);
        out
    }

    /// `base^e` (Montgomery form in and out) in time that depends only on `exp_bits`, the
    /// public bound on `e`'s length: a fixed 5-bit window, each table entry read on every
    /// lookup and combined by masks.
    pub(crate) fn pow_secret(&self, base: &[u64], e: &[u64], exp_bits: u32) -> Vec<u64> {
        let k = self.m.len();
        let entries = 1usize << SECRET_WINDOW;
        let mut table = vec![0u64; entries * k];
        table[..k].copy_from_slice(&self.one);
        table[k..2 * k].copy_from_slice(&base[..k]);
        for i in 2..entries {
            let (done, rest) = table.split_at_mut(i * k);
            self.mul(&done[(i - 1) * k..], base, &mut rest[..k]);
        }
        let windows = exp_bits.div_ceil(SECRET_WINDOW);
        let mut acc = self.one.clone();
        let mut tmp = vec![0u64; k];
        let mut pick = vec![0u64; k];
        for w in (0..windows).rev() {
            for _ in 0..SECRET_WINDOW {
                self.sqr(&acc, &mut tmp);
                std::mem::swap(&mut acc, &mut tmp);
            }
            let digit = window_digit(e, w * SECRET_WINDOW, SECRET_WINDOW);
            pick.fill(0);
            for (j, entry) in table.chunks_exact(k).enumerate() {
                let mask = ct_eq_mask(j as u64, digit);
                for (p, &x) in pick.iter_mut().zip(entry) {
                    *p |= x & mask;
                }
            }
            self.mul(&acc, &pick, &mut tmp);
            std::mem::swap(&mut acc, &mut tmp);
        }
        table.zeroize();
        tmp.zeroize();
        pick.zeroize();
        acc
    }

    /// `base^e` (Montgomery form in and out) for a public exponent: left-to-right with a
    /// 4-bit window, skipping zero digits.
    pub(crate) fn pow_public(&self, base: &[u64], e: &BigUint) -> Vec<u64> {
        // A table of 2^width − 2 products pays off only for long exponents: a scalar of a few
        // dozen bits (a homomorphic product by a weight) is cheapest bit by bit.
        let width: u32 = match e.bits() {
            0..=32 => 1,
            33..=128 => 3,
            _ => 4,
        };
        let k = self.m.len();
        let mut table = vec![self.one.clone(), base[..k].to_vec()];
        for i in 2..1usize << width {
            let next = self.mul_new(&table[i - 1], base);
            table.push(next);
        }
        let e_limbs = e.to_u64_digits();
        let windows = (e.bits() as u32).div_ceil(width);
        let mut acc = self.one.clone();
        let mut tmp = vec![0u64; k];
        let mut started = false;
        for w in (0..windows).rev() {
            if started {
                for _ in 0..width {
                    self.sqr(&acc, &mut tmp);
                    std::mem::swap(&mut acc, &mut tmp);
                }
            }
            let digit = window_digit(&e_limbs, w * width, width) as usize;
            if digit != 0 {
                self.mul(&acc, &table[digit], &mut tmp);
                std::mem::swap(&mut acc, &mut tmp);
                started = true;
            }
        }
        acc
    }
}

/// Bits `[start, start + width)` of the little-endian limbs `e` (zero past the end).
fn window_digit(e: &[u64], start: u32, width: u32) -> u64 {
    let limb = (start / 64) as usize;
    let shift = start % 64;
    let lo = e.get(limb).copied().unwrap_or(0) >> shift;
    let hi = if shift + width > 64 {
        e.get(limb + 1).copied().unwrap_or(0) << (64 - shift)
    } else {
        0
    };
    (lo | hi) & ((1u64 << width) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;

    fn odd_modulus(bits: u64, seed: u64) -> BigUint {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let mut m = random_biguint(bits, &mut rng);
        m |= BigUint::from(1u8) << (bits - 1);
        m |= BigUint::from(1u8);
        m
    }

    fn random_biguint(bits: u64, rng: &mut impl rand::RngCore) -> BigUint {
        let mut bytes = vec![0u8; bits.div_ceil(8) as usize];
        rng.fill_bytes(&mut bytes);
        BigUint::from_bytes_le(&bytes) % (BigUint::from(1u8) << bits)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Products, squares and both powers against schoolbook big-integer arithmetic, for
        /// moduli from one limb to 8192 bits, operands up to the modulus (edge values included).
        #[test]
        fn montgomery_matches_schoolbook(bits in prop::sample::select(vec![61u64, 64, 127, 1024, 2048, 3000, 4096, 8192]),
                                         seed in any::<u64>(), edge in 0u8..4) {
            let m = odd_modulus(bits, seed);
            for kernel in [Kernel::Portable, Kernel::detect()] {
                check_against_schoolbook(&m, Modulus::with_kernel(&m, kernel).unwrap(), bits, seed, edge)?;
            }
        }
    }

    /// One case of `montgomery_matches_schoolbook` on one kernel.
    fn check_against_schoolbook(
        m: &BigUint,
        ctx: Modulus,
        bits: u64,
        seed: u64,
        edge: u8,
    ) -> Result<(), TestCaseError> {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
        let pick = |rng: &mut rand_chacha::ChaCha20Rng, edge: u8| match edge {
            0 => m - 1u8,
            1 => BigUint::from(0u8),
            _ => random_biguint(bits, rng) % m,
        };
        let a = pick(&mut rng, edge);
        let b = pick(&mut rng, 2);
        let (am, bm) = (ctx.to_mont(&a), ctx.to_mont(&b));
        prop_assert_eq!(ctx.out_of_mont(&ctx.mul_new(&am, &bm)), (&a * &b) % m);
        let mut sq = vec![0; ctx.len()];
        ctx.sqr(&am, &mut sq);
        prop_assert_eq!(ctx.out_of_mont(&sq), (&a * &a) % m);
        let e = random_biguint(130, &mut rng);
        let want = a.modpow(&e, m);
        prop_assert_eq!(ctx.out_of_mont(&ctx.pow_public(&am, &e)), want.clone());
        prop_assert_eq!(
            ctx.out_of_mont(&ctx.pow_secret(&am, &limbs(&e, 3), 130)),
            want
        );
        // Double-length reduction (what decryption uses for c mod p²).
        let k = ctx.len();
        let wide = random_biguint(2 * 64 * k as u64 - 1, &mut rng) % (m << (64 * k));
        let w = ctx.to_mont_wide(&limbs(&wide, 2 * k));
        prop_assert_eq!(ctx.out_of_mont(&w), &wide % m);
        prop_assert_eq!(ctx.out_of_mont(&ctx.to_mont(&wide)), &wide % m);
        Ok(())
    }

    #[test]
    fn rejects_even_trivial_and_oversized_moduli() {
        assert!(Modulus::new(&BigUint::from(10u8)).is_none());
        assert!(Modulus::new(&BigUint::from(1u8)).is_none());
        assert!(Modulus::new(&BigUint::from(0u8)).is_none());
        assert!(Modulus::new(&((BigUint::from(1u8) << 8192) + 1u8)).is_none());
        assert!(Modulus::new(&((BigUint::from(1u8) << 8191) + 1u8)).is_some());
    }

    #[test]
    fn window_digits_cross_limb_boundaries() {
        let e = [0xF000_0000_0000_0000u64, 0b1011];
        assert_eq!(window_digit(&e, 60, 5), 0b1_1111);
        assert_eq!(window_digit(&e, 62, 5), 0b0_1111);
        assert_eq!(window_digit(&e, 125, 5), 0);
        assert_eq!(ct_eq_mask(3, 3), u64::MAX);
        assert_eq!(ct_eq_mask(3, 4), 0);
        assert_eq!(ct_eq_mask(0, 1 << 63), 0);
    }
}
