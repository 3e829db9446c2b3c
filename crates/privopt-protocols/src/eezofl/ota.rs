//! The four-phase over-the-air xMK-CKKS protocol (paper §IV, Alg. 1) in the *exact* model:
//! every ring element is an integer polynomial over `Z[X]/(X^n+1)` — partial keys
//! `b_i = −s_i·a + e_i` are **not** reduced mod q — and every over-the-air sum is computed
//! exactly on the dyadic grid, which is the model under which eq. (8) and (14) hold.
//!
//! Devices and the server are sans-IO: devices turn broadcasts into transmissions, the server
//! turns received superpositions into broadcasts, and the simulation (or a radio) moves them.
//! The server's phases are types: it cannot recover before it has keys, ciphertexts and
//! shares. It never sees a channel gain; it checks only who transmitted in each phase (the
//! access layer's schedule), so a device that skipped a phase is an error, not garbage.

use std::collections::BTreeSet;
use std::sync::Arc;

use num_bigint::BigInt;
use privopt_channel::dyadic::{Dyadic, DyadicGrid, ExactRing};
use privopt_ckks::CkksParams;
use privopt_ckks::multiparty::{CommonPoly, decryption_share, partial_public_key};
use privopt_math::rns::{Eval, Poly};
use privopt_math::sample::{signs, ternary, wide_gaussian};
use rand::CryptoRng;
use zeroize::Zeroize;

use crate::error::{Misbehavior, Peer, ProtocolError, Result, misbehaved};

/// Public setup of the exact model: parameters, the exact ring, the grid and `a` as an integer
/// polynomial (the centered lift of the CRS polynomial).
pub struct ExactSetup {
    /// CKKS parameters (n, q, Λ, σ_e, σ*).
    pub params: Arc<CkksParams>,
    /// The wide ring holding every numerator exactly.
    pub ring: ExactRing,
    /// The grid of gains and noise.
    pub grid: DyadicGrid,
    /// `a` over the integers.
    pub a: Dyadic,
    /// `a` mod q (evaluation form in the CKKS basis), for the modular model.
    pub a_mod_q: Poly<Eval>,
}

/// Bits of the largest numerator the protocol produces (the recovered `M̂` at scale `2^{2F}`),
/// from `|x·y|_∞ ≤ n |x|_∞ |y|_∞` applied phase by phase:
/// `|a| < q/2`, `|b_i| ≤ nq/2 + 32`, `|b̃|·2^F ≤ N·G·2^F·|b|`, `|c0|·2^F ≤ n·|b̃|·2^F + …`,
/// `|c̃0|·2^{2F} ≤ N·G·2^F·|c0|·2^F`, and the same for `D̃`; `G` bounds every gain. The result
/// is `log q + 2 log n + 2 log(N G) + 2F` plus 8 bits for the additive small terms.
pub fn numerator_bound_bits(
    log_q: f64,
    n: usize,
    devices: usize,
    max_gain: f64,
    f_bits: u32,
) -> u32 {
    let ng = (devices as f64 * max_gain.max(1.0)).log2();
    (log_q + 2.0 * (n as f64).log2() + 2.0 * ng + 2.0 * f64::from(f_bits) + 8.0).ceil() as u32
}

impl ExactSetup {
    /// The setup for `devices` devices whose gains never exceed `max_gain` in magnitude.
    pub fn new(
        params: Arc<CkksParams>,
        devices: usize,
        max_gain: f64,
        f_bits: u32,
        crs_seed: [u8; 32],
    ) -> Result<Self> {
        let grid = DyadicGrid::new(f_bits)
            .map_err(|e| ProtocolError::Parameters(format!("grid_bits: {e}")))?;
        let bound = numerator_bound_bits(
            params.basis().log_modulus(),
            params.n(),
            devices,
            max_gain,
            f_bits,
        );
        let ring = ExactRing::new(params.n(), bound)?;
        let crs = CommonPoly::from_seed(&params, crs_seed);
        let basis = params.basis();
        let a_coeffs = basis.lift_all(&basis.to_coeff(crs.poly().clone()));
        let a = ring.from_bigints(&a_coeffs);
        Ok(Self {
            a_mod_q: crs.poly().clone(),
            params,
            ring,
            grid,
            a,
        })
    }
}

