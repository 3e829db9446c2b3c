//! Slot-wise linear transforms `v ↦ M v` by the diagonal method with baby-step giant-step
//! rotations (Halevi–Shoup), as bootstrapping's CoeffsToSlots and SlotsToCoeffs use them.
//!
//! With `M`'s generalized diagonals `u_i[j] = M[j][(j + i) mod s]` over the `s = n/2` slots,
//! `M v = Σ_i u_i ∘ rot(v, i)`. The diagonal offsets are read as signed (`i` and `i − s` are
//! the same rotation) and as multiples of their common stride `t` (a factor of a DFT has
//! offsets `t·e` for a small range of `e`; offsets filling the whole cycle of `s/t` are read
//! from 0, so that no baby rotation is needed for the first). Writing `e = e_min + b + g·k` with `0 ≤ b < k`,
//! `M v = Σ_g rot(B_g, g·S)` with `S = t·k` and
//! `B_g = Σ_b rot(u_i, −g·S) ∘ rot(v, t·(e_min + b))`: `k` baby rotations of `v` shared by
//! every block, and the giant sum by Horner's rule,
//! `(…(B_G·rot(S) + B_{G−1})·rot(S) + …) + B_0`: one rotation per block, as with a rotation
//! per block, but all by `S`, so the giant steps need one key instead of one each (about
//! half of bootstrapping's keys). The diagonals are pre-rotated and encoded once, at the level
//! the transform will run at, with rows for the key-switching primes too: the rotations are
//! double-hoisted (one ModUp for the babies, the products and giant rotations over `Q_l·P`,
//! one ModDown for the whole sum; see `evaluator::hoisted`). A diagonal whose slots repeat
//! is stored as runs of equal values (`Diagonal::Runs`), and the babies can be made a few at
//! a time for fewer keys ([`BabySteps`]).

use std::collections::BTreeMap;

use privopt_math::simd::Kernels;

use super::ciphertext::Ciphertext;
use super::context::EvalContext;
use super::evaluator::{Evaluator, Extended, PlainRows};
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
    /// The stride `t` of the diagonal offsets (and of the baby rotations).
    stride: i64,
    /// How the baby rotations are made: see [`BabySteps`].
    babies: BabySteps,
    /// `block g → [(baby rotation t·(e_min + b), rot(u, −g·S))]`.
    blocks: BTreeMap<i64, Vec<(i64, Diagonal)>>,
}

/// How a transform makes its baby rotations `rot(v, first + j·t)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BabySteps {
    /// Each hoisted from `v`: one ModUp in all, a Galois key each.
    #[default]
    Hoisted,
    /// `m` at a time, each group hoisted from the last rotation of the group before (the
    /// first from `v`): `m + 1` keys (`first` and `t, 2t, …, m·t`) for a ModDown and a
    /// ModUp more per group (`0` counts as 1; a group as large as the babies is hoisting).
    /// Fewer key bytes for a little precision (each group adds its key-switching noise to the
    /// next).
    Grouped(usize),
}

/// A pre-rotated diagonal, encoded.
#[derive(Debug)]
enum Diagonal {
    /// Its rows over `Q_l·P`, evaluation form.
    Whole(Vec<u64>),
    /// Its rows over `Q_l·P`, each constant on runs of `width` (a power of two, at least 2)
    /// and stored one value per run. A diagonal whose slots repeat with period `p` encodes to
    /// a polynomial in `X^{n/2p}`, whose evaluations (in the NTT's bit-reversed order) come in
    /// runs of `n/2p`: the FFT factors away from the full-length butterflies are such, and
    /// take `1/width` of the memory with no work to rebuild.
    Runs { width: usize, values: Vec<u64> },
    /// Its integer coefficients (one row): the rows are rebuilt, with an NTT per prime, each
    /// time they are used.
    Compact(Vec<i64>),
}

impl Diagonal {
    /// `rows` (`n` per row) as runs if every row is constant on runs of 2 or more, else
    /// whole. Exact: a row is stored run by run only where its values are equal.
    fn from_rows(rows: Vec<u64>, n: usize) -> Self {
        let width = run_width(&rows, n);
        if width < 2 {
            return Diagonal::Whole(rows);
        }
        let values = rows.iter().step_by(width).copied().collect();
        Diagonal::Runs { width, values }
    }

    /// Bytes held.
    fn byte_len(&self) -> usize {
        match self {
            Diagonal::Whole(v) | Diagonal::Runs { values: v, .. } => v.len() * 8,
            Diagonal::Compact(v) => v.len() * 8,
        }
    }
}

