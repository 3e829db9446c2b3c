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
    key_product(ctx, &mod_up(ctx, d, level), level, key, None)
}

/// ModUp: `d`'s digits, each raised to `Q_l·P` (evaluation form, rows in
/// [`EvalContext::extended_indices`] order). A Galois automorphism permutes evaluation slots
/// limb by limb, so it commutes with this: several rotations of one ciphertext share one
/// ModUp (hoisting), each permuting the digits in [`key_product`].
pub(crate) fn mod_up(ctx: &EvalContext, d: &[u64], level: usize) -> Vec<Vec<u64>> {
    let n = ctx.n();
    let q_rows = level + 1;
    let ext = ctx.extended_indices(level);
    let mut d_coeff = d[..q_rows * n].to_vec();
    ring::inverse(ctx, &mut d_coeff, &ext[..q_rows]);
    let mut out = Vec::new();
    for (j, digit) in ctx.digits.iter().enumerate() {
        if digit.start > level {
            break;
        }
        let end = digit.end.min(q_rows);
        let conv = &ctx.mod_up[j][end - digit.start - 1];
        let targets: Vec<usize> = ext
            .iter()
            .copied()
            .filter(|&i| !(digit.start..end).contains(&i))
            .collect();
        let mut raised = ring::convert(ctx, conv, &d_coeff[digit.start * n..end * n], &targets);
        ring::forward(ctx, &mut raised, &targets);
        // Assemble the digit over Q_l·P: its own primes straight from `d`, the rest raised.
        let mut digit_ext = vec![0u64; n * ext.len()];
        let mut next_raised = raised.chunks(n);
        for (row, &i) in digit_ext.chunks_mut(n).zip(&ext) {
            if (digit.start..end).contains(&i) {
                row.copy_from_slice(&d[i * n..(i + 1) * n]);
            } else if let Some(src) = next_raised.next() {
                row.copy_from_slice(src);
            }
        }
        out.push(digit_ext);
    }
    out
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
    let n = ctx.n();
    let q_rows = level + 1;
    let ext = ctx.extended_indices(level);
    let q_idx = &ext[..q_rows];
    let p_idx = &ext[q_rows..];
    let mut acc0 = vec![0u64; n * ext.len()];
    let mut acc1 = vec![0u64; n * ext.len()];
    debug_assert!(level <= key.level, "a key below the ciphertext's level");
    // The key's P rows follow its own Q rows.
    let q_off = (key.level + 1) * n;
    for (j, digit) in digits.iter().enumerate() {
        let permuted;
        let digit = match perm {
            Some(perm) => {
                permuted = ring::permute(ctx, digit, perm);
                &permuted
            }
            None => digit,
        };
        let split = q_rows * n;
        let mut halves = vec![(&mut acc0, &key.b[j])];
        match &key.a {
            Some(a) => halves.push((&mut acc1, &a[j])),
            // A compact key: each row of `a_j` is expanded where it is multiplied.
            None => ring::mul_acc_with(ctx, &mut acc1, digit, &ext, |row, i| {
                mask_row(&key.mask_seed, j, i, ctx.primes[i], row);
            }),
        }
        for (acc, k) in halves {
            let (acc_q, acc_p) = acc.split_at_mut(split);
            ring::mul_acc(ctx, acc_q, &digit[..split], &k[..split], q_idx);
            ring::mul_acc(ctx, acc_p, &digit[split..], &k[q_off..], p_idx);
        }
    }
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