/// One device: its secret and its un-reduced partial public key. The secret is wiped on drop
/// and never printed; only the explicitly named audit accessors expose it.
pub struct ExactDevice {
    id: u32,
    s: Dyadic,
    b: Dyadic,
    s_coeffs: Vec<i64>,
    e_coeffs: Vec<i64>,
}

impl std::fmt::Debug for ExactDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExactDevice")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Drop for ExactDevice {
    fn drop(&mut self) {
        self.s.poly.wipe();
        self.s_coeffs.zeroize();
        self.e_coeffs.zeroize();
    }
}

impl ExactDevice {
    /// `s_i ∈ {−1, 1}^n`, `b_i = −s_i·a + e_i` over the integers.
    pub fn generate(setup: &ExactSetup, id: u32, rng: &mut impl CryptoRng) -> Self {
        let n = setup.params.n();
        let s_coeffs = signs(n, rng);
        let e_coeffs = setup.params.error().sample_vec(n, rng);
        let s = setup.ring.from_i64(&s_coeffs);
        let mut b = setup.ring.mul(&s, &setup.a);
        setup.ring.basis().neg_assign(&mut b.poly);
        let b = setup.ring.add(&b, &setup.ring.from_i64(&e_coeffs));
        Self {
            id,
            s,
            b,
            s_coeffs,
            e_coeffs,
        }
    }

    /// The device's identifier.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Phase 1 transmission: `b_i`.
    pub fn key(&self) -> &Dyadic {
        &self.b
    }

    /// **Audit only:** the secret's coefficients, for the paper's key-leak audit (which checks
    /// that an un-reduced `b_i` gives the secret away). No protocol step needs them.
    pub fn audit_secret_coeffs(&self) -> &[i64] {
        &self.s_coeffs
    }

    /// **Audit only:** the key error's coefficients (see [`ExactDevice::audit_secret_coeffs`]).
    pub fn audit_error_coeffs(&self) -> &[i64] {
        &self.e_coeffs
    }

    /// The modular model (§IV-E read literally): the device's key reduced mod q,
    /// `b_i = −s_i·a + e_i mod q`.
    pub fn modular_key(&self, setup: &ExactSetup) -> Poly<Eval> {
        let mut s = self.secret_mod_q(setup);
        let key = partial_public_key(&setup.params, &s, &setup.a_mod_q, &self.e_coeffs);
        s.wipe();
        key
    }

    /// The modular model's decryption share `s_i·c1 + e*` mod q.
    pub fn modular_decryption_share(
        &self,
        setup: &ExactSetup,
        c1: &Poly<Eval>,
        rng: &mut impl CryptoRng,
    ) -> Result<Poly<Eval>> {
        let mut s = self.secret_mod_q(setup);
        let share = decryption_share(&setup.params, &s, c1, rng);
        s.wipe();
        Ok(share?)
    }

    fn secret_mod_q(&self, setup: &ExactSetup) -> Poly<Eval> {
        let basis = setup.params.basis();
        basis.to_eval(basis.from_signed(&self.s_coeffs))
    }

    /// Phase 2 transmission: `(c0, c1) = (v·b̃ + m + e0, v·a + e1)` for the integer message `m`
    /// in the constant coefficient.
    pub fn encrypt(
        &self,
        setup: &ExactSetup,
        b_tilde: &Dyadic,
        m: i64,
        rng: &mut impl CryptoRng,
    ) -> (Dyadic, Dyadic) {
        let (ring, n) = (&setup.ring, setup.params.n());
        let v = ring.from_i64(&ternary(n, rng));
        let mut e0 = setup.params.error().sample_vec(n, rng);
        e0[0] += m;
        let c0 = ring.add(&ring.mul(&v, b_tilde), &ring.from_i64(&e0));
        let c1 = ring.add(
            &ring.mul(&v, &setup.a),
            &ring.from_i64(&setup.params.error().sample_vec(n, rng)),
        );
        (c0, c1)
    }

    /// Phase 3 transmission: `D_j = s_j·c̃1 + e*_j`.
    pub fn decryption_share(
        &self,
        setup: &ExactSetup,
        c1_tilde: &Dyadic,
        rng: &mut impl CryptoRng,
    ) -> Result<Dyadic> {
        let n = setup.params.n();
        let smudge = wide_gaussian(n, 2f64.powf(setup.params.smudging_log2()), rng)?;
        Ok(setup.ring.add(
            &setup.ring.mul(&self.s, c1_tilde),
            &setup.ring.from_i128(&smudge),
        ))
    }
}