/// The largest power of two `w ≤ n` such that each row of `n` is constant on the runs
/// `[k·w, (k + 1)·w)`: every change of value must sit at a multiple of `w`.
fn run_width(rows: &[u64], n: usize) -> usize {
    let mut width = n;
    for row in rows.chunks_exact(n) {
        for (j, pair) in row.windows(2).enumerate() {
            if pair[0] != pair[1] {
                width = width.min(1 << (j + 1).trailing_zeros());
                if width == 1 {
                    return 1;
                }
            }
        }
    }
    width
}

impl PlainRows for Diagonal {
    fn has_rows(&self, rows: usize, n: usize) -> bool {
        match self {
            Diagonal::Whole(data) => data.has_rows(rows, n),
            Diagonal::Runs { width, values } => values.len() * width == rows * n,
            Diagonal::Compact(coeffs) => coeffs.len() == n,
        }
    }

    fn row(&self, ctx: &EvalContext, r: usize, i: usize, scratch: &mut Vec<u64>) -> Option<&[u64]> {
        match self {
            Diagonal::Whole(data) => data.row(ctx, r, i, scratch),
            Diagonal::Runs { width, values } => {
                let n = ctx.n();
                let per_row = n / width;
                scratch.resize(n, 0);
                for (run, &v) in scratch
                    .chunks_exact_mut(*width)
                    .zip(&values[r * per_row..(r + 1) * per_row])
                {
                    run.fill(v);
                }
                None
            }
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
        Self::build(ev, diagonals, level, scale, false, BabySteps::Hoisted)
    }

    /// [`LinearTransform::new_complex_at_scale`] with its memory chosen: with `compact`,
    /// each diagonal not stored as runs is kept as its integer coefficients, `1/(level + 1)`
    /// of the memory, and encoded again at every use (the same plaintext to the bit, so the
    /// same result); `babies` sets how many Galois keys the baby rotations take.
    pub(crate) fn build(
        ev: &Evaluator,
        diagonals: &BTreeMap<usize, Vec<Complex>>,
        level: usize,
        scale: f64,
        compact: bool,
        babies: BabySteps,
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
            let integers = super::encode::complex_integers(ev.context(), &rotated, scale)?;
            let rows = super::encode::integer_rows_wide(ev.context(), &integers, &ext);
            let diagonal = match Diagonal::from_rows(rows, ev.context().n()) {
                Diagonal::Whole(_) if compact => {
                    Diagonal::Compact(super::encode::narrow_integers(&integers, scale)?)
                }
                d => d,
            };
            blocks.entry(block).or_default().push((baby, diagonal));
        }
        Ok(Self {
            level,
            scale,
            giant_step: plan.giant_step(),
            stride: plan.stride,
            babies,
            blocks,
        })
    }

    /// Bytes held by the encoded diagonals.
    pub fn byte_len(&self) -> usize {
        self.blocks
            .values()
            .flatten()
            .map(|(_, d)| d.byte_len())
            .sum()
    }

    /// The level the transform runs at (it returns one level lower).
    pub fn level(&self) -> usize {
        self.level
    }

