//! Row kernels on RNS polynomials stored prime-major as `rows × n` residues, where row `r`
//! belongs to prime `indices[r]` of `Q·P`. Rows are independent, so every kernel runs them in
//! parallel (rayon; the evaluator decides how many threads by installing its own pool).

use privopt_math::modarith::{Modulus, add_mod, sub_mod};
use privopt_math::simd::{Constant, Kernels};
use rand::CryptoRng;
use rayon::prelude::*;
use std::cell::Cell;

use super::context::{BaseConversion, EvalContext};

thread_local! {
    /// Set while an evaluator configured for one thread runs an operation: kernels then loop
    /// on the calling thread instead of handing rows to rayon (no cross-thread hand-off, and
    /// a one-thread measurement really uses one thread).
    static SEQUENTIAL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every kernel sequential on the calling thread.
pub(crate) fn sequentially<R>(f: impl FnOnce() -> R) -> R {
    let before = SEQUENTIAL.with(|s| s.replace(true));
    let r = f();
    SEQUENTIAL.with(|s| s.set(before));
    r
}

fn sequential() -> bool {
    SEQUENTIAL.with(Cell::get)
}

/// Calls `f(row, r, prime)` for every row `r` of `data` (in parallel unless sequential).
pub(crate) fn each_row(
    data: &mut [u64],
    n: usize,
    indices: &[usize],
    f: impl Fn(&mut [u64], usize, usize) + Sync,
) {
    if sequential() {
        for (r, (row, &i)) in data.chunks_mut(n).zip(indices).enumerate() {
            f(row, r, i);
        }
    } else {
        data.par_chunks_mut(n)
            .zip(indices.par_iter())
            .enumerate()
            .for_each(|(r, (row, &i))| f(row, r, i));
    }
}

/// Calls `f(a_row, b_row, r, prime)` for every row `r` of `a` and `b` alike (two
/// polynomials over the same primes, such as a ciphertext's two components).
pub(crate) fn each_row_pair(
    a: &mut [u64],
    b: &mut [u64],
    n: usize,
    indices: &[usize],
    f: impl Fn(&mut [u64], &mut [u64], usize, usize) + Sync,
) {
    if sequential() {
        for (r, ((x, y), &i)) in a
            .chunks_mut(n)
            .zip(b.chunks_mut(n))
            .zip(indices)
            .enumerate()
        {
            f(x, y, r, i);
        }
    } else {
        a.par_chunks_mut(n)
            .zip(b.par_chunks_mut(n))
            .zip(indices.par_iter())
            .enumerate()
            .for_each(|(r, ((x, y), &i))| f(x, y, r, i));
    }
}

/// `(a(), b())`, concurrently unless sequential.
pub(crate) fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if sequential() {
        (a(), b())
    } else {
        rayon::join(a, b)
    }
}

/// Forward NTT of every row.
pub(crate) fn forward(ctx: &EvalContext, data: &mut [u64], indices: &[usize]) {
    each_row(data, ctx.n(), indices, |row, _, i| ctx.ntt(i).forward(row));
}

/// Inverse NTT of every row.
pub(crate) fn inverse(ctx: &EvalContext, data: &mut [u64], indices: &[usize]) {
    each_row(data, ctx.n(), indices, |row, _, i| ctx.ntt(i).inverse(row));
}

impl EvalContext {
    /// `X^{n/2}` in evaluation form, one row per ciphertext prime: a product with it
    /// multiplies every slot by `i` (`ζ_j^{n/2} = i` at each slot root). Made here, beside
    /// the transforms it needs, and kept by the context.
    pub(crate) fn i_monomial(&self) -> &[u64] {
        self.i_monomial.get_or_init(|| {
            let n = self.n();
            let rows: Vec<usize> = (0..self.q_count).collect();
            let mut monomial = vec![0i64; n];
            monomial[n / 2] = 1;
            let mut x = from_signed(self, &monomial, &rows);
            forward(self, &mut x, &rows);
            x
        })
    }
}

/// Signed coefficients reduced into each row (coefficient form).
pub(crate) fn from_signed(ctx: &EvalContext, coeffs: &[i64], indices: &[usize]) -> Vec<u64> {
    let n = ctx.n();
    let mut out = vec![0u64; n * indices.len()];
    let fast = Kernels::detect();
    each_row(&mut out, n, indices, |row, _, i| {
        from_signed_row(ctx, coeffs, i, row, fast)
    });
    out
}

