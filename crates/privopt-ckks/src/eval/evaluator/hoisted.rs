//! Double hoisting (Bossuat, Mouchet, Troncoso-Pastoriza and Hubaux, Eurocrypt 2021): the
//! rotations of a baby-step giant-step sum kept over `Q_l·P`, times `P`, so that neither the
//! baby rotations nor the giant ones pay a ModDown each; the whole sum pays one.
//!
//! A hoisted rotation's key product is `P` times the switched value over `Q_l·P`; adding
//! `P·σ(c0)` makes it `P` times the rotated ciphertext. Plaintext products and sums keep that
//! form (the plaintexts carry rows for `P` too). A giant rotation of such a sum divides only
//! its `c1` by `P` (to raise it again for the key product); its `c0` is permuted as it is.

use super::super::EvalContext;
use super::super::keys::GaloisKey;
use super::{Ciphertext, CkksError, Evaluator, KeyId, check_key, keyswitch, ring};

/// A plaintext's rows over `Q_l·P` (evaluation form), as a product reads them.
pub(crate) trait PlainRows: Sync {
    /// Whether it has `rows` rows of `n` coefficients.
    fn has_rows(&self, rows: usize, n: usize) -> bool;
    /// Row `r` (prime `i`): borrowed if stored, else written to `scratch` (`None`), which
    /// the implementation sizes (stored rows never touch it).
    fn row(&self, ctx: &EvalContext, r: usize, i: usize, scratch: &mut Vec<u64>) -> Option<&[u64]>;
}

/// Stored rows.
impl PlainRows for Vec<u64> {
    fn has_rows(&self, rows: usize, n: usize) -> bool {
        self.len() == rows * n
    }

    fn row(&self, ctx: &EvalContext, r: usize, _: usize, _: &mut Vec<u64>) -> Option<&[u64]> {
        let n = ctx.n();
        Some(&self[r * n..(r + 1) * n])
    }
}

/// A rotation's switched `c1` over `Q_l·P`, `(k0, k1)`, with the key's permutation (for `c0`).
type Switched<'k> = (Vec<u64>, Vec<u64>, &'k [u32]);

/// `P` times a ciphertext of `level` and `scale`, over `Q_l·P` (rows in
/// [`super::super::EvalContext::extended_indices`] order).
#[derive(Debug)]
pub(crate) struct Extended {
    c0: Vec<u64>,
    c1: Vec<u64>,
    level: usize,
    scale: f64,
    params: [u8; 32],
    key: KeyId,
}

impl Evaluator {
    /// Rotations of `a` by each of `steps` (0 allowed) over `Q_l·P`, sharing one ModUp of its
    /// `c1` and with no ModDown.
    pub(crate) fn rotations_extended(
        &self,
        a: &Ciphertext,
        steps: &[i64],
    ) -> Result<Vec<Extended>, CkksError> {
        self.own(a)?;
        let keys = self.rotation_keys(steps, a.level, a.key)?;
        let ctx = &self.ctx;
        let ext_len = ctx.extended_indices(a.level).len() * ctx.n();
        let extended = |c0: Vec<u64>, c1: Vec<u64>| Extended {
            c0,
            c1,
            level: a.level,
            scale: a.scale,
            params: a.params,
            key: a.key,
        };
        Ok(self.install(|| {
            self.switched_rotations(&a.c1, a.level, &keys)
                .into_iter()
                .map(|switched| match switched {
                    Some((mut k0, k1, perm)) => {
                        let c0 = ring::permute(ctx, &a.c0, perm);
                        keyswitch::add_times_p(ctx, &mut k0, &c0, a.level);
                        extended(k0, k1)
                    }
                    // P·a: its P rows are 0.
                    None => {
                        let lift = |c: &[u64]| {
                            let mut x = vec![0u64; ext_len];
                            keyswitch::add_times_p(ctx, &mut x, c, a.level);
                            x
                        };
                        extended(lift(&a.c0), lift(&a.c1))
                    }
                })
                .collect()
        }))
    }

