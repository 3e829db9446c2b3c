//! Slot-wise linear transforms `v ↦ M v` by the diagonal method with baby-step giant-step
//! rotations (Halevi–Shoup), as bootstrapping's CoeffsToSlots and SlotsToCoeffs use them.
//!
//! With `M`'s generalized diagonals `u_i[j] = M[j][(j + i) mod s]` over the `s = n/2` slots,
//! `M v = Σ_i u_i ∘ rot(v, i)`. The diagonal offsets are read as signed (`i` and `i − s` are
//! the same rotation) and as multiples of their common stride `t` (a factor of a DFT has
//! offsets `t·e` for a small range of `e`). Writing `e = e_min + b + g·k` with `0 ≤ b < k`,
//! `M v = Σ_g rot(B_g, g·S)` with `S = t·k` and
//! `B_g = Σ_b rot(u_i, −g·S) ∘ rot(v, t·(e_min + b))`: `k` baby rotations of `v` shared by
//! every block, and the giant sum by Horner's rule,
//! `(…(B_G·rot(S) + B_{G−1})·rot(S) + …) + B_0`: one rotation per block, as with a rotation
//! per block, but all by `S`, so the giant steps need one key instead of one each (about
//! half of bootstrapping's keys). The diagonals are pre-rotated and encoded once, at the level
//! the transform will run at, with rows for the key-switching primes too: the rotations are
//! double-hoisted (one ModUp for the babies, the products and giant rotations over `Q_l·P`,
//! one ModDown for the whole sum; see `evaluator::hoisted`).

use std::collections::BTreeMap;

use privopt_math::simd::Kernels;

use super::ciphertext::Ciphertext;
use super::context::EvalContext;
use super::evaluator::{Evaluator, PlainRows};
use super::ring;
use crate::encoding::Complex;
use crate::error::CkksError;

/// A linear transform prepared for one level.
#[derive(Debug)]
pub struct LinearTransform {
    level: usize,
    /// The diagonals' scale.
    scale: f64,
    /// The giant step `S`.
    giant_step: i64,
    /// `block g → [(baby rotation t·(e_min + b), rot(u, −g·S))]`.
    blocks: BTreeMap<i64, Vec<(i64, Diagonal)>>,
}

/// A pre-rotated diagonal, encoded.
#[derive(Debug)]
enum Diagonal {
    /// Its rows over `Q_l·P`, evaluation form.
    Whole(Vec<u64>),
    /// Its integer coefficients (one row): the rows are rebuilt, with an NTT per prime, each
    /// time they are used.
    Compact(Vec<i64>),
}

impl PlainRows for Diagonal {
    fn has_rows(&self, rows: usize, n: usize) -> bool {
        match self {
            Diagonal::Whole(data) => data.has_rows(rows, n),
            Diagonal::Compact(coeffs) => coeffs.len() == n,
        }
    }

    fn row(&self, ctx: &EvalContext, r: usize, i: usize, scratch: &mut Vec<u64>) -> Option<&[u64]> {
        match self {
            Diagonal::Whole(data) => data.row(ctx, r, i, scratch),
            // Encoded where it is multiplied, while the row is in cache.
            Diagonal::Compact(coeffs) => {
                scratch.resize(ctx.n(), 0);
                ring::from_signed_row(ctx, coeffs, i, scratch, Kernels::detect());
                ctx.ntt(i).forward(scratch);
                None
            }
        }
    }
}

impl LinearTransform {
    /// Prepares `M` given by its non-zero diagonals (`diagonals[i]` has one value per slot)
    /// for ciphertexts at `level`.
    pub fn new(
        ev: &Evaluator,
        diagonals: &BTreeMap<usize, Vec<f64>>,
        level: usize,
    ) -> Result<Self, CkksError> {
        let complex: BTreeMap<usize, Vec<Complex>> = diagonals
            .iter()
            .map(|(&i, d)| (i, d.iter().map(|&x| Complex::new(x, 0.0)).collect()))
            .collect();
        Self::new_complex(ev, &complex, level)
    }

    /// [`LinearTransform::new`] for a complex matrix (bootstrapping's DFT factors).
    pub fn new_complex(
        ev: &Evaluator,
        diagonals: &BTreeMap<usize, Vec<Complex>>,
        level: usize,
    ) -> Result<Self, CkksError> {
        let scale = ev.product_scale(level)?;
        Self::new_complex_at_scale(ev, diagonals, level, scale)
    }

