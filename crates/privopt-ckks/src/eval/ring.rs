//! Row kernels on RNS polynomials stored prime-major as `rows × n` residues, where row `r`
//! belongs to prime `indices[r]` of `Q·P`. Rows are independent, so every kernel runs them in
//! parallel (rayon; the evaluator decides how many threads by installing its own pool).

use privopt_math::modarith::{Modulus, add_mod, sub_mod};
use rand::CryptoRng;
use rayon::prelude::*;

use super::context::{BaseConversion, EvalContext};

/// Forward NTT of every row.
pub(crate) fn forward(ctx: &EvalContext, data: &mut [u64], indices: &[usize]) {
    let n = ctx.n();
    data.par_chunks_mut(n)
        .zip(indices.par_iter())
        .for_each(|(row, &i)| ctx.ntt(i).forward(row));
}

/// Inverse NTT of every row.
pub(crate) fn inverse(ctx: &EvalContext, data: &mut [u64], indices: &[usize]) {
    let n = ctx.n();
    data.par_chunks_mut(n)
        .zip(indices.par_iter())
        .for_each(|(row, &i)| ctx.ntt(i).inverse(row));
}

/// Signed coefficients reduced into each row (coefficient form).
pub(crate) fn from_signed(ctx: &EvalContext, coeffs: &[i64], indices: &[usize]) -> Vec<u64> {
    let n = ctx.n();
    let mut out = vec![0u64; n * indices.len()];
    out.par_chunks_mut(n)
        .zip(indices.par_iter())
        .for_each(|(row, &i)| {
            let q = ctx.primes[i];
            for (dst, &c) in row.iter_mut().zip(coeffs) {
                *dst = if c >= 0 {
                    c as u64 % q
                } else {
                    (q - (c.unsigned_abs() % q)) % q
                };
            }
        });
    out
}

/// `a += b` row-wise.
pub(crate) fn add_assign(ctx: &EvalContext, a: &mut [u64], b: &[u64], indices: &[usize]) {
    zip_rows(ctx, a, b, indices, add_mod);
}

/// `a −= b` row-wise.
pub(crate) fn sub_assign(ctx: &EvalContext, a: &mut [u64], b: &[u64], indices: &[usize]) {
    zip_rows(ctx, a, b, indices, sub_mod);
}

fn zip_rows(
    ctx: &EvalContext,
    a: &mut [u64],
    b: &[u64],
    indices: &[usize],
    op: fn(u64, u64, u64) -> u64,
) {
    let n = ctx.n();
    a.par_chunks_mut(n)
        .zip(b.par_chunks(n))
        .zip(indices.par_iter())
        .for_each(|((x, y), &i)| {
            let q = ctx.primes[i];
            for (u, &v) in x.iter_mut().zip(y) {
                *u = op(*u, v, q);
            }
        });
}

/// `a = −a` row-wise.
pub(crate) fn negate(ctx: &EvalContext, a: &mut [u64], indices: &[usize]) {
    let n = ctx.n();
    a.par_chunks_mut(n)
        .zip(indices.par_iter())
        .for_each(|(x, &i)| {
            let q = ctx.primes[i];
            for u in x.iter_mut() {
                *u = if *u == 0 { 0 } else { q - *u };
            }
        });
}

/// `acc += a ∘ b` (evaluation form).
pub(crate) fn mul_acc(ctx: &EvalContext, acc: &mut [u64], a: &[u64], b: &[u64], indices: &[usize]) {
    let n = ctx.n();
    acc.par_chunks_mut(n)
        .zip(a.par_chunks(n))
        .zip(b.par_chunks(n))
        .zip(indices.par_iter())
        .for_each(|(((c, x), y), &i)| ctx.ntt(i).mul_acc(c, x, y));
}

/// `a ∘ b` (evaluation form).
pub(crate) fn mul(ctx: &EvalContext, a: &[u64], b: &[u64], indices: &[usize]) -> Vec<u64> {
    let mut c = vec![0u64; a.len()];
    mul_acc(ctx, &mut c, a, b, indices);
    c
}

