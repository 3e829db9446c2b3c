//! How the devices' scalars `Δf_i` become the server's `M_k`: one implementation per
//! aggregation mode, all behind [`ScalarAggregation`].

use std::sync::Arc;

use num_bigint::BigInt;
use privopt_channel::dyadic::{Dyadic, ExactRing};
use privopt_channel::fading::{Fading, awgn, round_gains};
use privopt_channel::ota::{superpose_exact, superpose_modular};
use privopt_ckks::CkksParams;
use privopt_ckks::multiparty::{CommonPoly, encrypt_with_key};
use privopt_math::SeedTree;
use privopt_math::rns::{Eval, Poly};
use privopt_protocols::eezofl::{
    DigitalDevice, DigitalServer, ExactDevice, ExactSetup, KeyRelay, ServerRound, ShareUpload,
    SumBroadcast, Upload, encode_scalar, key_share_from_bytes, key_share_to_bytes,
};
use rand::seq::SliceRandom;
use rand_distr::{Distribution, StandardNormal};

use crate::error::{Result, SimError};

/// What one round of aggregation produced.
#[derive(Clone, Debug, Default)]
pub struct RoundOutput {
    /// `M_k`, the value every device multiplies `Φ_k` by.
    pub value: f64,
    /// What an ideal noiseless aggregation of the same encoded messages and gains would give.
    pub ideal: f64,
    /// Per-coefficient variance of the decoded HE noise `ε̂/Λ`, when audited.
    pub noise_var: Option<f64>,
    /// The largest `|ε̂_j/Λ|` over the n coefficients, when audited (a modulus q with
    /// `q/(2Λ)` above it decrypts this round's noise without wrapping).
    pub noise_max_abs: Option<f64>,
}

/// One aggregation mode.
pub trait ScalarAggregation {
    /// Aggregates the devices' `deltas` in round `k`. `audit` asks for the noise variance.
    fn round(&mut self, k: u64, deltas: &[f64], audit: bool) -> Result<RoundOutput>;
    /// Uplink bits per device per round.
    fn uplink_bits(&self) -> u64;
}

/// Gains of all devices in round `k` (a fresh fading block per round).
pub fn gains(laws: &[Fading], seeds: &SeedTree, k: u64) -> Vec<f64> {
    round_gains(laws, &mut seeds.stream("eezofl/channel", &[k]))
}

/// Records every round's messages and output around another aggregation (for audits of
/// what colluding parties learn).
pub struct Recorded<'a> {
    /// The aggregation that runs.
    pub inner: &'a mut dyn ScalarAggregation,
    /// `(round, the devices' Δf_i, the output)` per round.
    pub rounds: Vec<(u64, Vec<f64>, RoundOutput)>,
}

impl ScalarAggregation for Recorded<'_> {
    fn round(&mut self, k: u64, deltas: &[f64], audit: bool) -> Result<RoundOutput> {
        let out = self.inner.round(k, deltas, audit)?;
        self.rounds.push((k, deltas.to_vec(), out.clone()));
        Ok(out)
    }
    fn uplink_bits(&self) -> u64 {
        self.inner.uplink_bits()
    }
}

/// (a) Non-encrypted over-the-air ZO, eq. (4): `Y = Σ Δf_i h_i / μ_i + n_k`.
pub struct PlainOta {
    /// Channel law per device.
    pub laws: Vec<Fading>,
    /// σ_n.
    pub noise_sigma: f64,
    /// Seed tree of the run.
    pub seeds: SeedTree,
}

impl ScalarAggregation for PlainOta {
    fn round(&mut self, k: u64, deltas: &[f64], _audit: bool) -> Result<RoundOutput> {
        let h = gains(&self.laws, &self.seeds, k);
        let ideal: f64 = deltas
            .iter()
            .zip(&h)
            .zip(&self.laws)
            .map(|((d, h), f)| d * h / f.mean())
            .sum();
        let z: f64 = StandardNormal.sample(&mut self.seeds.stream("eezofl/awgn", &[k]));
        Ok(RoundOutput {
            value: ideal + self.noise_sigma * z,
            ideal,
            noise_var: None,
            noise_max_abs: None,
        })
    }
    fn uplink_bits(&self) -> u64 {
        64
    }
}

