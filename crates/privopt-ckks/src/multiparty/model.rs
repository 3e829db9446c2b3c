//! Whole model updates under the collective key: a vector of any length packed `n` values per
//! ciphertext into the **coefficients** (`round(x·Λ)` in coefficient `j` of chunk `j / n`).
//!
//! Coefficients, not slots: aggregation only adds, so nothing needs the slots' SIMD
//! multiplication or rotations, and coefficient packing carries `n` values per ciphertext
//! where slots carry `n/2`, with no FFT to encode or decode. A sum of `k` updates decrypts to
//! `Σ round(x_i·Λ)` plus the decryption noise, so the average is exact to `~noise/(k·Λ)`.

use std::sync::Arc;

use rand::CryptoRng;

use super::cipher::{Seeded, lift_log2, lifted_plus_error, seeded_a};
use super::party::rlwe_sample;
use super::{Ciphertext, CollectivePublicKey, Committee, Decrypted, Party};
use crate::error::CkksError;
use crate::params::CkksParams;

/// How a model of `len` values is packed, and the bound its entries are held to.
#[derive(Clone, Debug)]
pub struct ModelCodec {
    params: Arc<CkksParams>,
    len: usize,
    clip: f64,
    max_updates: u32,
    /// Uploads carry `round(x·Λ)·2^lift` ([`super::lift_log2`]): when the smudging is sized
    /// for a statistical distance (2^50 and more, [`super::model_smudging_for_distance`]), the
    /// lift keeps the precision the default smudging gives (then the lift is 0).
    lift_log2: u32,
}

impl ModelCodec {
    /// Models of `len` values with entries in `[−clip, clip]`, summed over at most
    /// `max_updates` updates: refused if such a sum could wrap modulo `Q` (`Q/2` must exceed
    /// `max_updates·clip·Λ` with a bit to spare for the noise, which is ~2^21 against
    /// Λ ≥ 2^40).
    pub fn new(
        params: &Arc<CkksParams>,
        len: usize,
        clip: f64,
        max_updates: u32,
    ) -> Result<Self, CkksError> {
        if len == 0 {
            return Err(CkksError::InvalidParams("a model of 0 values".into()));
        }
        if !(clip.is_finite() && clip > 0.0) {
            return Err(CkksError::InvalidParams(format!(
                "clip {clip}: a finite bound > 0"
            )));
        }
        if max_updates == 0 {
            return Err(CkksError::InvalidParams("max_updates 0".into()));
        }
        let lift_log2 = lift_log2(params);
        let needed = f64::from(max_updates).log2()
            + clip.log2()
            + f64::from(params.scale_log2() + lift_log2)
            + 2.0;
        if lift_log2 >= 64 {
            return Err(CkksError::InvalidParams(format!(
                "smudging 2^{:.1} at scale 2^{} needs values lifted by 2^{lift_log2}; at most \
                 2^63 (raise the scale or lower the smudging)",
                params.smudging_log2(),
                params.scale_log2()
            )));
        }
        // Encoded values are held in 128 bits.
        let room = params.basis().log_modulus().min(120.0);
        if needed > room {
            return Err(CkksError::InvalidParams(format!(
                "a sum of {max_updates} updates within ±{clip} at scale 2^{} (lifted 2^{lift_log2} \
                 over smudging 2^{:.1}) needs a modulus of 2^{needed:.1}; the parameters have \
                 2^{room:.1}",
                params.scale_log2(),
                params.smudging_log2()
            )));
        }
        Ok(Self {
            params: Arc::clone(params),
            len,
            clip,
            max_updates,
            lift_log2,
        })
    }

    /// Values per model.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the model is empty (never: [`ModelCodec::new`] refuses it).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ciphertexts per model: `⌈len / n⌉`.
    pub fn chunks(&self) -> usize {
        self.len.div_ceil(self.params.n())
    }

