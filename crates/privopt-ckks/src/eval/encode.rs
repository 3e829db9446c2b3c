//! Encoding real vectors into plaintexts at a level's scale, and decoding decryptions.

use super::ciphertext::Plaintext;
use super::context::EvalContext;
use super::ring;
use crate::encoding::Complex;
use crate::error::CkksError;

/// Largest `|coefficient · scale|` accepted: rounding to `i128` must not overflow, and the
/// value must stay far below the smallest modulus it will ever be reduced against.
const MAX_SCALED: f64 = 1.0e36;

/// Encodes `values` (at most `n/2`) at level `level` and scale `Δ_level`.
pub fn encode(ctx: &EvalContext, values: &[f64], level: usize) -> Result<Plaintext, CkksError> {
    // Before the scale lookup, which indexes the chain by level.
    check_level(ctx, level)?;
    encode_at(ctx, values, level, ctx.level_scale(level))
}

/// Encodes `values` at level `level` and an explicit scale (for plaintexts multiplied into
/// ciphertexts, whose product must land on the next level's scale).
pub fn encode_at(
    ctx: &EvalContext,
    values: &[f64],
    level: usize,
    scale: f64,
) -> Result<Plaintext, CkksError> {
    check_level(ctx, level)?;
    let coeffs = ctx.encoder().coefficients(values)?;
    from_coefficients(ctx, &coeffs, level, scale)
}

/// Encodes complex slot values at `level` and an explicit scale (bootstrapping's transforms).
pub fn encode_complex_at(
    ctx: &EvalContext,
    values: &[Complex],
    level: usize,
    scale: f64,
) -> Result<Plaintext, CkksError> {
    check_level(ctx, level)?;
    let coeffs = ctx.encoder().coefficients_complex(values)?;
    from_coefficients(ctx, &coeffs, level, scale)
}

/// The plaintext with real coefficients `coeffs · scale`, rounded, at `level`.
fn from_coefficients(
    ctx: &EvalContext,
    coeffs: &[f64],
    level: usize,
    scale: f64,
) -> Result<Plaintext, CkksError> {
    let idx: Vec<usize> = (0..=level).collect();
    let data = integer_rows_wide(ctx, &scaled_integers(coeffs, scale)?, &idx);
    Ok(plaintext(ctx, data, level, scale))
}

/// The rows (evaluation form) of complex slot values encoded at `scale`, for the primes
/// `indices` of `Q·P`: [`encode_complex_at`]'s rows where `indices` are `0..=level`, and
/// rows for key-switching primes too where a product is taken over `Q_l·P`.
#[cfg(test)]
pub(crate) fn complex_rows(
    ctx: &EvalContext,
    values: &[Complex],
    scale: f64,
    indices: &[usize],
) -> Result<Vec<u64>, CkksError> {
    Ok(integer_rows_wide(
        ctx,
        &complex_integers(ctx, values, scale)?,
        indices,
    ))
}

/// The integer coefficients of complex slot values encoded at `scale` (rounded), which
/// [`integer_rows_wide`] reduces into a plaintext's rows.
pub(crate) fn complex_integers(
    ctx: &EvalContext,
    values: &[Complex],
    scale: f64,
) -> Result<Vec<i128>, CkksError> {
    let coeffs = ctx.encoder().coefficients_complex(values)?;
    scaled_integers(&coeffs, scale)
}

/// Integer coefficients reduced modulo each prime of `indices`, in evaluation form.
pub(crate) fn integer_rows_wide(ctx: &EvalContext, scaled: &[i128], indices: &[usize]) -> Vec<u64> {
    let n = ctx.n();
    let mut data = vec![0u64; n * indices.len()];
    for (row, &i) in data.chunks_mut(n).zip(indices) {
        let m = &ctx.moduli[i];
        for (d, &v) in row.iter_mut().zip(scaled) {
            *d = m.reduce_i128(v);
        }
    }
    ring::forward(ctx, &mut data, indices);
    data
}

/// `coeffs · scale`, rounded.
fn scaled_integers(coeffs: &[f64], scale: f64) -> Result<Vec<i128>, CkksError> {
    coeffs
        .iter()
        .map(|&c| {
            let v = (c * scale).round();
            if v.is_finite() && v.abs() < MAX_SCALED {
                Ok(v as i128)
            } else {
                Err(CkksError::Encoding(format!(
                    "slot values too large for scale {scale:e}"
                )))
            }
        })
        .collect()
}