/// `round(Λ·x)`, refusing messages that do not fit.
fn encode(x: f64, params: &CkksParams) -> Result<i64> {
    Ok(encode_scalar(x, params)?)
}

/// The channel-state baselines' precoders (paper Fig. 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precoder {
    /// The proposed protocol: no channel estimate, messages divided by `μ_i`.
    None,
    /// Zero forcing on a pilot estimate: `w = 1/ĥ`.
    ZeroForcing,
    /// MMSE on a pilot estimate: `w = ĥ/(ĥ² + σ_n²)`.
    Mmse,
}

/// The CSI baselines' channel estimate and transmit limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Csi {
    /// σ of the pilot estimate `ĥ = h + σ·z`.
    pub pilot_sigma: f64,
    /// Precoder weights are clamped to `±weight_cap` (a transmitter's power limit; the paper
    /// sets none, `f64::INFINITY`).
    pub weight_cap: f64,
}

impl Csi {
    /// The largest |w| the exact model must carry: the cap, or `2^30` without one (a pilot
    /// estimate within `2^−30·|h|` of zero, probability ≈ 1e-8 per device-round, is refused
    /// with an error rather than wrapped).
    fn weight_bound(&self) -> f64 {
        self.weight_cap.min(2f64.powi(30))
    }
}

/// The four-phase protocol over the exact model, or a CSI baseline with keys aggregated once.
pub struct ExactHeOta {
    setup: ExactSetup,
    devices: Vec<ExactDevice>,
    laws: Vec<Fading>,
    noise_sigma: f64,
    seeds: SeedTree,
    precoder: Precoder,
    csi: Csi,
    /// Largest |effective gain| the numerator bound allows.
    max_gain: f64,
    /// The key aggregated once at setup (CSI baselines only).
    setup_key: Option<Dyadic>,
}

/// privopt's default precoder weight cap (the paper sets none).
pub const DEFAULT_PRECODER_WEIGHT_CAP: f64 = 100.0;

impl ExactHeOta {
    /// Devices `0..laws.len()` with fresh keys; `max_gain` bounds every effective gain.
    pub fn new(
        params: Arc<CkksParams>,
        laws: Vec<Fading>,
        noise_sigma: f64,
        f_bits: u32,
        seeds: SeedTree,
        precoder: Precoder,
        csi: Csi,
    ) -> Result<Self> {
        let max_h = laws
            .iter()
            .map(|f| match *f {
                Fading::Gaussian { mu, sigma } => mu.abs() + 20.0 * sigma,
                Fading::Rician { omega, .. } => 20.0 * omega.sqrt(),
            })
            .fold(1.0, f64::max);
        let max_gain = if precoder == Precoder::None {
            max_h
        } else {
            max_h * csi.weight_bound()
        };
        let setup = ExactSetup::new(
            params,
            laws.len(),
            max_gain,
            f_bits,
            seeds.key("eezofl/crs", &[]),
        )?;
        let mut rng = seeds.stream("eezofl/keys", &[]);
        let devices = (0..laws.len() as u32)
            .map(|i| ExactDevice::generate(&setup, i, &mut rng))
            .collect();
        let mut me = Self {
            setup,
            devices,
            laws,
            noise_sigma,
            seeds,
            precoder,
            csi,
            max_gain,
            setup_key: None,
        };
        if precoder != Precoder::None {
            // Keys aggregated once, through the setup round's channel and precoders.
            let g = me.effective_gains(u64::MAX)?;
            let ids = me.ids();
            let keys: Vec<&Dyadic> = me.devices.iter().map(|d| d.key()).collect();
            let w = me.noise(u64::MAX, 0)?;
            let b0 = superpose_exact(&me.setup.ring, me.setup.grid, &g, &keys, &w)?;
            let (server, _) = ServerRound::new(&ids).receive_keys(b0, &ids)?;
            me.setup_key = Some(server.key().clone());
        }
        Ok(me)
    }

    /// The exact setup (for audits).
    pub fn setup(&self) -> &ExactSetup {
        &self.setup
    }

    /// The devices (for audits).
    pub fn devices(&self) -> &[ExactDevice] {
        &self.devices
    }

