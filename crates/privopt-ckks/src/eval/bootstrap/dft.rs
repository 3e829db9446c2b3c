//! The slot encoding's special FFT as sparse factors, for CoeffsToSlots and SlotsToCoeffs.
//!
//! Decoding maps the coefficient pairs `w_k = c_k + i·c_{k+n/2}` to the slots `z = U w`,
//! `U[j][k] = ζ_j^k`, `ζ_j = e^{iπ·5^j/n}`. The encoder computes it as a bit-reversal `P`
//! followed by `log2(n/2)` butterfly stages `F_2, F_4, …, F_{n/2}` (block lengths); each stage
//! has three non-zero diagonals (offsets `0` and `±len/2`). So
//! `SlotsToCoeffs: P w ↦ F_{n/2} ⋯ F_2 (P w) = z` and
//! `CoeffsToSlots: z ↦ G_2 ⋯ G_{n/2} z = P w` with `G = F^{-1}`: the bit-reversed order is
//! kept in between, where EvalMod acts slot by slot and does not care. Consecutive stages are
//! merged into one matrix per level of the budget: merging `k` stages of stride `t` gives at
//! most `2^{k+1} − 1` diagonals, all multiples of `t`, which the BSGS plan of
//! [`super::super::LinearTransform`] evaluates with about `2·2^{k/2}` rotations.

use std::collections::BTreeMap;

use crate::encoding::Complex;

/// A `slots × slots` matrix by its non-zero generalized diagonals:
/// `diagonals[i][j] = M[j][(j + i) mod slots]`.
pub type Diagonals = BTreeMap<usize, Vec<Complex>>;

/// The twiddle of butterfly `j` in a block of length `len`: `e^{2πi·(5^j mod 4len)/4len}`.
fn twiddle(j: usize, len: usize) -> Complex {
    let m = 4 * len;
    let mut g = 1usize;
    for _ in 0..j {
        g = g * 5 % m;
    }
    Complex::cis(2.0 * std::f64::consts::PI * g as f64 / m as f64)
}

fn put(d: &mut Diagonals, slots: usize, offset: usize, row: usize, v: Complex) {
    let diag = d
        .entry(offset % slots)
        .or_insert_with(|| vec![Complex::default(); slots]);
    diag[row] = diag[row] + v;
}

/// `F_len`: `(u, v) ↦ (u + ξ v, u − ξ v)` on each pair `len/2` apart (decoding direction).
fn forward_stage(slots: usize, len: usize) -> Diagonals {
    let half = len / 2;
    let mut d = Diagonals::new();
    for p in 0..slots {
        let j = p % len;
        if j < half {
            put(&mut d, slots, 0, p, Complex::new(1.0, 0.0));
            put(&mut d, slots, half, p, twiddle(j, len));
        } else {
            let xi = twiddle(j - half, len);
            put(&mut d, slots, 0, p, xi.scale(-1.0));
            put(&mut d, slots, slots - half, p, Complex::new(1.0, 0.0));
        }
    }
    d
}

/// `G_len = F_len^{-1}`: `(a, b) ↦ ((a + b)/2, (a − b)·ξ̄/2)` (encoding direction).
fn inverse_stage(slots: usize, len: usize) -> Diagonals {
    let half = len / 2;
    let mut d = Diagonals::new();
    for p in 0..slots {
        let j = p % len;
        if j < half {
            put(&mut d, slots, 0, p, Complex::new(0.5, 0.0));
            put(&mut d, slots, half, p, Complex::new(0.5, 0.0));
        } else {
            let xi = twiddle(j - half, len).conj().scale(0.5);
            put(&mut d, slots, slots - half, p, xi);
            put(&mut d, slots, 0, p, xi.scale(-1.0));
        }
    }
    d
}

/// `A·B` (apply `B`, then `A`): `(AB)[p][p + i + k] += a_i[p]·b_k[p + i]`.
pub fn product(a: &Diagonals, b: &Diagonals, slots: usize) -> Diagonals {
    let mut out = Diagonals::new();
    for (&i, da) in a {
        for (&k, db) in b {
            let diag = out
                .entry((i + k) % slots)
                .or_insert_with(|| vec![Complex::default(); slots]);
            for (p, x) in diag.iter_mut().enumerate() {
                *x = *x + da[p] * db[(p + i) % slots];
            }
        }
    }
    // Entries that cancel exactly (a merged stage's symmetric terms) need no rotation.
    out.retain(|_, d| d.iter().any(|x| x.abs() > 1e-300));
    out
}

/// Every entry times `c`.
pub fn scaled(d: &Diagonals, c: f64) -> Diagonals {
    d.iter()
        .map(|(&i, v)| (i, v.iter().map(|x| x.scale(c)).collect()))
        .collect()
}

/// A `period × period` matrix on slots that repeat with that period (sparse packing), as a
/// matrix over `slots` slots (a multiple of `period`): each diagonal repeated, and its offset
/// read signed within the period (a rotation by `−h` moves such slots as `period − h` does),
/// so the rotations stay as short as the period's.
pub fn replicated(d: &Diagonals, period: usize, slots: usize) -> Diagonals {
    d.iter()
        .map(|(&i, v)| {
            let offset = if i <= period / 2 {
                i
            } else {
                slots - (period - i)
            };
            (offset, (0..slots).map(|j| v[j % period]).collect())
        })
        .collect()
}