/// One row of [`from_signed`]: `coeffs` modulo prime `i`, into `row`.
pub(crate) fn from_signed_row(
    ctx: &EvalContext,
    coeffs: &[i64],
    i: usize,
    row: &mut [u64],
    fast: Option<Kernels>,
) {
    let m = &ctx.moduli[i];
    let q = m.value();
    for (dst, &c) in row.iter_mut().zip(coeffs) {
        *dst = c.unsigned_abs();
    }
    // |c| mod q: eight at a time where the CPU can (a Shoup product by 1 reduces any word),
    // else one by one.
    let one = Constant::new(1, q);
    if !fast.is_some_and(|f| f.dot(q, row, Some(one), &[], &[], u64::MAX)) {
        for x in row.iter_mut() {
            *x = m.reduce(*x);
        }
    }
    for (dst, &c) in row.iter_mut().zip(coeffs) {
        let negate = u64::from(c < 0 && *dst != 0).wrapping_neg();
        *dst = (*dst & !negate) | ((q - *dst) & negate);
    }
}

/// `a + b` row-wise, into a new vector.
pub(crate) fn add(ctx: &EvalContext, a: &[u64], b: &[u64], indices: &[usize]) -> Vec<u64> {
    zip_new(ctx, a, b, indices, add_mod)
}

/// `a − b` row-wise, into a new vector.
pub(crate) fn sub(ctx: &EvalContext, a: &[u64], b: &[u64], indices: &[usize]) -> Vec<u64> {
    zip_new(ctx, a, b, indices, sub_mod)
}

fn zip_new(
    ctx: &EvalContext,
    a: &[u64],
    b: &[u64],
    indices: &[usize],
    op: impl Fn(u64, u64, u64) -> u64 + Sync,
) -> Vec<u64> {
    // One pass that writes each output word once (no clone-then-update, no zeroing), in
    // parallel (at least a row per task) unless sequential.
    let n = ctx.n();
    let len = indices.len() * n;
    let (a, b) = (&a[..len], &b[..len]);
    if sequential() {
        let mut out = Vec::with_capacity(len);
        for ((x, y), &i) in a.chunks(n).zip(b.chunks(n)).zip(indices) {
            let q = ctx.primes[i];
            out.extend(x.iter().zip(y).map(|(&u, &v)| op(u, v, q)));
        }
        return out;
    }
    let shift = n.trailing_zeros();
    let mut out = Vec::new();
    a.par_iter()
        .zip(b)
        .enumerate()
        .with_min_len(n)
        .map(|(j, (&u, &v))| op(u, v, ctx.primes[indices[j >> shift]]))
        .collect_into_vec(&mut out);
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
    op: impl Fn(u64, u64, u64) -> u64 + Sync,
) {
    let n = ctx.n();
    each_row(a, n, indices, |x, r, i| {
        let q = ctx.primes[i];
        for (u, &v) in x.iter_mut().zip(&b[r * n..(r + 1) * n]) {
            *u = op(*u, v, q);
        }
    });
}

/// `a = −a` row-wise.
pub(crate) fn negate(ctx: &EvalContext, a: &mut [u64], indices: &[usize]) {
    each_row(a, ctx.n(), indices, |x, _, i| {
        let q = ctx.primes[i];
        for u in x.iter_mut() {
            *u = if *u == 0 { 0 } else { q - *u };
        }
    });
}

/// `acc += a ∘ b` (evaluation form).
pub(crate) fn mul_acc(ctx: &EvalContext, acc: &mut [u64], a: &[u64], b: &[u64], indices: &[usize]) {
    let n = ctx.n();
    each_row(acc, n, indices, |c, r, i| {
        let rows = r * n..(r + 1) * n;
        ctx.ntt(i).mul_acc(c, &a[rows.clone()], &b[rows]);
    });
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
    let fast = Kernels::detect();
    each_row(a, ctx.n(), indices, |x, r, i| {
        let m = &ctx.moduli[i];
        let q = m.value();
        let c = Constant::new(constants[r], q);
        if fast.is_some_and(|f| f.dot(q, x, Some(c), &[], &[], q)) {
            return;
        }
        let w = m.shoup(constants[r]);
        for u in x.iter_mut() {
            *u = m.mul_shoup(*u, w);
        }
    });
}