    fn ids(&self) -> Vec<u32> {
        self.devices.iter().map(|d| d.id()).collect()
    }

    /// Grid integers of the effective gains `h_i·w_i` of round `k`.
    fn effective_gains(&self, k: u64) -> Result<Vec<i64>> {
        let h = gains(&self.laws, &self.seeds, k);
        let mut pilot = self.seeds.stream("eezofl/pilot", &[k]);
        let g: Vec<f64> = h
            .iter()
            .map(|&h| {
                let z: f64 = StandardNormal.sample(&mut pilot);
                let est = h + self.csi.pilot_sigma * z;
                let w = match self.precoder {
                    Precoder::None => 1.0,
                    Precoder::ZeroForcing => 1.0 / est,
                    Precoder::Mmse => est / (est * est + self.noise_sigma * self.noise_sigma),
                };
                h * w.clamp(-self.csi.weight_cap, self.csi.weight_cap)
            })
            .collect();
        if let Some(bad) = g.iter().find(|x| x.abs() > self.max_gain) {
            return Err(SimError::OutOfBounds {
                what: "precoded channel gain",
                value: *bad,
                bound: self.max_gain,
            });
        }
        self.setup.grid.quantize_all(&g).map_err(SimError::from)
    }

    /// Channel noise of transmission `phase` in round `k`, on the grid, one value per coefficient.
    fn noise(&self, k: u64, phase: u64) -> Result<Vec<i64>> {
        let mut rng = self.seeds.stream("eezofl/awgn", &[k, phase]);
        let w = awgn(self.setup.params.n(), self.noise_sigma, &mut rng)?;
        self.setup.grid.quantize_all(&w).map_err(SimError::from)
    }

    /// Phase 1's superposition `b̃_k = Σ g_i b_i + w` as the server receives it, for the
    /// effective gains `g` (grid integers) of round `k`.
    fn received_key(&self, k: u64, g: &[i64]) -> Result<Dyadic> {
        let keys: Vec<&Dyadic> = self.devices.iter().map(|d| d.key()).collect();
        let (ring, grid) = (&self.setup.ring, self.setup.grid);
        Ok(superpose_exact(ring, grid, g, &keys, &self.noise(k, 1)?)?)
    }

    /// What the server receives in phase 1 of round `k` (for the channel-layer audit).
    pub fn phase1_observation(&self, k: u64) -> Result<Dyadic> {
        self.received_key(k, &self.effective_gains(k)?)
    }