    /// [`LinearTransform::new_complex`] with the diagonals encoded at `scale`: for `m`
    /// transforms applied by [`LinearTransform::apply_unscaled`] at one level and rescaled
    /// once, each at the `m`-th root of the level's product scale.
    pub fn new_complex_at_scale(
        ev: &Evaluator,
        diagonals: &BTreeMap<usize, Vec<Complex>>,
        level: usize,
        scale: f64,
    ) -> Result<Self, CkksError> {
        Self::build(ev, diagonals, level, scale, false)
    }

    /// [`LinearTransform::new_complex_at_scale`]; with `compact`, each diagonal is kept as
    /// its integer coefficients, `1/(level + 1)` of the memory, and encoded again at every
    /// use (the same plaintext to the bit, so the same result).
    pub(crate) fn build(
        ev: &Evaluator,
        diagonals: &BTreeMap<usize, Vec<Complex>>,
        level: usize,
        scale: f64,
        compact: bool,
    ) -> Result<Self, CkksError> {
        let slots = ev.context().slots();
        if let Some((i, d)) = diagonals
            .iter()
            .find(|(i, d)| **i >= slots || d.len() != slots)
        {
            return Err(CkksError::InvalidParams(format!(
                "diagonal {i} has {} values; want index < {slots} and {slots} values",
                d.len()
            )));
        }
        if diagonals.is_empty() {
            return Err(CkksError::InvalidParams(
                "a transform with no diagonals".into(),
            ));
        }
        let plan = Plan::new(diagonals.keys().copied(), slots);
        super::encode::check_level(ev.context(), level)?;
        let ext = ev.context().extended_indices(level);
        let mut blocks: BTreeMap<i64, Vec<(i64, Diagonal)>> = BTreeMap::new();
        for (&i, diag) in diagonals {
            let (block, baby) = plan.split(i);
            // rot(u, −g·S)[j] = u[j − g·S].
            let shift = (block * plan.giant_step()).rem_euclid(slots as i64) as usize;
            let rotated: Vec<Complex> = (0..slots)
                .map(|j| diag[(j + slots - shift) % slots])
                .collect();
            let diagonal = if compact {
                Diagonal::Compact(super::encode::complex_integers(
                    ev.context(),
                    &rotated,
                    scale,
                )?)
            } else {
                Diagonal::Whole(super::encode::complex_rows(
                    ev.context(),
                    &rotated,
                    scale,
                    &ext,
                )?)
            };
            blocks.entry(block).or_default().push((baby, diagonal));
        }
        Ok(Self {
            level,
            scale,
            giant_step: plan.giant_step(),
            blocks,
        })
    }

    /// The level the transform runs at (it returns one level lower).
    pub fn level(&self) -> usize {
        self.level
    }

