//! Hybrid key switching (Han–Ki 2020, the variant SEAL and OpenFHE use): split a polynomial
//! into `dnum` digits of ciphertext primes, raise each digit to `Q_l·P` by fast base
//! conversion, take the inner product with the switching key, and divide by `P`.
//!
//! At level `l` only the primes `q_0 … q_l` exist; a digit cut by the level is converted
//! from its remaining primes, and digits above the level are skipped. A key serves its own
//! level and every level below (callers check with `SwitchingKey::check_level`).

use privopt_math::modarith::inv_mod;

use super::context::{BaseConversion, EvalContext};
use super::keys::{SwitchingKey, mask_row};
use super::ring;

/// Switches `d` (evaluation form over `q_0 … q_level`) with `key`: returns `(k0, k1)` over the
/// same primes with `k0 + k1·s ≈ d·s'` (where `key` switches from `s'` to `s`).
pub(crate) fn switch(
    ctx: &EvalContext,
    d: &[u64],
    level: usize,
    key: &SwitchingKey,
) -> (Vec<u64>, Vec<u64>) {
    let (k0, k1) = switch_extended(ctx, d, level, key);
    (mod_down(ctx, k0, level), mod_down(ctx, k1, level))
}

/// [`switch`] before its ModDown: `P·(k0, k1)` over `Q_l·P`. One key product per ModUp, so
/// the raised digits are never stored: each digit row is raised where the product reads it
/// (the NTTs are the same; the `dnum` raised polynomials are not written and read back).
pub(crate) fn switch_extended(
    ctx: &EvalContext,
    d: &[u64],
    level: usize,
    key: &SwitchingKey,
) -> (Vec<u64>, Vec<u64>) {
    let d_coeff = coefficients(ctx, d, level);
    key_product_rows(ctx, &Raise::new(ctx, d, &d_coeff, level), level, key)
}

/// ModUp: `d`'s digits, each raised to `Q_l·P` (evaluation form, rows in
/// [`EvalContext::extended_indices`] order). A Galois automorphism permutes evaluation slots
/// limb by limb, so it commutes with this: several rotations of one ciphertext share one
/// ModUp (hoisting), each permuting the digits in [`key_product`].
pub(crate) fn mod_up(ctx: &EvalContext, d: &[u64], level: usize) -> Vec<Vec<u64>> {
    let n = ctx.n();
    let ext = ctx.extended_indices(level);
    let d_coeff = coefficients(ctx, d, level);
    let raise = Raise::new(ctx, d, &d_coeff, level);
    (0..raise.count())
        .map(|j| {
            let mut digit_ext = vec![0u64; n * ext.len()];
            ring::each_row(&mut digit_ext, n, &ext, |row, r, i| {
                if let Some(own) = raise.row(j, r, i, row) {
                    row.copy_from_slice(own);
                }
            });
            digit_ext
        })
        .collect()
}

/// `d`'s rows `q_0 … q_level` in coefficient form (what ModUp converts from).
fn coefficients(ctx: &EvalContext, d: &[u64], level: usize) -> Vec<u64> {
    let q_rows = level + 1;
    let mut d_coeff = d[..q_rows * ctx.n()].to_vec();
    ring::inverse(ctx, &mut d_coeff, &ctx.extended_indices(level)[..q_rows]);
    d_coeff
}

/// The digits a key product reads, row by row.
trait DigitRows: Sync {
    /// How many digits.
    fn count(&self) -> usize;
    /// Row `r` (prime `i`) of digit `j`: borrowed if it exists as it is, else written to
    /// `scratch` (`None`).
    fn row(&self, j: usize, r: usize, i: usize, scratch: &mut [u64]) -> Option<&[u64]>;
}

/// ModUp's output, permuted by a hoisted rotation's `perm` as each row is read.
struct Raised<'a> {
    digits: &'a [Vec<u64>],
    perm: Option<&'a [u32]>,
}