    /// Runs one round; `skip_share` drops one device's decryption share (for tests).
    pub fn run_round(
        &self,
        k: u64,
        messages: &[i64],
        skip_share: Option<u32>,
        audit: bool,
    ) -> Result<RoundOutput> {
        let (ring, grid) = (&self.setup.ring, self.setup.grid);
        let g = self.effective_gains(k)?;
        let ids = self.ids();
        let mut crypto = self.seeds.stream("eezofl/crypto", &[k]);
        let server = match &self.setup_key {
            Some(b0) => ServerRound::with_setup_key(&ids, b0.clone()),
            None => {
                ServerRound::new(&ids)
                    .receive_keys(self.received_key(k, &g)?, &ids)?
                    .0
            }
        };
        let b_tilde = server.key().clone();
        let cts: Vec<(Dyadic, Dyadic)> = self
            .devices
            .iter()
            .zip(messages)
            .map(|(d, &m)| d.encrypt(&self.setup, &b_tilde, m, &mut crypto))
            .collect();
        let c0s: Vec<&Dyadic> = cts.iter().map(|c| &c.0).collect();
        let c1s: Vec<&Dyadic> = cts.iter().map(|c| &c.1).collect();
        let c0 = superpose_exact(ring, grid, &g, &c0s, &self.noise(k, 2)?)?;
        let c1 = superpose_exact(ring, grid, &g, &c1s, &self.noise(k, 3)?)?;
        let (server, c1_tilde) = server.receive_ciphertexts(c0, c1, &ids)?;
        let mut senders = Vec::new();
        let mut gains_sent = Vec::new();
        let mut shares = Vec::new();
        for (d, &gi) in self.devices.iter().zip(&g) {
            if Some(d.id()) == skip_share {
                continue;
            }
            shares.push(d.decryption_share(&self.setup, &c1_tilde, &mut crypto)?);
            senders.push(d.id());
            gains_sent.push(gi);
        }
        let share_refs: Vec<&Dyadic> = shares.iter().collect();
        let d_tilde = superpose_exact(ring, grid, &gains_sent, &share_refs, &self.noise(k, 4)?)?;
        let rec = server.recover(&self.setup, &d_tilde, &senders)?;
        // The exact channel-weighted message Σ g_i m_i (numerator at the grid scale).
        let ideal_num: BigInt = g
            .iter()
            .zip(messages)
            .map(|(&gi, &m)| BigInt::from(gi) * BigInt::from(m))
            .sum();
        let scale = self.setup.params.scale();
        let ideal = ExactRing::to_f64(&ideal_num, grid.bits()) / scale;
        let (noise_var, noise_max_abs) = if audit {
            let mut nums = ring.numerators(&rec.m_hat)?;
            // M̂ has exponent 2F; the message sits in coefficient 0 at exponent F.
            nums[0] -= ideal_num << (rec.m_hat.exp - grid.bits());
            let n = nums.len() as f64;
            let decoded: Vec<f64> = nums
                .iter()
                .map(|v| ExactRing::to_f64(v, rec.m_hat.exp) / scale)
                .collect();
            (
                Some(decoded.iter().map(|x| x * x).sum::<f64>() / n),
                Some(decoded.iter().fold(0.0, |m: f64, x| m.max(x.abs()))),
            )
        } else {
            (None, None)
        };
        Ok(RoundOutput {
            value: rec.value,
            ideal,
            noise_var,
            noise_max_abs,
        })
    }

    fn message_divisor(&self, i: usize) -> f64 {
        match self.precoder {
            Precoder::None => self.laws[i].mean(),
            _ => 1.0,
        }
    }
}

impl ScalarAggregation for ExactHeOta {
    fn round(&mut self, k: u64, deltas: &[f64], audit: bool) -> Result<RoundOutput> {
        let messages = deltas
            .iter()
            .enumerate()
            .map(|(i, d)| encode(d / self.message_divisor(i), &self.setup.params))
            .collect::<Result<Vec<_>>>()?;
        self.run_round(k, &messages, None, audit)
    }
    fn uplink_bits(&self) -> u64 {
        // b_i, c0, c1 and D_i: four ring elements of n coefficients of ⌈log2 q⌉ bits.
        4 * self.setup.params.n() as u64 * self.setup.params.basis().log_modulus().ceil() as u64
    }
}

/// The protocol in the *modular* model: devices send residues mod q, the server rounds the
/// real superposition and reduces it mod q (§IV-E read literally). Used for the audit.
pub struct ModularHeOta {
    exact: ExactHeOta,
    b: Vec<Poly<Eval>>,
}

impl ModularHeOta {
    /// The same devices and keys as `exact`, reduced mod q.
    pub fn new(exact: ExactHeOta) -> Self {
        let b = exact
            .devices
            .iter()
            .map(|d| d.modular_key(&exact.setup))
            .collect();
        Self { exact, b }
    }
}

