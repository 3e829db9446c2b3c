//! The EEZOFL paper's convergence results checked against a configuration: the step-size conditions
//! of Assumption 3.3 and Theorem 1 for `η_k = η₀(1+k)^{−υ₁}`, `γ_k = γ₀(1+k)^{−υ₂}`, and
//! Theorem 2's constants `R`, `ρ` and iteration count `K = R²/(εβ − ρ)²`.
//!
//! A series `Σ (1+k)^{−e}` converges iff `e > 1`, so each condition is a test on exponents.

use serde::Serialize;

use super::audit::noise_floor;

/// The step-size conditions for the decay exponents `υ₁` (η) and `υ₂` (γ).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepConditions {
    /// `Σ η_k γ_k = ∞`: `υ₁ + υ₂ ≤ 1`.
    pub sum_eta_gamma_diverges: bool,
    /// `Σ η_k γ_k³ < ∞`: `υ₁ + 3υ₂ > 1`.
    pub sum_eta_gamma3_converges: bool,
    /// `Σ η_k² γ_k² < ∞`: `2υ₁ + 2υ₂ > 1`.
    pub sum_eta2_gamma2_converges: bool,
    /// Theorem 1's extra `Σ η_k² < ∞`: `2υ₁ > 1`.
    pub sum_eta2_converges: bool,
    /// All three of Assumption 3.3.
    pub assumption_3_3_holds: bool,
    /// Assumption 3.3 and `Σ η² < ∞`: Theorem 1 applies.
    pub theorem_1_holds: bool,
}

/// Checks the conditions for decay exponents `eta_decay` (υ₁) and `gamma_decay` (υ₂).
pub fn step_conditions(eta_decay: f64, gamma_decay: f64) -> StepConditions {
    let (u1, u2) = (eta_decay, gamma_decay);
    let sum_eta_gamma_diverges = u1 + u2 <= 1.0;
    let sum_eta_gamma3_converges = u1 + 3.0 * u2 > 1.0;
    let sum_eta2_gamma2_converges = 2.0 * (u1 + u2) > 1.0;
    let sum_eta2_converges = 2.0 * u1 > 1.0;
    let assumption_3_3_holds =
        sum_eta_gamma_diverges && sum_eta_gamma3_converges && sum_eta2_gamma2_converges;
    StepConditions {
        sum_eta_gamma_diverges,
        sum_eta_gamma3_converges,
        sum_eta2_gamma2_converges,
        sum_eta2_converges,
        assumption_3_3_holds,
        theorem_1_holds: assumption_3_3_holds && sum_eta2_converges,
    }
}

/// The problem's constants in the paper's notation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Constants {
    /// Smoothness `L` of `F = Σ_i F_i` (Assumption 3.1).
    pub smoothness: f64,
    /// Lipschitz constant of each `f_i(·, ξ)` (Assumption 3.2; the paper writes `L` for both).
    pub lipschitz: f64,
    /// Hessian bound `b` of each `F_i` (Assumption 3.1).
    pub hessian_bound: f64,
    /// `E[Φ²] = b₁`.
    pub b1: f64,
    /// `‖Φ‖² ≤ b₂²`.
    pub b2_sq: f64,
    /// Devices N.
    pub devices: f64,
    /// `Σ_i Ω_i/μ_i²` over the devices' channels.
    pub sum_omega_over_mu2: f64,
    /// An upper bound on `Δ̂ = F(θ₀) − F(θ*)`.
    pub delta_hat: f64,
    /// Per-coefficient decoded noise variance `σ̄_ε²`.
    pub decoded_var: f64,
}

/// Theorem 2 for a configuration's `η₀`, `γ₀`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Theorem2 {
    /// `c₁ = 2b₁`.
    pub c1: f64,
    /// `c₃ = b·b₂³·N/(2b₁)`.
    pub c3: f64,
    /// `C̃′_γ = 4L²b₂⁴(Σ Ω_i/μ_i² + N(N−1))`, `L` the Lipschitz constant.
    pub c_gamma: f64,
    /// `R = 2Δ̂/(c₁η₀γ₀) + c₃²γ₀² + C̃′_γ·L·η₀γ₀/c₁`, `L` the smoothness.
    pub r: f64,
    /// The noise floor ρ, eq. (21).
    pub rho: f64,
    /// `R/√K + ρ` at the run's K.
    pub bound_at_rounds: f64,
    /// `(ε, K)`: the iterations after which `min ‖∇F‖² < ε` with probability ≥ 1 − β.
    pub iterations_for: Vec<(f64, f64)>,
    /// The β of `iterations_for`.
    pub beta: f64,
}