impl DigitRows for Raised<'_> {
    fn count(&self) -> usize {
        self.digits.len()
    }

    fn row(&self, j: usize, r: usize, _: usize, scratch: &mut [u64]) -> Option<&[u64]> {
        let n = scratch.len();
        let row = &self.digits[j][r * n..(r + 1) * n];
        match self.perm {
            None => Some(row),
            Some(perm) => {
                ring::permute_row(scratch, row, perm);
                None
            }
        }
    }
}

/// ModUp row by row: a digit's own primes are `d`'s rows; any other row is converted from
/// the digit's primes and transformed while it is in cache.
struct Raise<'a> {
    ctx: &'a EvalContext,
    d: &'a [u64],
    /// Per digit below the level: its primes (cut at the level) and its conversion.
    digits: Vec<(std::ops::Range<usize>, ring::Conversion<'a>)>,
}

impl<'a> Raise<'a> {
    fn new(ctx: &'a EvalContext, d: &'a [u64], d_coeff: &'a [u64], level: usize) -> Self {
        let n = ctx.n();
        let digits = ctx
            .digits
            .iter()
            .enumerate()
            .take_while(|(_, digit)| digit.start <= level)
            .map(|(j, digit)| {
                let own = digit.start..digit.end.min(level + 1);
                let conv = &ctx.mod_up[j][own.len() - 1];
                let from = ring::Conversion::new(ctx, conv, &d_coeff[own.start * n..own.end * n]);
                (own, from)
            })
            .collect();
        Self { ctx, d, digits }
    }
}

impl DigitRows for Raise<'_> {
    fn count(&self) -> usize {
        self.digits.len()
    }

    fn row(&self, j: usize, _: usize, i: usize, scratch: &mut [u64]) -> Option<&[u64]> {
        let n = scratch.len();
        let (own, from) = &self.digits[j];
        if own.contains(&i) {
            return Some(&self.d[i * n..(i + 1) * n]);
        }
        from.row(i, scratch);
        self.ctx.ntt(i).forward(scratch);
        None
    }
}

/// The raised digits (permuted by `perm` first, for a hoisted rotation) times `key`, then
/// ModDown (divide by `P`): `(k0, k1)` over `q_0 … q_level`.
pub(crate) fn key_product(
    ctx: &EvalContext,
    digits: &[Vec<u64>],
    level: usize,
    key: &SwitchingKey,
    perm: Option<&[u32]>,
) -> (Vec<u64>, Vec<u64>) {
    let (k0, k1) = key_product_extended(ctx, digits, level, key, perm);
    (mod_down(ctx, k0, level), mod_down(ctx, k1, level))
}

/// [`key_product`] before its ModDown: `P·(k0, k1)` over `Q_l·P` (rows in
/// [`EvalContext::extended_indices`] order). Sums of such products need one ModDown in all
/// (double hoisting).
pub(crate) fn key_product_extended(
    ctx: &EvalContext,
    digits: &[Vec<u64>],
    level: usize,
    key: &SwitchingKey,
    perm: Option<&[u32]>,
) -> (Vec<u64>, Vec<u64>) {
    key_product_rows(ctx, &Raised { digits, perm }, level, key)
}

/// `Σ_j digit_j · key_j` over `Q_l·P`, row by row: a row's two sums stay in cache while the
/// digits and the key stream past once (digit by digit over whole polynomials, the sums went
/// through memory once per digit).
fn key_product_rows(
    ctx: &EvalContext,
    digits: &impl DigitRows,
    level: usize,
    key: &SwitchingKey,
) -> (Vec<u64>, Vec<u64>) {
    let n = ctx.n();
    let q_rows = level + 1;
    let ext = ctx.extended_indices(level);
    let mut acc0 = vec![0u64; n * ext.len()];
    let mut acc1 = vec![0u64; n * ext.len()];
    debug_assert!(level <= key.level, "a key below the ciphertext's level");
    ring::each_row_pair(&mut acc0, &mut acc1, n, &ext, |a0, a1, r, i| {
        // The key's P rows follow its own Q rows.
        let key_row = if r < q_rows {
            r
        } else {
            key.level + 1 + r - q_rows
        };
        let key_rows = key_row * n..(key_row + 1) * n;
        let (mut scratch, mut mask) = (vec![0u64; n], Vec::new());
        let ntt = ctx.ntt(i);
        for j in 0..digits.count() {
            let row = match digits.row(j, r, i, &mut scratch) {
                Some(row) => row,
                None => &scratch,
            };
            ntt.mul_acc(a0, row, &key.b[j][key_rows.clone()]);
            match &key.a {
                Some(a) => ntt.mul_acc(a1, row, &a[j][key_rows.clone()]),
                // A compact key: each row of `a_j` is expanded where it is multiplied.
                None => {
                    mask.resize(n, 0);
                    mask_row(&key.mask_seed, j, i, ctx.primes[i], &mut mask);
                    ntt.mul_acc(a1, row, &mask);
                }
            }
        }
    });
    (acc0, acc1)
}