    /// The rotations [`LinearTransform::apply`] needs Galois keys for: the baby rotations'
    /// (see [`BabySteps`]) and the giant steps.
    pub fn rotations(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self
            .baby_keys()
            .into_iter()
            .chain(self.horner_steps().map(|(_, step)| step))
            .filter(|&k| k != 0)
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// The rotations used more than once per application, whose keys are worth keeping
    /// whole: the giant step `S` (every Horner step) and a grouped chain's steps.
    pub fn repeated_rotations(&self) -> Vec<i64> {
        let giant = (self.blocks.len() > 1).then_some(self.giant_step);
        let group = match self.grouping() {
            Some((_, group)) => (1..=group as i64).map(|j| j * self.stride).collect(),
            None => Vec::new(),
        };
        giant.into_iter().chain(group).collect()
    }

    /// The baby rotations the diagonals use, ascending.
    fn babies(&self) -> Vec<i64> {
        self.blocks
            .values()
            .flat_map(|terms| terms.iter().map(|(b, _)| *b))
            .collect::<std::collections::BTreeSet<i64>>()
            .into_iter()
            .collect()
    }

    /// `(count, m)` if the babies are made `m` at a time: the `count` multiples of the
    /// stride from the first baby to the last (a missing diagonal leaves one unused).
    fn grouping(&self) -> Option<(usize, usize)> {
        let BabySteps::Grouped(m) = self.babies else {
            return None;
        };
        let babies = self.babies();
        let (first, last) = (*babies.first()?, *babies.last()?);
        let count = ((last - first) / self.stride + 1) as usize;
        (m.max(1) < count).then_some((count, m.max(1)))
    }

    /// The Galois keys of the baby rotations.
    fn baby_keys(&self) -> Vec<i64> {
        let babies = self.babies();
        match (self.grouping(), babies.first()) {
            (Some((_, m)), Some(&first)) => std::iter::once(first)
                .chain((1..=m as i64).map(|j| j * self.stride))
                .collect(),
            _ => babies,
        }
    }

    /// The baby rotations of `v`, by offset.
    fn baby_rotations(
        &self,
        ev: &Evaluator,
        v: &Ciphertext,
    ) -> Result<BTreeMap<i64, Extended>, CkksError> {
        let babies = self.babies();
        let (Some((count, m)), Some(&first)) = (self.grouping(), babies.first()) else {
            let rotated = ev.rotations_extended(v, &babies)?;
            return Ok(babies.into_iter().zip(rotated).collect());
        };
        // The first hoisted from `v`; then each group hoisted from the last one made, by
        // `t, 2t, …, m·t`.
        let mut out = ev.rotations_extended(v, &[first])?;
        while out.len() < count {
            let steps: Vec<i64> = (1..=m.min(count - out.len()) as i64)
                .map(|j| j * self.stride)
                .collect();
            let base = out
                .last()
                .ok_or_else(|| CkksError::InvalidParams("no baby rotation to go on from".into()))?;
            let next = ev.rotations_of_extended(base, &steps)?;
            out.extend(next);
        }
        Ok((0..count as i64)
            .map(|j| first + j * self.stride)
            .zip(out)
            .collect())
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
        let rotated = self.baby_rotations(ev, &v)?;
        let mut total: Option<_> = None;
        for (g, step) in self.horner_steps() {
            let mut block = ev.zero_extended(v.key_id(), self.level, v.scale() * self.scale);
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
        // The common power-of-two stride (slots is a power of two, so only those matter).
        let stride = offsets
            .clone()
            .filter(|&i| i != 0)
            .map(|i| 1i64 << i.trailing_zeros())
            .min()
            .unwrap_or(1);
        let (lo, hi) = offsets
            .map(|i| signed(i, slots) / stride)
            .fold((i64::MAX, i64::MIN), |(lo, hi), e| (lo.min(e), hi.max(e)));
        // Offsets that fill the whole cycle of `slots / t` multiples are read from 0, so
        // that the first baby is `v` itself (no rotation, no key).
        let cycle = slots as i64 / stride;
        let span = (hi - lo + 1).clamp(1, cycle);
        let lowest = if span == cycle { 0 } else { lo };
        let baby = (span as f64).sqrt().ceil().max(1.0) as i64;
        Self {
            slots,
            stride,
            lowest,
            baby,
        }
    }

    /// The giant step `S = t·k`.
    fn giant_step(&self) -> i64 {
        self.stride * self.baby
    }

    /// `(g, t·(e_min + b))` with offset `i ≡ g·S + t·(e_min + b)`, `g ≥ 0`, `0 ≤ b < k`.
    fn split(&self, i: usize) -> (i64, i64) {
        let e = signed(i, self.slots) / self.stride - self.lowest;
        // A whole cycle read from 0: negative offsets wrap to the top of the cycle.
        let e = e.rem_euclid(self.slots as i64 / self.stride);
        let (g, b) = (e / self.baby, e % self.baby);
        (g, self.stride * (self.lowest + b))
    }
}

/// Offset `i` of `slots` read as signed (`i` and `i − slots` are the same rotation).
fn signed(i: usize, slots: usize) -> i64 {
    let (i, slots) = (i as i64, slots as i64);
    if i > slots / 2 { i - slots } else { i }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    use super::*;
    use crate::eval::bootstrap::dft;
    use crate::eval::{EvalContext, GaloisKeys, SecretKey, decode_complex, encode_complex_at};
    use crate::params::CkksParamsBuilder;

    fn context() -> std::sync::Arc<EvalContext> {
        let params = CkksParamsBuilder::leveled(1 << 12, 60, 50, 4, &[60, 60])
            .insecure_for_testing(true)
            .build()
            .unwrap();
        EvalContext::new(&params).unwrap()
    }

    #[test]
    fn run_width_is_the_longest_power_of_two_run_in_every_row() {
        assert_eq!(run_width(&[5, 5, 7, 7, 7, 7, 2, 2], 8), 2);
        assert_eq!(run_width(&[5, 5, 5, 5, 7, 7, 7, 7], 8), 4);
        assert_eq!(run_width(&[5; 8], 8), 8);
        // Equal neighbours across a run's edge do not make a run.
        assert_eq!(run_width(&[5, 7, 7, 2], 4), 1);
        assert_eq!(run_width(&[5, 5, 5, 7], 4), 1);
        // The narrowest row decides.
        assert_eq!(run_width(&[1, 1, 1, 1, 3, 3, 4, 4], 4), 2);
    }

    /// A diagonal whose slots repeat with period `p` is a polynomial in `X^{n/2p}`, and its
    /// rows come in runs of `n/2p`: kept as runs, each row rebuilt is the whole row to the bit.
    #[test]
    fn periodic_diagonals_are_kept_as_runs_of_the_same_rows() {
        let ctx = context();
        let (n, slots) = (ctx.n(), ctx.slots());
        let ext = ctx.extended_indices(2);
        for period in [1, 2, 16, 512, slots] {
            let values: Vec<Complex> = (0..slots)
                .map(|j| {
                    let j = (j % period) as f64;
                    Complex::new((j * 0.37).sin(), (j * 0.91).cos())
                })
                .collect();
            let rows =
                super::super::encode::complex_rows(&ctx, &values, 2f64.powi(40), &ext).unwrap();
            let diagonal = Diagonal::from_rows(rows.clone(), n);
            let width = n / (2 * period);
            match &diagonal {
                Diagonal::Runs { width: w, .. } => assert_eq!(*w, width, "period {period}"),
                Diagonal::Whole(_) => assert_eq!(width, 1, "period {period}"),
                Diagonal::Compact(_) => unreachable!(),
            }
            assert_eq!(diagonal.byte_len(), rows.len() * 8 / width);
            assert!(diagonal.has_rows(ext.len(), n));
            let mut scratch = Vec::new();
            for (r, &i) in ext.iter().enumerate() {
                let got = match diagonal.row(&ctx, r, i, &mut scratch) {
                    Some(row) => row.to_vec(),
                    None => scratch.clone(),
                };
                assert!(got == rows[r * n..(r + 1) * n], "period {period}, row {r}");
            }
        }
    }

    /// Grouped baby steps compute the same transform as hoisted ones with the keys their own
    /// `rotations` name, fewer of them.
    #[test]
    fn grouped_baby_steps_match_the_matrix_with_fewer_keys() {
        let ctx = context();
        let slots = ctx.slots();
        let plain = Evaluator::new(&ctx, None, GaloisKeys::default());
        let level = ctx.max_level();
        let scale = plain.product_scale(level).unwrap();
        // An FFT factor of 63 diagonals of stride 1: 8 babies, 8 blocks.
        let m = &dft::coeffs_to_slots(slots, 2)[1];
        let x: Vec<Complex> = (0..slots)
            .map(|j| Complex::new((j as f64 * 0.37).sin(), (j as f64 * 0.11).cos()))
            .collect();
        let want = dft::apply(m, &x);
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let sk = SecretKey::generate(&ctx, &mut rng);
        let pt = encode_complex_at(&ctx, &x, level, ctx.level_scale(level)).unwrap();
        let ct = sk.encrypt(&pt, &mut rng).unwrap();
        let mut key_counts = Vec::new();
        for babies in [
            BabySteps::Hoisted,
            BabySteps::Grouped(1),
            BabySteps::Grouped(3),
            BabySteps::Grouped(64),
        ] {
            let t = LinearTransform::build(&plain, m, level, scale, false, babies).unwrap();
            let ev = Evaluator::new(&ctx, None, sk.galois_keys(&t.rotations(), false, &mut rng));
            let out = t.apply(&ev, &ct).unwrap();
            let got = decode_complex(&ctx, &sk.decrypt(&out).unwrap()).unwrap();
            let err = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (*g - *w).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-8, "{babies:?}: error {err:e}");
            key_counts.push(t.rotations().len());
            // The keys kept whole are the ones used more than once.
            let repeated = t.repeated_rotations();
            assert!(repeated.iter().all(|r| t.rotations().contains(r)));
        }
        // Hoisted: a key per baby and the giant step; grouped by m: the first, t … m·t and
        // the giant step; a group as large as the babies is hoisting.
        assert_eq!(key_counts[1..3], [3, 5]);
        assert!(
            key_counts[0] > 5 && key_counts[3] == key_counts[0],
            "{key_counts:?}"
        );
    }

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
        // Offsets filling the whole cycle (every multiple of 8 of 64 slots) are read from 0:
        // the first baby is no rotation.
        let slots = 64;
        let plan = Plan::new((0..slots).step_by(8), slots);
        assert_eq!((plan.stride, plan.lowest, plan.baby), (8, 0, 3));
        let babies: std::collections::BTreeSet<i64> = (0..slots)
            .step_by(8)
            .map(|i| {
                let (g, b) = plan.split(i);
                assert!(
                    g >= 0 && (0..24).contains(&b) && b % 8 == 0,
                    "{i}: {g}, {b}"
                );
                assert_eq!(
                    (g * plan.giant_step() + b).rem_euclid(slots as i64) as usize,
                    i
                );
                b
            })
            .collect();
        assert_eq!(babies.into_iter().collect::<Vec<_>>(), [0, 8, 16]);
    }
}