/// `acc += a · c` where row `r` multiplies by `constants[r]` (already reduced).
pub(crate) fn mul_constants_acc(
    ctx: &EvalContext,
    acc: &mut [u64],
    a: &[u64],
    constants: &[u64],
    indices: &[usize],
) {
    let n = ctx.n();
    let fast = Kernels::detect();
    each_row(acc, n, indices, |x, r, i| {
        let m = &ctx.moduli[i];
        let q = m.value();
        let (one, c) = (Constant::new(1, q), Constant::new(constants[r], q));
        let a_row = &a[r * n..(r + 1) * n];
        if fast.is_some_and(|f| f.dot(q, x, Some(one), &[a_row], &[c], q)) {
            return;
        }
        let w = m.shoup(constants[r]);
        for (u, &v) in x.iter_mut().zip(a_row) {
            *u = add_mod(*u, m.mul_shoup(v, w), m.value());
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
    each_row(a, ctx.n(), indices, |x, r, i| {
        let q = ctx.primes[i];
        for u in x.iter_mut() {
            *u = add_mod(*u, constants[r], q);
        }
    });
}

/// Permutes every row: `out[j] = in[perm[j]]` (an automorphism in evaluation form).
pub(crate) fn permute(ctx: &EvalContext, a: &[u64], perm: &[u32]) -> Vec<u64> {
    let n = ctx.n();
    let rows: Vec<usize> = (0..a.len() / n).collect();
    let mut out = vec![0u64; a.len()];
    each_row(&mut out, n, &rows, |dst, r, _| {
        permute_row(dst, &a[r * n..(r + 1) * n], perm);
    });
    out
}

/// One row of [`permute`]: `dst[j] = src[perm[j]]`.
pub(crate) fn permute_row(dst: &mut [u64], src: &[u64], perm: &[u32]) {
    for (d, &p) in dst.iter_mut().zip(perm) {
        *d = src[p as usize];
    }
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
    let prepared = Conversion::new(ctx, conv, src);
    let mut out = vec![0u64; n * targets.len()];
    each_row(&mut out, n, targets, |dst, _, t| prepared.row(t, dst));
    out
}

/// A base conversion's source rows, prepared once for any number of target rows (so a
/// caller can convert a row and use it while it is still in cache).
pub(crate) struct Conversion<'a> {
    ctx: &'a EvalContext,
    conv: &'a BaseConversion,
    /// `y_k = x_k · (B/b_k)^{-1} mod b_k` per source (the source rows themselves for one
    /// source prime, which needs no scaling).
    y: std::borrow::Cow<'a, [u64]>,
    /// `round(Σ_k y_k/b_k)` per coefficient; for one source prime, whether the residue is
    /// above `b/2` (only for the AVX-512 kernels: the scalar path reads it off the residue).
    wraps: Vec<u64>,
    /// The AVX-512 kernels, when the CPU has them.
    simd: Option<Kernels>,
}

impl<'a> Conversion<'a> {
    pub(crate) fn new(ctx: &'a EvalContext, conv: &'a BaseConversion, src: &'a [u64]) -> Self {
        let n = ctx.n();
        if let [source] = conv.sources[..] {
            // One source prime b: the conversion is the centred residue, `x − b` where
            // `x > b/2`; the flags of those are the one extra row (times `−b`).
            let half = ctx.primes[source] / 2;
            let simd = Kernels::detect();
            return Self {
                ctx,
                conv,
                y: std::borrow::Cow::Borrowed(src),
                wraps: match simd {
                    Some(_) => src.iter().map(|&x| u64::from(x > half)).collect(),
                    None => Vec::new(),
                },
                simd,
            };
        }
        let mut y = src.to_vec();
        let hat_inv: Vec<u64> = conv.hat_inv.iter().map(|w| w.value()).collect();
        mul_constants(ctx, &mut y, &hat_inv, &conv.sources);
        // Σ_k y_k·(B/b_k) = x_c + m·B for the centred x_c and m = round(Σ_k y_k/b_k): the
        // same for every target, so found once. Exact (no stray multiple of B, whose `u·s`
        // would join the noise after a division by B) but where x_c is within 2^-50 of ±B/2,
        // where either representative rounds alike.
        let mut fractions = vec![0f64; n];
        for (k, &src) in conv.sources.iter().enumerate() {
            let inv = 1.0 / ctx.primes[src] as f64;
            for (f, &v) in fractions.iter_mut().zip(&y[k * n..(k + 1) * n]) {
                *f += v as f64 * inv;
            }
        }
        let wraps = fractions.iter().map(|f| f.round() as u64).collect();
        Self {
            ctx,
            conv,
            y: std::borrow::Cow::Owned(y),
            wraps,
            simd: Kernels::detect(),
        }
    }

    /// The conversion modulo prime `t`, written to `dst` (coefficient form).
    pub(crate) fn row(&self, t: usize, dst: &mut [u64]) {
        let (ctx, conv, y) = (self.ctx, self.conv, &self.y[..]);
        let n = ctx.n();
        let m: &Modulus = &ctx.moduli[t];
        let q = m.value();
        if let Some(simd) = self.simd {
            // Σ_k y_k·(B/b_k) − wraps·B, eight coefficients at a time (the wraps are one
            // more row, times −B; with one source, `B/b = 1`).
            let rows: Vec<&[u64]> = y
                .chunks(n)
                .chain(std::iter::once(&self.wraps[..]))
                .collect();
            let hats: &[u64] = if conv.sources.len() == 1 {
                &[1]
            } else {
                &conv.hat_mod[t]
            };
            let constants: Vec<Constant> = hats
                .iter()
                .chain(std::iter::once(&(q - conv.product_mod[t] % q)))
                .map(|&c| Constant::new(c, q))
                .collect();
            // Every entry (a residue, a wrap count) is below the largest source prime.
            let below = conv
                .sources
                .iter()
                .map(|&s| ctx.primes[s])
                .max()
                .unwrap_or(0);
            if simd.dot(q, dst, None, &rows, &constants, below) {
                return;
            }
        }
        if let [source] = conv.sources[..] {
            // One source prime b (hybrid key switching with one-prime digits, rescaling): the
            // conversion is the centred residue, `x − b` for `x > b/2`, reduced mod `t`.
            let (b, half) = (ctx.primes[source], ctx.primes[source] / 2);
            let b_mod = m.reduce(b);
            let fits = b <= q;
            for (d, &x) in dst.iter_mut().zip(y) {
                let r = if fits { x } else { m.reduce(x) };
                // Branch-free: the sign of a secret-dependent residue is unpredictable.
                *d = sub_mod(r, b_mod & u64::from(x > half).wrapping_neg(), q);
            }
            return;
        }
        let consts: Vec<_> = conv.hat_mod[t].iter().map(|&c| m.shoup(c)).collect();
        // c·B mod t for every possible count c: a wrapped term is corrected by subtracting B.
        let corrections: Vec<u64> = (0..=conv.sources.len() as u64)
            .map(|c| m.mul(c % q, conv.product_mod[t]))
            .collect();
        // Lazy sums, source by source over blocks of coefficients (contiguous reads): each
        // term is below 2q, so `u64::MAX / 2q − 1` terms and a carried remainder fit in a u64
        // (7 for 60-bit primes, 2^13 for 50-bit ones); longer sums are reduced once per batch.
        let batch = usize::try_from(u64::MAX / (2 * q) - 1).unwrap_or(usize::MAX);
        const BLOCK: usize = 256;
        dst.fill(0);
        for (start, block) in (0..n).step_by(BLOCK).zip(dst.chunks_mut(BLOCK)) {
            for (part, chunk) in consts.chunks(batch).enumerate() {
                for (k, &w) in chunk.iter().enumerate() {
                    let row = (part * batch + k) * n + start;
                    let terms = &y[row..row + block.len()];
                    for (acc, &v) in block.iter_mut().zip(terms) {
                        *acc += m.mul_shoup_lazy(v, w);
                    }
                }
                for acc in block.iter_mut() {
                    *acc = m.reduce(*acc);
                }
            }
            for (d, &wrap) in block.iter_mut().zip(&self.wraps[start..]) {
                *d = sub_mod(*d, corrections[wrap as usize], q);
            }
        }
    }
}

/// `(x_keep − conv(x_drop)) · D^{-1}` over the `keep` primes: divides by the product `D` of
/// the `drop` primes, rounding. `x` is in evaluation form, `keep` rows then `drop` rows;
/// `conv` converts from the `drop` primes and `inv[r]` is `D^{-1}` modulo `keep[r]`. Both
/// ModDown (`D = P`) and rescaling (`D = q_l`) are this.
pub(crate) fn divide_and_round(
    ctx: &EvalContext,
    mut x: Vec<u64>,
    keep: &[usize],
    drop: &[usize],
    conv: &BaseConversion,
    inv: &[u64],
) -> Vec<u64> {
    let split = keep.len() * ctx.n();
    let mut dropped = x[split..].to_vec();
    inverse(ctx, &mut dropped, drop);
    let mut lifted = convert(ctx, conv, &dropped, keep);
    forward(ctx, &mut lifted, keep);
    x.truncate(split);
    sub_assign(ctx, &mut x, &lifted, keep);
    mul_constants(ctx, &mut x, inv, keep);
    x
}

/// Gaussian error polynomial in evaluation form over `indices`.
pub(crate) fn error(ctx: &EvalContext, indices: &[usize], rng: &mut impl CryptoRng) -> Vec<u64> {
    let e = ctx.params().error().sample_vec(ctx.n(), rng);
    let mut rows = from_signed(ctx, &e, indices);
    forward(ctx, &mut rows, indices);
    rows
}

#[cfg(test)]
mod tests {
    use num_bigint::{BigInt, BigUint};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    use super::*;
    use crate::params::CkksParamsBuilder;

    #[test]
    fn base_conversion_is_the_exact_centred_lift() {
        // Three sources (a rescale prime and two key-switching primes, as a fused ModDown
        // and rescale uses): every converted coefficient is x_c mod t for the centred x_c,
        // with no stray multiple of the product: next to ±B/2 (2^-40 of B away), 0 and B.
        // Within 2^-50 of B/2 either representative is right.
        let params = CkksParamsBuilder::leveled(1 << 10, 55, 50, 3, &[60, 60])
            .insecure_for_testing(true)
            .build()
            .unwrap();
        let ctx = EvalContext::new(&params).unwrap();
        let n = ctx.n();
        let top = ctx.max_level();
        let sources: Vec<usize> = std::iter::once(top)
            .chain(ctx.q_count..ctx.primes.len())
            .collect();
        let conv = &ctx.mod_down_rescale[top];
        let b: BigUint = sources
            .iter()
            .map(|&i| BigUint::from(ctx.primes[i]))
            .product();
        let half = &b / 2u32;
        let near = &b >> 40u32;
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let xs: Vec<BigUint> = (0..n)
            .map(|k| {
                let k_big = BigUint::from(k as u64);
                match k % 6 {
                    0 => &half - &near - &k_big,
                    1 => &half + &near + &k_big,
                    2 => k_big,
                    3 => &b - 1u32 - &k_big,
                    4 => &half + &k_big - 300u32,
                    _ => {
                        let r = BigUint::from(rng.random::<u64>()) << 110u32;
                        (r + BigUint::from(rng.random::<u64>())) % &b
                    }
                }
            })
            .collect();
        let mut src = vec![0u64; n * sources.len()];
        for (row, &i) in src.chunks_mut(n).zip(&sources) {
            for (d, x) in row.iter_mut().zip(&xs) {
                *d = (x % ctx.primes[i])
                    .to_u64_digits()
                    .first()
                    .copied()
                    .unwrap_or(0);
            }
        }
        let targets: Vec<usize> = (0..top).collect();
        let out = convert(&ctx, conv, &src, &targets);
        for (row, &t) in out.chunks(n).zip(&targets) {
            let q = BigInt::from(ctx.primes[t]);
            for (k, (&got, x)) in row.iter().zip(&xs).enumerate() {
                let centred = if x > &half {
                    BigInt::from(x.clone()) - BigInt::from(b.clone())
                } else {
                    BigInt::from(x.clone())
                };
                let reduce = |v: BigInt| ((v % &q) + &q) % &q;
                let got = BigInt::from(got);
                if k % 6 == 4 {
                    let other = if x > &half {
                        BigInt::from(x.clone())
                    } else {
                        BigInt::from(x.clone()) - BigInt::from(b.clone())
                    };
                    assert!(
                        got == reduce(centred) || got == reduce(other),
                        "coefficient {k}"
                    );
                } else {
                    assert_eq!(got, reduce(centred), "coefficient {k}, target {t}");
                }
            }
        }
    }
}