/// `acc += P·x` for `acc` over `Q_l·P` (extended order) and `x` over `q_0 … q_level`: `P·x`
/// is 0 modulo the `P` primes, so only the first `level + 1` rows change. This is how a
/// ciphertext component joins a key product before their common ModDown.
pub(crate) fn add_times_p(ctx: &EvalContext, acc: &mut [u64], x: &[u64], level: usize) {
    let rows = level + 1;
    let q_idx: Vec<usize> = (0..rows).collect();
    ring::mul_constants_acc(
        ctx,
        &mut acc[..rows * ctx.n()],
        x,
        &ctx.p_mod[..rows],
        &q_idx,
    );
}

/// ModDown: `x` over `Q_l·P` (extended order) divided by `P`, rounded, over `q_0 … q_level`.
pub(crate) fn mod_down(ctx: &EvalContext, x: Vec<u64>, level: usize) -> Vec<u64> {
    let ext = ctx.extended_indices(level);
    let (q_idx, p_idx) = ext.split_at(level + 1);
    let p_inv: Vec<u64> = q_idx.iter().map(|&i| ctx.p_inv[i]).collect();
    ring::divide_and_round(ctx, x, q_idx, p_idx, &ctx.mod_down, &p_inv)
}

/// Key switching of a level-0 polynomial with `q_0` as the only digit and one other prime
/// `p_e` (index `prime` of `Q·P`, see [`super::keys::encapsulation_prime`]) alone as `P`.
/// Sparse-secret encapsulation's dense-to-sparse key is made for this, so it exists only modulo
/// `q_0·p_e`, the modulus its sparse secret is certified at ([`crate::params::SPARSE_128`]).
/// `key` has one part, rows `q_0` then `p_e`; its noise `d·e/p_e` stays small while `p_e` is
/// not much smaller than `q_0`.
pub(crate) fn switch_level0(
    ctx: &EvalContext,
    d: &[u64],
    key: &SwitchingKey,
    prime: usize,
) -> (Vec<u64>, Vec<u64>) {
    let n = ctx.n();
    let rows = [0, prime];
    let mut d_coeff = d[..n].to_vec();
    ring::inverse(ctx, &mut d_coeff, &[0]);
    let mut raised = ring::convert(ctx, &ctx.rescale_from[0], &d_coeff, &[prime]);
    ring::forward(ctx, &mut raised, &[prime]);
    let mut digit = d[..n].to_vec();
    digit.extend(raised);
    let from_pe = BaseConversion::new(&ctx.primes, vec![prime]);
    let inv = [inv_mod(ctx.primes[prime] % ctx.primes[0], ctx.primes[0])];
    let a = match &key.a {
        Some(a) => std::borrow::Cow::Borrowed(&a[0]),
        None => std::borrow::Cow::Owned(key.expand_mask(&ctx.primes, 0, &rows, n)),
    };
    let down = |k: &[u64]| {
        let x = ring::mul(ctx, &digit, k, &rows);
        ring::divide_and_round(ctx, x, &[0], &[prime], &from_pe, &inv)
    };
    (down(&key.b[0]), down(&a))
}