/// The diagonal matrix with `d` on its diagonal.
pub fn diagonal(d: Vec<Complex>) -> Diagonals {
    Diagonals::from([(0, d)])
}

/// `M x` in the clear (the reference the homomorphic transforms are tested against).
pub fn apply(d: &Diagonals, x: &[Complex]) -> Vec<Complex> {
    let slots = x.len();
    let mut out = vec![Complex::default(); slots];
    for (&i, diag) in d {
        for (p, o) in out.iter_mut().enumerate() {
            *o = *o + diag[p] * x[(p + i) % slots];
        }
    }
    out
}

/// Block lengths `2, 4, …, slots` split into `levels` consecutive groups (sizes differing by
/// at most one, the larger groups first).
fn groups(slots: usize, levels: usize) -> Vec<Vec<usize>> {
    let lens: Vec<usize> = (1..=slots.trailing_zeros()).map(|s| 1usize << s).collect();
    let levels = levels.clamp(1, lens.len().max(1));
    let (base, extra) = (lens.len() / levels, lens.len() % levels);
    let mut out = Vec::with_capacity(levels);
    let mut at = 0;
    for g in 0..levels {
        let size = base + usize::from(g < extra);
        out.push(lens[at..at + size].to_vec());
        at += size;
    }
    out
}

/// The product of the stages of block lengths `lens`, applied in that order.
fn merged(
    slots: usize,
    lens: impl Iterator<Item = usize>,
    stage: fn(usize, usize) -> Diagonals,
) -> Diagonals {
    lens.fold(Diagonals::new(), |acc, len| {
        let next = stage(slots, len);
        if acc.is_empty() {
            next
        } else {
            product(&next, &acc, slots)
        }
    })
}

/// SlotsToCoeffs' factors in the order they are applied (`F_2` side first), one per level.
pub fn slots_to_coeffs(slots: usize, levels: usize) -> Vec<Diagonals> {
    groups(slots, levels)
        .iter()
        .map(|lens| merged(slots, lens.iter().copied(), forward_stage))
        .collect()
}

/// CoeffsToSlots' factors in the order they are applied (`G_{slots}` side first), one per
/// level.
pub fn coeffs_to_slots(slots: usize, levels: usize) -> Vec<Diagonals> {
    groups(slots, levels)
        .iter()
        .rev()
        .map(|lens| merged(slots, lens.iter().rev().copied(), inverse_stage))
        .collect()
}

/// Index `k` with its `log2(slots)` bits reversed.
pub fn bit_reverse(k: usize, slots: usize) -> usize {
    let bits = slots.trailing_zeros();
    if bits == 0 {
        return 0;
    }
    k.reverse_bits() >> (usize::BITS - bits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::SlotEncoder;

    fn chain(factors: &[Diagonals], x: &[Complex]) -> Vec<Complex> {
        factors.iter().fold(x.to_vec(), |v, f| apply(f, &v))
    }

    fn worst(a: &[Complex], b: &[Complex]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (*x - *y).abs())
            .fold(0.0, f64::max)
    }

    /// A matrix over a period, replicated, acts on repeating slots as on one period, with
    /// offsets read signed (short rotations).
    #[test]
    fn replicated_matrices_act_on_each_period() {
        let (period, slots) = (16, 128);
        let m = &coeffs_to_slots(period, 2)[1];
        let x: Vec<Complex> = (0..period)
            .map(|j| Complex::new((j as f64 * 0.3).sin(), (j as f64 * 0.7).cos()))
            .collect();
        let want = apply(m, &x);
        let wide = replicated(m, period, slots);
        assert_eq!(wide.len(), m.len());
        assert!(
            wide.keys()
                .all(|&i| i < period / 2 + 1 || i > slots - period / 2)
        );
        let tiled: Vec<Complex> = (0..slots).map(|j| x[j % period]).collect();
        let got = apply(&wide, &tiled);
        let tiled_want: Vec<Complex> = (0..slots).map(|j| want[j % period]).collect();
        assert!(worst(&got, &tiled_want) < 1e-12);
    }

    /// The factors against the encoder's own special FFT, at every level budget.
    #[test]
    fn factors_equal_the_encoders_fft_at_every_budget() {
        let n = 256;
        let slots = n / 2;
        let enc = SlotEncoder::new(n).unwrap();
        let coeffs: Vec<f64> = (0..n)
            .map(|k| ((k * 37 % 101) as f64 - 50.0) / 7.0)
            .collect();
        let z = enc.decode_complex(&coeffs);
        let w_rev: Vec<Complex> = (0..slots)
            .map(|k| {
                let j = bit_reverse(k, slots);
                Complex::new(coeffs[j], coeffs[j + slots])
            })
            .collect();
        for levels in 1..=7 {
            let stc = slots_to_coeffs(slots, levels);
            let cts = coeffs_to_slots(slots, levels);
            assert_eq!((stc.len(), cts.len()), (levels, levels));
            assert!(
                worst(&chain(&stc, &w_rev), &z) < 1e-9,
                "StC, {levels} levels"
            );
            assert!(
                worst(&chain(&cts, &z), &w_rev) < 1e-9,
                "CtS, {levels} levels"
            );
            // Merging k stages of stride t leaves at most 2^{k+1} − 1 diagonals.
            for (f, g) in stc.iter().zip(groups(slots, levels)) {
                assert!(f.len() < 1 << (g.len() + 1), "{} diagonals", f.len());
            }
        }
    }
}