    /// The entries' bound.
    pub fn clip(&self) -> f64 {
        self.clip
    }

    /// `log2` of the factor uploads lift the encoded values by (0 unless the smudging is above
    /// what the scale absorbs).
    pub fn lift_log2(&self) -> u32 {
        self.lift_log2
    }

    /// `values` encrypted under `key`, chunk by chunk. Refuses (naming the first bad index) a
    /// model of another length, a non-finite entry and one outside `±clip`: a bad update never
    /// reaches a sum.
    pub fn encrypt(
        &self,
        key: &CollectivePublicKey,
        values: &[f32],
        rng: &mut impl CryptoRng,
    ) -> Result<EncryptedModel, CkksError> {
        self.encrypt_chunks(values, |_, coeffs| {
            key.encrypt_lifted(coeffs, self.lift_log2, rng)
        })
    }

    /// `values` encrypted under `party`'s own secret for `session` of `committee`'s threshold
    /// key, **half the bytes** of [`ModelCodec::encrypt`]: chunk `k` is
    /// `(−a_k·s_i + m + e, a_k)` with `a_k` expanded from the key's common polynomial, the
    /// session and `k`, so only `−a_k·s_i + m + e` travels and every member's chunk `k` adds
    /// up under the sum of the contributors' secrets. Only a threshold key decrypts such a
    /// sum (each member holds a Shamir share of every member's secret), and only a sum of at
    /// least `t` members' encryptions: the server learns no smaller sum.
    ///
    /// One model per party and session: a second encryption under the same `a_k` would
    /// reveal the difference of the two models. Refuses what [`ModelCodec::encrypt`] refuses.
    pub fn encrypt_secret(
        &self,
        party: &Party,
        committee: &Committee,
        session: u64,
        values: &[f32],
        rng: &mut impl CryptoRng,
    ) -> Result<EncryptedModel, CkksError> {
        if party.params.fingerprint() != self.params.fingerprint() {
            return Err(CkksError::Mismatch(
                "the party was made under other parameters than the codec".into(),
            ));
        }
        if committee.members().binary_search(&party.id).is_err() {
            return Err(CkksError::UnknownParty { party: party.id });
        }
        self.encrypt_chunks(values, |k, coeffs| {
            let chunk = k as u32; // at most `MAX_MODEL_CHUNKS` chunks reach the wire
            let a = seeded_a(&self.params, &party.crs_digest, session, chunk);
            // |m|·2^lift ≤ max_updates·clip·Λ·2^lift < Q/4 (checked by `new`), |e| tiny.
            let message = lifted_plus_error(&self.params, coeffs, self.lift_log2, rng)?;
            let c0 = rlwe_sample(&self.params, &party.sk.s, &a, message);
            Ok(Ciphertext {
                params: Arc::clone(&self.params),
                session,
                members: committee.members().to_vec(),
                count: 1,
                c0,
                c1: a,
                seeded: Some(Seeded {
                    crs: party.crs_digest,
                    chunk,
                    contributors: vec![party.id],
                }),
            })
        })
    }

