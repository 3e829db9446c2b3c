//! Over-the-air superposition of ring elements: `y = Σ_i h_i x_i + w` per coefficient.

use num_bigint::BigInt;
use num_traits::{One, Zero};
use privopt_math::rns::{Eval, Poly, RnsBasis};

use crate::ChannelError;
use crate::dyadic::{Dyadic, DyadicGrid, ExactRing};

/// *Exact* model: the received element is `Σ h_i x_i + w` over `Q[X]/(X^n+1)`, with gains `h_i`
/// and noise `w` on the grid; nothing is reduced mod q. All `x_i` must share one denominator.
pub fn superpose_exact(
    ring: &ExactRing,
    grid: DyadicGrid,
    gains: &[i64],
    xs: &[&Dyadic],
    noise: &[i64],
) -> Result<Dyadic, ChannelError> {
    let exp = xs.first().map(|x| x.exp).unwrap_or(0);
    if gains.len() != xs.len() || xs.iter().any(|x| x.exp != exp) {
        return Err(ChannelError::Invalid(
            "gains and signals do not match".into(),
        ));
    }
    // Noise on the grid: w = W / 2^F; at the received scale 2^(exp+F) its numerator is W·2^exp.
    let mut acc = ring.with_exp(&ring.from_i64(noise), exp);
    acc.exp = exp + grid.bits();
    for (&g, x) in gains.iter().zip(xs) {
        let mut term = x.poly.clone();
        ring.basis().mul_scalar_assign(&mut term, g);
        ring.basis().add_assign(&mut acc.poly, &term);
    }
    Ok(acc)
}

/// *Modular* model (paper §IV-E, last paragraph, read literally): each device sends the
/// residues of its element mod q as integers in `[0, q)`; the server receives the real
/// superposition `Σ h_i x_i + w`, rounds every coefficient to an integer and reduces it mod q.
/// With non-integer gains, `Σ h_i (x_i mod q) ≢ (Σ h_i x_i) mod q`.
pub fn superpose_modular(
    q_basis: &RnsBasis,
    ring: &ExactRing,
    grid: DyadicGrid,
    gains: &[i64],
    xs: &[&Poly<Eval>],
    noise: &[i64],
) -> Result<Poly<Eval>, ChannelError> {
    let q = q_basis.modulus();
    let lifted: Vec<Dyadic> = xs
        .iter()
        .map(|x| {
            let c = q_basis.to_coeff((*x).clone());
            let coeffs: Vec<BigInt> = q_basis
                .lift_all(&c)
                .into_iter()
                .map(|v| if v < BigInt::zero() { v + q } else { v })
                .collect();
            ring.from_bigints(&coeffs)
        })
        .collect();
    let refs: Vec<&Dyadic> = lifted.iter().collect();
    let y = superpose_exact(ring, grid, gains, &refs, noise)?;
    // Round y = Y / 2^F to the nearest integer, then reduce mod q.
    let half = BigInt::one() << (grid.bits() - 1);
    let rounded: Vec<BigInt> = ring
        .numerators(&y)?
        .into_iter()
        .map(|v| ((v + &half) >> grid.bits()) % q)
        .collect();
    Ok(q_basis.to_eval(q_basis.from_bigints(&rounded)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use privopt_math::ntt::NttBackend;

    #[test]
    fn exact_superposition_is_the_weighted_sum() {
        let ring = ExactRing::new(16, 120).unwrap();
        let grid = DyadicGrid::new(40).unwrap();
        let x1 = ring.from_i64(&[5; 16]);
        let x2 = ring.from_i64(&[-3; 16]);
        let gains = [grid.quantize(0.5).unwrap(), grid.quantize(1.25).unwrap()];
        let mut noise = vec![0i64; 16];
        noise[0] = grid.quantize(0.125).unwrap();
        let y = superpose_exact(&ring, grid, &gains, &[&x1, &x2], &noise).unwrap();
        let v = ring.numerators(&y).unwrap();
        let f = |k: usize| ExactRing::to_f64(&v[k], y.exp);
        assert_eq!(f(0), 0.5 * 5.0 - 1.25 * 3.0 + 0.125);
        assert_eq!(f(3), 0.5 * 5.0 - 1.25 * 3.0);
    }

    #[test]
    fn modular_superposition_breaks_linearity_for_real_gains() {
        let qb = RnsBasis::generate(16, 40, 2, NttBackend::Fast).unwrap();
        let ring = ExactRing::new(16, 140).unwrap();
        let grid = DyadicGrid::new(40).unwrap();
        // x = −1 is q − 1 in [0, q): a gain of ½ turns it into ≈ q/2, not −½.
        let x = qb.to_eval(qb.from_signed(&[-1; 16]));
        let y = superpose_modular(
            &qb,
            &ring,
            grid,
            &[grid.quantize(0.5).unwrap()],
            &[&x],
            &[0; 16],
        )
        .unwrap();
        let v = qb.lift_centered(&qb.to_coeff(y), 0);
        assert!(v.bits() > 70, "expected a q-scale value, got {v}");
        // With an integer gain the model is linear mod q.
        let y = superpose_modular(
            &qb,
            &ring,
            grid,
            &[grid.quantize(2.0).unwrap()],
            &[&x],
            &[0; 16],
        )
        .unwrap();
        assert_eq!(qb.lift_centered(&qb.to_coeff(y), 0), BigInt::from(-2));
    }
}