/// Server state: waiting for the key superposition.
pub struct AwaitKeys;
/// Server state: holds `b̃`, waiting for the ciphertext superpositions.
pub struct AwaitCiphertexts {
    b_tilde: Dyadic,
}
/// Server state: holds `c̃0`, waiting for the share superposition.
pub struct AwaitShares {
    c0_tilde: Dyadic,
}

/// The server of one round in phase `P`.
pub struct ServerRound<P> {
    expected: BTreeSet<u32>,
    state: P,
}

/// What phase 4 yields.
#[derive(Clone, Debug)]
pub struct Recovery {
    /// `M̂ = c̃0 + D̃` (numerators at its exponent).
    pub m_hat: Dyadic,
    /// `M_k = const. coeff of M̂ / Λ`.
    pub value: f64,
}

fn check_transmitters(expected: &BTreeSet<u32>, phase: &str, transmitted: &[u32]) -> Result<()> {
    let got: BTreeSet<u32> = transmitted.iter().copied().collect();
    if let Some(missing) = expected.difference(&got).next() {
        return Err(ProtocolError::Incomplete(format!(
            "{phase}: device {missing} did not transmit; the round cannot be decrypted"
        )));
    }
    if let Some(extra) = got.difference(expected).next() {
        return Err(misbehaved(
            Peer::Party(u64::from(*extra)),
            Misbehavior::NotParticipant,
            format!("transmitted in {phase} of a round it is not part of"),
        ));
    }
    Ok(())
}

impl ServerRound<AwaitKeys> {
    /// A round expecting transmissions from `devices`.
    pub fn new(devices: &[u32]) -> Self {
        Self {
            expected: devices.iter().copied().collect(),
            state: AwaitKeys,
        }
    }

    /// Phase 1: receives `b̃ = Σ h_i b_i + w_b` and returns the broadcast (`b̃` itself).
    pub fn receive_keys(
        self,
        b_tilde: Dyadic,
        transmitted: &[u32],
    ) -> Result<(ServerRound<AwaitCiphertexts>, Dyadic)> {
        check_transmitters(&self.expected, "phase 1 (keys)", transmitted)?;
        Ok((
            ServerRound {
                expected: self.expected,
                state: AwaitCiphertexts {
                    b_tilde: b_tilde.clone(),
                },
            },
            b_tilde,
        ))
    }
}

impl ServerRound<AwaitCiphertexts> {
    /// A round that reuses a key aggregated once at setup (the CSI baseline; the proposed
    /// protocol never does this).
    pub fn with_setup_key(devices: &[u32], b_tilde: Dyadic) -> Self {
        Self {
            expected: devices.iter().copied().collect(),
            state: AwaitCiphertexts { b_tilde },
        }
    }

    /// The key the devices encrypt under this round.
    pub fn key(&self) -> &Dyadic {
        &self.state.b_tilde
    }

    /// Phase 2: receives `(c̃0, c̃1)`; returns the broadcast `c̃1`.
    pub fn receive_ciphertexts(
        self,
        c0_tilde: Dyadic,
        c1_tilde: Dyadic,
        transmitted: &[u32],
    ) -> Result<(ServerRound<AwaitShares>, Dyadic)> {
        check_transmitters(&self.expected, "phase 2 (ciphertexts)", transmitted)?;
        Ok((
            ServerRound {
                expected: self.expected,
                state: AwaitShares { c0_tilde },
            },
            c1_tilde,
        ))
    }
}

impl ServerRound<AwaitShares> {
    /// Phase 3 and 4: receives `D̃` and recovers `M_k = (c̃0 + D̃)_0 / Λ`.
    pub fn recover(
        self,
        setup: &ExactSetup,
        d_tilde: &Dyadic,
        transmitted: &[u32],
    ) -> Result<Recovery> {
        check_transmitters(&self.expected, "phase 3 (decryption shares)", transmitted)?;
        let m_hat = setup.ring.add(&self.state.c0_tilde, d_tilde);
        let num: BigInt = setup.ring.constant_term(&m_hat)?;
        let value = ExactRing::to_f64(&num, m_hat.exp) / setup.params.scale();
        Ok(Recovery { m_hat, value })
    }
}