impl ScalarAggregation for ModularHeOta {
    fn round(&mut self, k: u64, deltas: &[f64], _audit: bool) -> Result<RoundOutput> {
        let ex = &self.exact;
        let params = &ex.setup.params;
        let basis = params.basis();
        let (ring, grid) = (&ex.setup.ring, ex.setup.grid);
        let g = ex.effective_gains(k)?;
        let messages = deltas
            .iter()
            .enumerate()
            .map(|(i, d)| encode(d / ex.message_divisor(i), params))
            .collect::<Result<Vec<_>>>()?;
        let send = |xs: Vec<&Poly<Eval>>, phase: u64| -> Result<Poly<Eval>> {
            superpose_modular(basis, ring, grid, &g, &xs, &ex.noise(k, phase)?)
                .map_err(SimError::from)
        };
        let mut crypto = ex.seeds.stream("eezofl/crypto", &[k]);
        let b_tilde = send(self.b.iter().collect(), 1)?;
        let cts: Vec<(Poly<Eval>, Poly<Eval>)> = messages
            .iter()
            .map(|&m| {
                let mut coeffs = vec![0i64; params.n()];
                coeffs[0] = m;
                encrypt_with_key(params, &b_tilde, &ex.setup.a_mod_q, &coeffs, &mut crypto)
                    .map_err(SimError::from)
            })
            .collect::<Result<Vec<_>>>()?;
        let c0 = send(cts.iter().map(|c| &c.0).collect(), 2)?;
        let c1 = send(cts.iter().map(|c| &c.1).collect(), 3)?;
        let shares = ex
            .devices
            .iter()
            .map(|d| Ok(d.modular_decryption_share(&ex.setup, &c1, &mut crypto)?))
            .collect::<Result<Vec<_>>>()?;
        let d_tilde = send(shares.iter().collect(), 4)?;
        let mut m_hat = c0;
        basis.add_assign(&mut m_hat, &d_tilde);
        let num = basis.lift_centered_residues(&basis.constant_coefficient(&m_hat));
        let ideal: f64 = g
            .iter()
            .zip(&messages)
            .map(|(&gi, &m)| grid.value(gi) * m as f64)
            .sum::<f64>()
            / params.scale();
        Ok(RoundOutput {
            value: ExactRing::to_f64(&num, 0) / params.scale(),
            ideal,
            noise_var: None,
            noise_max_abs: None,
        })
    }
    fn uplink_bits(&self) -> u64 {
        self.exact.uplink_bits()
    }
}

/// (c) Digital xMK-CKKS aggregation of the same one-scalar payload, no channel: what a real
/// deployment would use (mod q, over a network). With `through_bytes`, every message crosses
/// as its encoding. On a threshold key (`t` of the devices decrypt), `dropouts` devices
/// chosen afresh each round go silent once their ciphertext is in, and the round finishes
/// with `t` of the rest.
pub struct DigitalHe {
    params: Arc<CkksParams>,
    devices: Vec<DigitalDevice>,
    server: DigitalServer,
    seeds: SeedTree,
    through_bytes: bool,
    dropouts: usize,
}

/// The key of a [`DigitalHe`]: every device decrypts (the paper's xMK-CKKS), or any `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigitalKey {
    /// N of N.
    Everyone,
    /// `threshold` of N, with `dropouts` devices silent after uploading each round.
    Threshold {
        /// Devices that decrypt.
        threshold: usize,
        /// Devices gone each round once their ciphertext is in.
        dropouts: usize,
    },
}

impl DigitalHe {
    /// `devices` devices with keys aggregated at setup, re-shared for a threshold `key` (with
    /// the dealing check) when asked.
    pub fn new(
        params: Arc<CkksParams>,
        devices: u32,
        seeds: SeedTree,
        through_bytes: bool,
        key: DigitalKey,
    ) -> Result<Self> {
        let crs = CommonPoly::from_seed(&params, seeds.key("eezofl/crs", &[]));
        let mut rng = seeds.stream("eezofl/keys", &[]);
        let mut parties: Vec<DigitalDevice> = (0..devices)
            .map(|i| DigitalDevice::generate(i, &params, &crs, &mut rng))
            .collect();
        let ids: Vec<u32> = (0..devices).collect();
        let mut shares: Vec<_> = parties.iter().map(DigitalDevice::key_share).collect();
        if through_bytes {
            shares = shares
                .iter()
                .map(|s| {
                    Ok(key_share_from_bytes(
                        &params,
                        &key_share_to_bytes(s, &params),
                    )?)
                })
                .collect::<Result<_>>()?;
        }
        let (server, mut relay) = DigitalServer::setup(&params, &crs, &ids, shares)?;
        if through_bytes {
            relay = KeyRelay::from_bytes(&params, &relay.to_bytes(&params))?;
        }
        for p in &mut parties {
            p.set_key(&crs, &relay)?;
        }
        let mut he = Self {
            params,
            devices: parties,
            server,
            seeds,
            through_bytes,
            dropouts: 0,
        };
        if let DigitalKey::Threshold {
            threshold,
            dropouts,
        } = key
        {
            he.reshare(&crs, threshold, &mut rng)?;
            he.dropouts = dropouts;
        }
        Ok(he)
    }