    /// The rotations [`LinearTransform::apply`] needs Galois keys for.
    pub fn rotations(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self
            .blocks
            .values()
            .flat_map(|v| v.iter().map(|(b, _)| *b))
            .chain(self.horner_steps().map(|(_, step)| step))
            .filter(|&k| k != 0)
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// The giant step `S`, if the transform has more than one block (its key serves every
    /// Horner step).
    pub fn giant_rotation(&self) -> Option<i64> {
        (self.blocks.len() > 1).then_some(self.giant_step)
    }

    /// Horner's rule from the highest block down: each block after the first with the
    /// rotation applied to the sum so far (`S` times the gap to the block above; the gap is 1
    /// unless blocks are missing). Ends at block 0, which holds the lowest offset.
    fn horner_steps(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        let mut above: Option<i64> = None;
        self.blocks.keys().rev().map(move |&g| {
            let step = above.map_or(0, |a| (a - g) * self.giant_step);
            above = Some(g);
            (g, step)
        })
    }

    /// `M v` (one level): products summed unrescaled, rotated by the giant steps, and
    /// rescaled once.
    pub fn apply(&self, ev: &Evaluator, v: &Ciphertext) -> Result<Ciphertext, CkksError> {
        ev.rescale(&self.apply_unscaled(ev, v)?)
    }

    /// `M v` before the rescale (scale times the diagonals' scale, level kept), for products
    /// of several transforms that share one level.
    pub fn apply_unscaled(&self, ev: &Evaluator, v: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let v = ev.drop_to_level(v, self.level)?;
        let babies: Vec<i64> = self
            .blocks
            .values()
            .flat_map(|terms| terms.iter().map(|(b, _)| *b))
            .collect::<std::collections::BTreeSet<i64>>()
            .into_iter()
            .collect();
        let rotated: BTreeMap<i64, _> = babies
            .iter()
            .copied()
            .zip(ev.rotations_extended(&v, &babies)?)
            .collect();
        let mut total: Option<_> = None;
        for (g, step) in self.horner_steps() {
            let mut block = ev.zero_extended(self.level, v.scale() * self.scale);
            let terms = self.blocks[&g]
                .iter()
                .map(|(baby, diagonal)| {
                    let rb = rotated
                        .get(baby)
                        .ok_or_else(|| CkksError::InvalidParams("baby rotation missing".into()))?;
                    Ok((rb, diagonal as &dyn PlainRows))
                })
                .collect::<Result<Vec<_>, CkksError>>()?;
            ev.mul_plain_sum_extended(&mut block, &terms, self.scale)?;
            // B_g + rot(sum of the blocks above, step).
            let mut sum = Some(block);
            if let Some(above) = total.take() {
                ev.add_rotated_extended(&mut sum, above, step)?;
            }
            total = sum;
        }
        // One ModDown and one rescale for the whole sum (the giant rotations work at any
        // scale).
        let total = total
            .ok_or_else(|| CkksError::InvalidParams("a transform with no diagonals".into()))?;
        Ok(ev.mod_down_extended(total))
    }
}

/// How diagonal offsets split into giant and baby rotations.
struct Plan {
    slots: usize,
    stride: i64,
    lowest: i64,
    baby: i64,
}

impl Plan {
    fn new(offsets: impl Iterator<Item = usize> + Clone, slots: usize) -> Self {
        let half = slots as i64 / 2;
        let signed = |i: usize| {
            let i = i as i64;
            if i > half { i - slots as i64 } else { i }
        };
        // The common power-of-two stride (slots is a power of two, so only those matter).
        let stride = offsets
            .clone()
            .filter(|&i| i != 0)
            .map(|i| 1i64 << i.trailing_zeros())
            .min()
            .unwrap_or(1);
        let (lo, hi) = offsets
            .map(|i| signed(i) / stride)
            .fold((i64::MAX, i64::MIN), |(lo, hi), e| (lo.min(e), hi.max(e)));
        let span = (hi - lo + 1).max(1);
        let baby = (span as f64).sqrt().ceil().max(1.0) as i64;
        Self {
            slots,
            stride,
            lowest: lo,
            baby,
        }
    }

    /// The giant step `S = t·k`.
    fn giant_step(&self) -> i64 {
        self.stride * self.baby
    }

    /// `(g, t·(e_min + b))` with offset `i ≡ g·S + t·(e_min + b)`, `g ≥ 0`, `0 ≤ b < k`.
    fn split(&self, i: usize) -> (i64, i64) {
        let half = self.slots as i64 / 2;
        let i = i as i64;
        let e = if i > half { i - self.slots as i64 } else { i } / self.stride - self.lowest;
        let (g, b) = (e / self.baby, e % self.baby);
        (g, self.stride * (self.lowest + b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_split_into_giant_plus_baby() {
        let slots = 1024;
        let offsets: Vec<usize> = [0i64, 8, 16, 24, -8, -16, -24, -32]
            .iter()
            .map(|&o| o.rem_euclid(slots as i64) as usize)
            .collect();
        let plan = Plan::new(offsets.iter().copied(), slots);
        assert_eq!(plan.stride, 8);
        assert_eq!(plan.lowest, -4);
        assert_eq!(plan.baby, 3); // span 8 → ⌈√8⌉
        for &i in &offsets {
            let (g, b) = plan.split(i);
            assert!(g >= 0);
            assert_eq!(
                (g * plan.giant_step() + b).rem_euclid(slots as i64) as usize,
                i
            );
            assert!((-32..-8).contains(&b) && b % 8 == 0, "{b}");
        }
        assert_eq!(plan.giant_step(), 24);
    }
}
