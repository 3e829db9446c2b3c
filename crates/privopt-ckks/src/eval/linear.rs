//! Slot-wise linear transforms `v ↦ M v` by the diagonal method with baby-step giant-step
//! rotations (Halevi–Shoup; the layer bootstrapping's CoeffToSlot/SlotToCoeff will use).
//!
//! With `M`'s generalized diagonals `u_i[j] = M[j][(j + i) mod s]` over the `s = n/2` slots,
//! `M v = Σ_i u_i ∘ rot(v, i)`. Writing `i = g·k + b`,
//! `M v = Σ_g rot( Σ_b rot(u_{gk+b}, −gk) ∘ rot(v, b), gk )`: `k − 1` baby rotations of `v`
//! shared by every giant step, and one rotation per giant step, instead of one per diagonal.
//! The diagonals are pre-rotated and encoded once, at the level the transform will run at.

use std::collections::BTreeMap;

use super::ciphertext::{Ciphertext, Plaintext};
use super::evaluator::Evaluator;
use crate::error::CkksError;

/// A linear transform prepared for one level.
#[derive(Debug)]
pub struct LinearTransform {
    level: usize,
    baby: usize,
    /// `giant g → [(b, encoded rot(u_{gk+b}, −gk))]`.
    blocks: BTreeMap<usize, Vec<(usize, Plaintext)>>,
}

impl LinearTransform {
    /// Prepares `M` given by its non-zero diagonals (`diagonals[i]` has one value per slot)
    /// for ciphertexts at `level`.
    pub fn new(
        ev: &Evaluator,
        diagonals: &BTreeMap<usize, Vec<f64>>,
        level: usize,
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
        let span = diagonals.keys().next_back().map_or(1, |&m| m + 1);
        let baby = (span as f64).sqrt().ceil().max(1.0) as usize;
        let mut blocks: BTreeMap<usize, Vec<(usize, Plaintext)>> = BTreeMap::new();
        for (&i, diag) in diagonals {
            let (g, b) = (i / baby, i % baby);
            let shift = g * baby;
            // rot(u, −gk)[j] = u[j − gk].
            let rotated: Vec<f64> = (0..slots)
                .map(|j| diag[(j + slots - shift % slots) % slots])
                .collect();
            let pt = ev.encode_for_product(&rotated, level)?;
            blocks.entry(g).or_default().push((b, pt));
        }
        Ok(Self {
            level,
            baby,
            blocks,
        })
    }

    /// The rotations [`LinearTransform::apply`] needs Galois keys for.
    pub fn rotations(&self) -> Vec<i64> {
        let mut r: Vec<i64> = self
            .blocks
            .values()
            .flat_map(|v| v.iter().map(|(b, _)| *b as i64))
            .chain(self.blocks.keys().map(|&g| (g * self.baby) as i64))
            .filter(|&k| k != 0)
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    }

    /// `M v` (one level).
    pub fn apply(&self, ev: &Evaluator, v: &Ciphertext) -> Result<Ciphertext, CkksError> {
        let v = ev.drop_to_level(v, self.level)?;
        let mut rotated: BTreeMap<usize, Ciphertext> = BTreeMap::new();
        let mut total: Option<Ciphertext> = None;
        for (&g, terms) in &self.blocks {
            let mut inner: Option<Ciphertext> = None;
            for (b, pt) in terms {
                if !rotated.contains_key(b) {
                    rotated.insert(*b, ev.rotate(&v, *b as i64)?);
                }
                let rb = rotated
                    .get(b)
                    .ok_or_else(|| CkksError::InvalidParams("baby rotation missing".into()))?;
                let term = ev.mul_plain(rb, pt)?;
                inner = Some(match inner {
                    None => term,
                    Some(acc) => ev.add(&acc, &term)?,
                });
            }
            if let Some(block) = inner {
                let moved = ev.rotate(&block, (g * self.baby) as i64)?;
                total = Some(match total {
                    None => moved,
                    Some(acc) => ev.add(&acc, &moved)?,
                });
            }
        }
        total.ok_or_else(|| CkksError::InvalidParams("a transform with no diagonals".into()))
    }
}