    /// The threshold setup (sealing keys, sealed shares, the dealing check), then the server
    /// switches to `threshold` of the devices.
    fn reshare(
        &mut self,
        crs: &CommonPoly,
        threshold: usize,
        rng: &mut privopt_math::StreamRng,
    ) -> Result<()> {
        let session = 1;
        let keys = self
            .devices
            .iter_mut()
            .map(|d| d.start_threshold(threshold, session, rng))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut sealed = Vec::new();
        for d in &mut self.devices {
            sealed.extend(d.deal_threshold(&keys, rng)?);
        }
        for d in &mut self.devices {
            let id = d.id();
            let mine: Vec<_> = sealed.iter().filter(|s| s.to == id).cloned().collect();
            d.finish_threshold(&mine)?;
        }
        let ids: Vec<u32> = self.devices.iter().map(DigitalDevice::id).collect();
        // Seeded for reproducible runs: the simulated dealers are honest. A deployment draws
        // the seed fresh once every dealing is in (as the Flower method does).
        let check = self.server.dealing_check(
            threshold,
            session,
            self.seeds.key("eezofl/dealing-check", &[]),
            &ids,
        )?;
        let answers = self
            .devices
            .iter_mut()
            .map(|d| d.answer_dealing_check(&check, crs, rng))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let failed = self
            .server
            .failed_dealers(threshold, crs, &check, &answers)?;
        if !failed.is_empty() {
            return Err(SimError::Config(format!(
                "devices {failed:?} failed the dealing check"
            )));
        }
        self.server.use_threshold(threshold)?;
        Ok(())
    }
}

impl ScalarAggregation for DigitalHe {
    fn round(&mut self, k: u64, deltas: &[f64], _audit: bool) -> Result<RoundOutput> {
        let mut rng = self.seeds.stream("eezofl/crypto", &[k]);
        let params = &self.params;
        let messages = deltas
            .iter()
            .map(|&d| encode(d, params))
            .collect::<Result<Vec<_>>>()?;
        let mut uploads = Vec::with_capacity(self.devices.len());
        for (d, &m) in self.devices.iter_mut().zip(&messages) {
            let up = d.encrypt(k, m, &mut rng)?;
            uploads.push(if self.through_bytes {
                Upload::from_bytes(params, &up.to_bytes())?
            } else {
                up
            });
        }
        let mut sum = self.server.sum(&uploads)?;
        if self.through_bytes {
            sum = SumBroadcast::from_bytes(params, &sum.to_bytes())?;
        }
        // Threshold key: `dropouts` devices are gone once their ciphertext is in; the server
        // asks `t` of the rest.
        let active = match self.server.threshold() {
            None => None,
            Some(_) => {
                let mut ids: Vec<u32> = self.devices.iter().map(DigitalDevice::id).collect();
                let mut pick = self.seeds.stream("eezofl/dropouts", &[k]);
                ids.shuffle(&mut pick);
                let mut present = ids[self.dropouts.min(ids.len())..].to_vec();
                present.sort_unstable();
                Some(self.server.active_set(&present)?)
            }
        };
        let shares = self
            .devices
            .iter_mut()
            .filter(|d| {
                active
                    .as_ref()
                    .is_none_or(|a| a.members().contains(&d.id()))
            })
            .map(|d| {
                let s = match &active {
                    None => d.decryption_share(&sum, &mut rng)?,
                    Some(a) => d.threshold_share(&sum, a, &mut rng)?,
                };
                if self.through_bytes {
                    Ok(ShareUpload::from_bytes(params, &s.to_bytes(params))?)
                } else {
                    Ok(s)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let value = self.server.fuse(&shares)?;
        Ok(RoundOutput {
            value,
            ideal: messages.iter().map(|&m| m as f64).sum::<f64>() / params.scale(),
            noise_var: None,
            noise_max_abs: None,
        })
    }
    fn uplink_bits(&self) -> u64 {
        // c0, c1 and the decryption share (keys once at setup).
        3 * self.params.n() as u64 * self.params.basis().log_modulus().ceil() as u64
    }
}