    /// Checks `values` and encrypts them chunk by chunk with `encrypt(k, coefficients)`.
    fn encrypt_chunks(
        &self,
        values: &[f32],
        mut encrypt: impl FnMut(usize, &[i64]) -> Result<Ciphertext, CkksError>,
    ) -> Result<EncryptedModel, CkksError> {
        if values.len() != self.len {
            return Err(CkksError::Encoding(format!(
                "a model of {} values, the codec packs {}",
                values.len(),
                self.len
            )));
        }
        if let Some((index, x)) = values
            .iter()
            .enumerate()
            .find(|(_, x)| !(x.is_finite() && f64::from(x.abs()) <= self.clip))
        {
            return Err(CkksError::Encoding(format!(
                "value {x} at index {index} is not finite within ±{}",
                self.clip
            )));
        }
        let n = self.params.n();
        let scale = self.params.scale();
        let mut coeffs = vec![0i64; n];
        let cts = values
            .chunks(n)
            .enumerate()
            .map(|(k, chunk)| {
                coeffs.fill(0);
                for (c, &x) in coeffs.iter_mut().zip(chunk) {
                    *c = (f64::from(x) * scale).round() as i64;
                }
                encrypt(k, &coeffs)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EncryptedModel { len: self.len, cts })
    }

    /// The average of the `count` updates a model sum holds, from its decrypted chunks.
    /// Refuses a sum with an entry outside `±count·clip` (naming the index): what a garbage
    /// upload, a wrong share or an inconsistent dealing decrypts to, almost surely.
    pub fn average(&self, plain: &[Decrypted], count: u32) -> Result<Vec<f64>, CkksError> {
        if plain.len() != self.chunks() {
            return Err(CkksError::Mismatch(format!(
                "{} decrypted chunks for a model of {}",
                plain.len(),
                self.chunks()
            )));
        }
        if count == 0 || count > self.max_updates {
            return Err(CkksError::InvalidParams(format!(
                "a sum of {count} updates, the codec allows 1..={}",
                self.max_updates
            )));
        }
        let scale = self.params.scale();
        // A sum of `count` updates within ±clip, plus the decryption noise (≪ Λ/256). Beyond
        // it, an upload was no encryption of an update under its sender's key (or a share was
        // wrong): refused rather than averaged. Padding coefficients are held to it too.
        let limit = f64::from(count) * self.clip * scale + scale / 256.0;
        let divisor = scale * f64::from(count);
        let lift = 2f64.powi(self.lift_log2 as i32);
        let mut out = Vec::with_capacity(self.chunks() * self.params.n());
        for p in plain {
            for c in p.integer_coefficients()? {
                let x = c as f64 / lift;
                if x.abs() > limit {
                    return Err(CkksError::Mismatch(format!(
                        "the decrypted sum at index {} is {:.4e}, outside ±{count}·{}: an \
                         upload or a decryption share was not what it claims",
                        out.len(),
                        x / scale,
                        self.clip
                    )));
                }
                out.push(x / divisor);
            }
        }
        out.truncate(self.len);
        Ok(out)
    }
}

/// One model update (or a sum of them) as ciphertexts under the collective key.
#[derive(Clone, Debug)]
pub struct EncryptedModel {
    pub(crate) len: usize,
    pub(crate) cts: Vec<Ciphertext>,
}

impl EncryptedModel {
    /// The sum of `models` (one chunk sum per position): refused if they differ in length or
    /// key.
    pub fn sum(models: &[&EncryptedModel]) -> Result<EncryptedModel, CkksError> {
        let first = models
            .first()
            .ok_or_else(|| CkksError::InvalidParams("a sum of no models".into()))?;
        if let Some(m) = models
            .iter()
            .find(|m| m.len != first.len || m.cts.len() != first.cts.len())
        {
            return Err(CkksError::Mismatch(format!(
                "a model of {} values summed with one of {}",
                m.len, first.len
            )));
        }
        let cts = (0..first.cts.len())
            .map(|k| Ciphertext::sum(models.iter().map(|m| &m.cts[k])))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EncryptedModel {
            len: first.len,
            cts,
        })
    }

    /// Values in the model.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no values (never, for a model a codec made).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The parties whose secret-key encryptions it sums ([`ModelCodec::encrypt_secret`]), or
    /// `None` for public-key ones.
    pub fn contributors(&self) -> Option<&[super::PartyId]> {
        self.cts.first().and_then(Ciphertext::contributors)
    }

    /// How many updates it sums.
    pub fn count(&self) -> u32 {
        self.cts.first().map_or(0, Ciphertext::count)
    }

    /// Its ciphertexts, one per chunk: the batch an active set and the shares are for.
    pub fn ciphertexts(&self) -> &[Ciphertext] {
        &self.cts
    }
}