    /// `σ(c1)` switched by each key, over `Q_l·P` (no ModDown), with the key's permutation
    /// (`None` where there is no key: a rotation by 0). Several keys share one ModUp of `c1`
    /// (its digits permuted as they are read); one key takes the fused switch, which raises
    /// the permuted `c1` row by row and stores no digit.
    fn switched_rotations<'k>(
        &self,
        c1: &[u64],
        level: usize,
        keys: &[Option<&'k GaloisKey>],
    ) -> Vec<Option<Switched<'k>>> {
        let ctx = &self.ctx;
        let digits = (keys.iter().flatten().count() > 1).then(|| keyswitch::mod_up(ctx, c1, level));
        keys.iter()
            .map(|key| {
                let key = (*key)?;
                let (k0, k1) = match &digits {
                    Some(digits) => keyswitch::key_product_extended(
                        ctx,
                        digits,
                        level,
                        &key.key,
                        Some(&key.perm),
                    ),
                    None => keyswitch::switch_extended(
                        ctx,
                        &ring::permute(ctx, c1, &key.perm),
                        level,
                        &key.key,
                    ),
                };
                Some((k0, k1, key.perm.as_slice()))
            })
            .collect()
    }

    /// A zero over `Q_l·P` at `level` and `scale` under the secret `key`, to accumulate
    /// products into.
    pub(crate) fn zero_extended(&self, key: KeyId, level: usize, scale: f64) -> Extended {
        let len = self.ctx.extended_indices(level).len() * self.ctx.n();
        Extended {
            c0: vec![0; len],
            c1: vec![0; len],
            level,
            scale,
            params: *self.ctx.params().fingerprint(),
            key,
        }
    }

    /// `acc += Σ_t x_t ∘ p_t` for plaintexts `p_t` over `Q_l·P` at `scale` (`acc` has each
    /// `x_t`'s scale times `scale`). Row by row: a row of the two sums stays in cache while
    /// the terms stream past (term by term, the sums went through memory once per term).
    pub(crate) fn mul_plain_sum_extended(
        &self,
        acc: &mut Extended,
        terms: &[(&Extended, &dyn PlainRows)],
        scale: f64,
    ) -> Result<(), CkksError> {
        let n = self.ctx.n();
        let ext = self.ctx.extended_indices(acc.level);
        for (x, p) in terms {
            if acc.level != x.level || !p.has_rows(ext.len(), n) {
                return Err(CkksError::InvalidParams(format!(
                    "an extended product at level {} into level {}, or a plaintext of other rows",
                    x.level, acc.level
                )));
            }
            super::check_scales(acc.scale, x.scale * scale)?;
            check_key(acc.key, x.key, "an extended product sum")?;
        }
        let ctx = &self.ctx;
        self.install(|| {
            ring::each_row_pair(&mut acc.c0, &mut acc.c1, n, &ext, |a0, a1, r, i| {
                let ntt = ctx.ntt(i);
                let rows = r * n..(r + 1) * n;
                let mut scratch = Vec::new();
                for (x, p) in terms {
                    let p = match p.row(ctx, r, i, &mut scratch) {
                        Some(p) => p,
                        None => &scratch,
                    };
                    ntt.mul_acc(a0, &x.c0[rows.clone()], p);
                    ntt.mul_acc(a1, &x.c1[rows.clone()], p);
                }
            });
        });
        Ok(())
    }

    /// Rotations of `x` (over `Q_l·P`) by each of `steps` (none by 0), sharing one ModDown
    /// and one ModUp of its `c1`; `c0` is permuted as it is. One step takes the fused
    /// switch, which stores no raised digit.
    pub(crate) fn rotations_of_extended(
        &self,
        x: &Extended,
        steps: &[i64],
    ) -> Result<Vec<Extended>, CkksError> {
        self.rotations_of_parts(x, x.c1.clone(), steps)
    }

    /// [`Evaluator::rotations_of_extended`] with `x`'s `c1` handed over to be consumed (by
    /// ModDown, in place).
    fn rotations_of_parts(
        &self,
        x: &Extended,
        c1: Vec<u64>,
        steps: &[i64],
    ) -> Result<Vec<Extended>, CkksError> {
        let level = x.level;
        let keys = self.rotation_keys(steps, level, x.key)?;
        if keys.iter().any(Option::is_none) {
            return Err(CkksError::InvalidParams(
                "a rotation by 0 of an extended sum".into(),
            ));
        }
        let ctx = &self.ctx;
        let ext = ctx.extended_indices(level);
        Ok(self.install(|| {
            let c1 = keyswitch::mod_down(ctx, c1, level);
            self.switched_rotations(&c1, level, &keys)
                .into_iter()
                .flatten()
                .map(|(mut k0, k1, perm)| {
                    ring::add_assign(ctx, &mut k0, &ring::permute(ctx, &x.c0, perm), &ext);
                    Extended {
                        c0: k0,
                        c1: k1,
                        ..*x
                    }
                })
                .collect()
        }))
    }

    /// `total += rot(block, step)`, both over `Q_l·P` (`total` starts as `None`).
    pub(crate) fn add_rotated_extended(
        &self,
        total: &mut Option<Extended>,
        mut block: Extended,
        step: i64,
    ) -> Result<(), CkksError> {
        if let Some(t) = total {
            if t.level != block.level {
                return Err(CkksError::InvalidParams(format!(
                    "extended sums at levels {} and {}",
                    t.level, block.level
                )));
            }
            super::check_scales(t.scale, block.scale)?;
            check_key(t.key, block.key, "an extended sum")?;
        }
        let rotated = if self.ctx.rotation_element(step) == 1 {
            block
        } else {
            let c1 = std::mem::take(&mut block.c1);
            self.rotations_of_parts(&block, c1, &[step])?
                .pop()
                .ok_or_else(|| CkksError::InvalidParams("no rotation made".into()))?
        };
        match total {
            None => *total = Some(rotated),
            Some(t) => {
                let ext = self.ctx.extended_indices(t.level);
                self.install(|| {
                    ring::add_assign(&self.ctx, &mut t.c0, &rotated.c0, &ext);
                    ring::add_assign(&self.ctx, &mut t.c1, &rotated.c1, &ext);
                })
            }
        }
        Ok(())
    }

    /// The ciphertext `x` stands for: both components divided by `P` (one ModDown).
    pub(crate) fn mod_down_extended(&self, x: Extended) -> Ciphertext {
        let ctx = &self.ctx;
        let level = x.level;
        let (c0, c1) = self.install(|| {
            ring::join(
                || keyswitch::mod_down(ctx, x.c0, level),
                || keyswitch::mod_down(ctx, x.c1, level),
            )
        });
        Ciphertext {
            c0,
            c1,
            level,
            scale: x.scale,
            params: x.params,
            key: x.key,
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    use super::*;
    use crate::eval::encode::{encode_at, integer_rows};
    use crate::eval::{EvalContext, SecretKey};
    use crate::params::CkksParamsBuilder;

    fn rot(v: &[f64], k: i64) -> Vec<f64> {
        let s = v.len() as i64;
        (0..s).map(|j| v[(j + k).rem_euclid(s) as usize]).collect()
    }

    #[test]
    fn extended_rotations_and_their_sums_equal_plain_rotations() {
        let params = CkksParamsBuilder::leveled(1 << 12, 60, 50, 3, &[60, 60])
            .insecure_for_testing(true)
            .build()
            .unwrap();
        let ctx = EvalContext::new(&params).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let sk = SecretKey::generate(&ctx, &mut rng);
        let steps = [1, -3, 5, 8];
        let ev = Evaluator::new(&ctx, None, sk.galois_keys(&steps, false, &mut rng));
        let v: Vec<f64> = (0..ctx.slots()).map(|i| (i as f64 * 0.37).sin()).collect();
        let level = ctx.max_level();
        let ct = sk
            .encrypt(
                &encode_at(&ctx, &v, level, ctx.level_scale(level)).unwrap(),
                &mut rng,
            )
            .unwrap();
        let worst = |got: &Ciphertext, want: &[f64]| {
            let got = sk.decrypt_values(got).unwrap();
            got.iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max)
        };

        // Each hoisted rotation, brought down by P, is the rotation.
        let mut ext = ev.rotations_extended(&ct, &[0, 1, -3, 5]).unwrap();
        for (x, k) in ext.iter().zip([0, 1, -3, 5]) {
            let down = ev.mod_down_extended(Extended {
                c0: x.c0.clone(),
                c1: x.c1.clone(),
                ..*x
            });
            assert_eq!(down.level(), level);
            assert!(worst(&down, &rot(&v, k)) < 1e-7, "rotation by {k}");
        }

        // Σ_g rot(block_g, G_g) with a plaintext product in one block: rot(2·rot(v, 1), 8) +
        // rot(v, −3) + rot(rot(v, 5), 0).
        let ext_idx = ctx.extended_indices(level);
        let mut two = vec![0i64; ctx.n()];
        two[0] = 2;
        let rows = integer_rows(&ctx, &two, &ext_idx);
        let mut block = ev.zero_extended(ct.key_id(), level, ct.scale());
        ev.mul_plain_sum_extended(&mut block, &[(&ext[1], &rows)], 1.0)
            .unwrap();
        let mut total = None;
        ev.add_rotated_extended(&mut total, block, 8).unwrap();
        ev.add_rotated_extended(&mut total, ext.remove(0), -3)
            .unwrap();
        ev.add_rotated_extended(&mut total, ext.remove(2), 0)
            .unwrap();
        let sum = ev.mod_down_extended(total.unwrap());
        let want: Vec<f64> = (0..v.len())
            .map(|j| 2.0 * rot(&v, 9)[j] + rot(&v, -3)[j] + rot(&v, 5)[j])
            .collect();
        assert!(worst(&sum, &want) < 1e-6);

        // Mismatched operands are errors, not wrong sums.
        let mut acc = ev.zero_extended(ct.key_id(), level, ct.scale());
        assert!(
            ev.mul_plain_sum_extended(&mut acc, &[(&ext[0], &rows[..ctx.n()].to_vec())], 1.0)
                .is_err()
        );
        assert!(
            ev.mul_plain_sum_extended(&mut acc, &[(&ext[0], &rows)], 2.0)
                .is_err()
        );
        let mut lower = Some(ev.zero_extended(ct.key_id(), level - 1, ct.scale()));
        assert!(
            ev.add_rotated_extended(&mut lower, ext.remove(0), 1)
                .is_err()
        );
        let mut none = None;
        let missing = ev.rotations_extended(&ct, &[2]);
        assert!(missing.is_err());
        assert!(
            ev.add_rotated_extended(&mut none, ev.zero_extended(ct.key_id(), level, 1.0), 2)
                .is_err()
        );
    }
}