fn plaintext(ctx: &EvalContext, data: Vec<u64>, level: usize, scale: f64) -> Plaintext {
    Plaintext {
        data,
        level,
        scale,
        params: *ctx.params().fingerprint(),
    }
}

/// [`complex_integers`] kept as one row of `i64` in place of one row per prime (reduced and
/// transformed row by row where they are used). Refuses coefficients beyond `i64`.
pub(crate) fn narrow_integers(scaled: &[i128], scale: f64) -> Result<Vec<i64>, CkksError> {
    scaled
        .iter()
        .map(|&v| {
            i64::try_from(v).map_err(|_| {
                CkksError::Encoding(format!(
                    "a coefficient beyond 64 bits at scale {scale:e}: keep this plaintext whole"
                ))
            })
        })
        .collect()
}

/// The rows of integer coefficients `coeffs` for the primes `indices`, in evaluation form
/// (bit for bit the ones [`complex_rows`] makes from the same values; a compact transform
/// diagonal builds them row by row where it is multiplied).
#[cfg(test)]
pub(crate) fn integer_rows(ctx: &EvalContext, coeffs: &[i64], indices: &[usize]) -> Vec<u64> {
    let mut data = ring::from_signed(ctx, coeffs, indices);
    ring::forward(ctx, &mut data, indices);
    data
}

/// The real slot values of a decrypted plaintext. The coefficients are reconstructed from the
/// first two primes (exact while `|coefficient| < q_0 q_1 / 2`, i.e. for any message that
/// could still be rescaled), or from `q_0` alone at level 0.
pub fn decode(ctx: &EvalContext, pt: &Plaintext) -> Result<Vec<f64>, CkksError> {
    Ok(ctx.encoder().decode(&unscaled_coefficients(ctx, pt)?))
}

/// The complex slot values of a decrypted plaintext (see [`decode`]).
pub fn decode_complex(ctx: &EvalContext, pt: &Plaintext) -> Result<Vec<Complex>, CkksError> {
    Ok(ctx
        .encoder()
        .decode_complex(&unscaled_coefficients(ctx, pt)?))
}

/// The plaintext's coefficients divided by its scale.
fn unscaled_coefficients(ctx: &EvalContext, pt: &Plaintext) -> Result<Vec<f64>, CkksError> {
    super::ciphertext::check_params(ctx, &pt.params, "a plaintext")?;
    let n = ctx.n();
    let rows = (pt.level + 1).min(2);
    let idx: Vec<usize> = (0..rows).collect();
    let mut data = pt.data[..rows * n].to_vec();
    ring::inverse(ctx, &mut data, &idx);
    let q0 = ctx.primes[0];
    let coeffs: Vec<f64> = if rows == 1 {
        data.iter()
            .map(|&x| privopt_math::modarith::center(x, q0) as f64 / pt.scale)
            .collect()
    } else {
        let q1 = ctx.primes[1];
        let m1 = &ctx.moduli[1];
        let q0_inv = m1.shoup(privopt_math::modarith::inv_mod(q0 % q1, q1));
        let big = q0 as u128 * q1 as u128;
        (0..n)
            .map(|j| {
                let (r0, r1) = (data[j], data[n + j]);
                // x = r0 + q0 · ((r1 − r0) q0^{-1} mod q1) ∈ [0, q0 q1).
                let t = m1.mul_shoup(
                    privopt_math::modarith::sub_mod(r1, m1.reduce(r0), q1),
                    q0_inv,
                );
                let x = r0 as u128 + q0 as u128 * t as u128;
                let centered = if x > big / 2 {
                    -((big - x) as f64)
                } else {
                    x as f64
                };
                centered / pt.scale
            })
            .collect()
    };
    Ok(coeffs)
}

pub(crate) fn check_level(ctx: &EvalContext, level: usize) -> Result<(), CkksError> {
    if level > ctx.max_level() {
        return Err(CkksError::LevelExhausted(format!(
            "level {level} is above the top level {}",
            ctx.max_level()
        )));
    }
    Ok(())
}