/// Theorem 2's constants and iteration counts for the targets `epsilons` at confidence
/// `1 − beta`, after `rounds` iterations.
pub fn theorem2(
    c: &Constants,
    eta0: f64,
    gamma0: f64,
    rounds: u64,
    epsilons: &[f64],
    beta: f64,
) -> Theorem2 {
    let c1 = 2.0 * c.b1;
    let b2 = c.b2_sq.sqrt();
    let c3 = c.hessian_bound * b2.powi(3) * c.devices / (2.0 * c.b1);
    let c_gamma = 4.0
        * c.lipschitz.powi(2)
        * c.b2_sq.powi(2)
        * (c.sum_omega_over_mu2 + c.devices * (c.devices - 1.0));
    let r = 2.0 * c.delta_hat / (c1 * eta0 * gamma0)
        + c3 * c3 * gamma0 * gamma0
        + c_gamma * c.smoothness * eta0 * gamma0 / c1;
    let rho = noise_floor(c.smoothness, c.b1, c.b2_sq, c.decoded_var, eta0, gamma0);
    let iterations_for = epsilons
        .iter()
        .map(|&eps| {
            let margin = eps * beta - rho;
            let k = if margin > 0.0 {
                (r / margin).powi(2)
            } else {
                f64::INFINITY
            };
            (eps, k)
        })
        .collect();
    Theorem2 {
        c1,
        c3,
        c_gamma,
        r,
        rho,
        bound_at_rounds: r / (rounds.max(1) as f64).sqrt() + rho,
        iterations_for,
        beta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_schedule_meets_assumption_3_3_but_not_theorem_1() {
        let paper = step_conditions(0.5, 0.25);
        assert!(paper.assumption_3_3_holds);
        assert!(!paper.sum_eta2_converges && !paper.theorem_1_holds);
        // υ₁ = 0.75 meets both (Σηγ diverges at the boundary υ₁ + υ₂ = 1).
        let fixed = step_conditions(0.75, 0.25);
        assert!(fixed.theorem_1_holds);
        // Too fast a decay of both loses Σ ηγ = ∞.
        assert!(!step_conditions(0.75, 0.5).sum_eta_gamma_diverges);
    }

    #[test]
    fn theorem_2_constants_follow_their_formulas() {
        let c = Constants {
            smoothness: 2.0,
            lipschitz: 3.0,
            hessian_bound: 0.5,
            b1: 1.0,
            b2_sq: 4.0,
            devices: 2.0,
            sum_omega_over_mu2: 4.0,
            delta_hat: 1.0,
            decoded_var: 0.0,
        };
        let t = theorem2(&c, 0.1, 0.2, 100, &[1.0], 0.5);
        assert_eq!(t.c1, 2.0);
        assert_eq!(t.c3, 0.5 * 8.0 * 2.0 / 2.0);
        assert_eq!(t.c_gamma, 4.0 * 9.0 * 16.0 * (4.0 + 2.0));
        let r = 2.0 / (2.0 * 0.02) + 16.0 * 0.04 + t.c_gamma * 2.0 * 0.02 / 2.0;
        assert!((t.r - r).abs() < 1e-9 * r);
        assert_eq!(t.rho, 0.0);
        assert!((t.iterations_for[0].1 - (r / 0.5).powi(2)).abs() < 1e-6 * r * r);
        // A target below the floor is never reached.
        let floor = theorem2(
            &Constants {
                decoded_var: 1.0,
                ..c
            },
            0.1,
            0.2,
            100,
            &[1e-9],
            0.5,
        );
        assert!(floor.iterations_for[0].1.is_infinite());
    }
}