/// `a *= c` where row `r` multiplies by `constants[r]` (already reduced).
pub(crate) fn mul_constants(
    ctx: &EvalContext,
    a: &mut [u64],
    constants: &[u64],
    indices: &[usize],
) {
    let n = ctx.n();
    a.par_chunks_mut(n)
        .zip(constants.par_iter())
        .zip(indices.par_iter())
        .for_each(|((x, &c), &i)| {
            let m = &ctx.moduli[i];
            let w = m.shoup(c);
            for u in x.iter_mut() {
                *u = m.mul_shoup(*u, w);
            }
        });
}

/// `a += c` on every evaluation (adds the constant polynomial `c`), row `r` adding
/// `constants[r]`.
pub(crate) fn add_constants(
    ctx: &EvalContext,
    a: &mut [u64],
    constants: &[u64],
    indices: &[usize],
) {
    let n = ctx.n();
    a.par_chunks_mut(n)
        .zip(constants.par_iter())
        .zip(indices.par_iter())
        .for_each(|((x, &c), &i)| {
            let q = ctx.primes[i];
            for u in x.iter_mut() {
                *u = add_mod(*u, c, q);
            }
        });
}

/// Permutes every row: `out[j] = in[perm[j]]` (an automorphism in evaluation form).
pub(crate) fn permute(ctx: &EvalContext, a: &[u64], perm: &[u32]) -> Vec<u64> {
    let n = ctx.n();
    let mut out = vec![0u64; a.len()];
    out.par_chunks_mut(n)
        .zip(a.par_chunks(n))
        .for_each(|(dst, src)| {
            for (d, &p) in dst.iter_mut().zip(perm) {
                *d = src[p as usize];
            }
        });
    out
}

/// Fast base conversion of coefficient-form rows `src` (one per source prime of `conv`) into
/// coefficient-form rows for the primes `targets`.
pub(crate) fn convert(
    ctx: &EvalContext,
    conv: &BaseConversion,
    src: &[u64],
    targets: &[usize],
) -> Vec<u64> {
    let n = ctx.n();
    // y_k = x_k · (B/b_k)^{-1} mod b_k.
    let mut y = vec![0u64; src.len()];
    y.par_chunks_mut(n)
        .zip(src.par_chunks(n))
        .zip(conv.sources.par_iter().zip(conv.hat_inv.par_iter()))
        .for_each(|((dst, x), (&s, &w))| {
            let m = &ctx.moduli[s];
            for (d, &v) in dst.iter_mut().zip(x) {
                *d = m.mul_shoup(v, w);
            }
        });
    let mut out = vec![0u64; n * targets.len()];
    out.par_chunks_mut(n)
        .zip(targets.par_iter())
        .for_each(|(dst, &t)| {
            let m: &Modulus = &ctx.moduli[t];
            let q = m.value();
            let consts: Vec<_> = conv.hat_mod[t].iter().map(|&c| m.shoup(c)).collect();
            for (k, w) in consts.iter().enumerate() {
                let row = &y[k * n..(k + 1) * n];
                for (d, &v) in dst.iter_mut().zip(row) {
                    // v < 2^62 may exceed the target prime: Shoup accepts any 64-bit input.
                    *d = add_mod(*d, m.mul_shoup(v, *w), q);
                }
            }
        });
    out
}

/// Coefficient-form row of prime `from` reduced (centered) into prime `to`.
pub(crate) fn switch_row(ctx: &EvalContext, row: &[u64], from: usize, to: usize) -> Vec<u64> {
    let (qf, qt) = (ctx.primes[from], ctx.primes[to]);
    let m = &ctx.moduli[to];
    let half = qf / 2;
    row.iter()
        .map(|&x| {
            if x > half {
                // Negative value x − qf.
                let r = m.reduce(qf - x);
                if r == 0 { 0 } else { qt - r }
            } else {
                m.reduce(x)
            }
        })
        .collect()
}

/// Gaussian error polynomial in evaluation form over `indices`.
pub(crate) fn error(ctx: &EvalContext, indices: &[usize], rng: &mut impl CryptoRng) -> Vec<u64> {
    let e = ctx.params().error().sample_vec(ctx.n(), rng);
    let mut rows = from_signed(ctx, &e, indices);
    forward(ctx, &mut rows, indices);
    rows
}
