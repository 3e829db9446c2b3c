//! The data owner: holds the secret key, encrypts its data once per step, answers refresh
//! requests (until bootstrapping lets the server go alone) and decrypts the final model.

use std::sync::Arc;

use privopt_ckks::eval::{
    Ciphertext, EvalContext, EvaluationKeys, GaloisKeys, KeyRequest, PublicKey, RelinKey,
    SecretKey, encode,
};
use privopt_ml::data::Dataset;
use rand_chacha::ChaCha20Rng;

use super::circuit::Layout;
use super::messages::{EncryptedStep, KIND_OWNER_STATE, Refresh};
use super::server::Bootstrappers;
use crate::error::{ProtocolError, Result};
use crate::wire::{self, DecodeError, Method};

/// The data owner's keys and encryption state.
pub struct DataOwner {
    ctx: Arc<EvalContext>,
    sk: SecretKey,
    pk: PublicKey,
    layout: Layout,
    /// The level ciphertexts are encrypted at.
    level: usize,
    rng: ChaCha20Rng,
    refreshes: usize,
}

impl std::fmt::Debug for DataOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataOwner")
            .field("layout", &self.layout)
            .field("refreshes", &self.refreshes)
            .field("secret", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl DataOwner {
    /// Generates the keys. `rng` must be a cryptographic generator seeded from the OS in a
    /// deployment; experiments seed it for reproducibility.
    pub fn new(ctx: &Arc<EvalContext>, layout: Layout, mut rng: ChaCha20Rng) -> Self {
        let sk = SecretKey::generate(ctx, &mut rng);
        let pk = sk.public_key(&mut rng);
        Self {
            ctx: Arc::clone(ctx),
            sk,
            pk,
            layout,
            level: ctx.max_level(),
            rng,
            refreshes: 0,
        }
    }

    /// Encrypts at `level` from now on (a bootstrapping server's output level: the data
    /// never needs more levels than the weights it meets).
    pub fn with_level(mut self, level: usize) -> Result<Self> {
        if level > self.ctx.max_level() {
            return Err(ProtocolError::Parameters(format!(
                "level {level} is above the parameters' {}",
                self.ctx.max_level()
            )));
        }
        self.level = level;
        Ok(self)
    }

    /// The keys of a server that bootstraps with `boot`: the bootstrappers' own, plus the
    /// layout's rotations at the level the owner encrypts at (they never run higher).
    pub fn bootstrapping_keys(&mut self, boot: &Bootstrappers) -> Result<EvaluationKeys> {
        let level = self.level;
        let mut extra: Vec<KeyRequest> = self
            .layout
            .rotations()
            .into_iter()
            .map(|steps| KeyRequest::Rotation { steps, level })
            .collect();
        if let Some(weights) = &boot.weights {
            extra.extend(weights.key_requests());
        }
        Ok(boot.any.keys(&self.sk, &extra, &mut self.rng)?)
    }

    /// The server's evaluation keys: relinearization and the layout's rotations.
    pub fn evaluation_keys(&mut self) -> (RelinKey, GaloisKeys) {
        let relin = self.sk.relin_key(&mut self.rng);
        let galois = self
            .sk
            .galois_keys(&self.layout.rotations(), false, &mut self.rng);
        (relin, galois)
    }

    fn encrypt(&mut self, values: &[f64]) -> Result<Ciphertext> {
        let pt = encode(&self.ctx, values, self.level)?;
        Ok(self.pk.encrypt(&pt, &mut self.rng)?)
    }

    /// A vector replicated in every block (the initial weights).
    pub fn encrypt_replicated(&mut self, v: &[f64]) -> Result<Ciphertext> {
        let r = self.layout.replicated(v);
        self.encrypt(&r)
    }

    /// Step `step`'s inputs: the batch's features (block `i` = example `i`), its labels (at
    /// block starts) and the pre-sampled noise `η·χ_t`, replicated.
    pub fn encrypt_step(
        &mut self,
        step: u64,
        data: &Dataset,
        batch: &[usize],
        scaled_noise: &[f64],
    ) -> Result<EncryptedStep> {
        let l = self.layout;
        if batch.len() != l.batch || batch.iter().any(|&r| r >= data.len()) {
            return Err(ProtocolError::Parameters(format!(
                "a batch of {} rows below {} for a layout of {}",
                batch.len(),
                data.len(),
                l.batch
            )));
        }
        let mut x = vec![0.0; l.slots];
        let mut y = vec![0.0; l.slots];
        for (i, &row) in batch.iter().enumerate() {
            x[i * l.block..i * l.block + l.d].copy_from_slice(data.row(row));
            y[i * l.block] = data.label(row);
        }
        Ok(EncryptedStep {
            step,
            x: self.encrypt(&x)?,
            y: self.encrypt(&y)?,
            noise: self.encrypt_replicated(scaled_noise)?,
        })
    }

    /// Answers a refresh request: decrypts and re-encrypts at the top level (counted). The
    /// owner learns only values of its own model and data.
    pub fn refresh(&mut self, request: &Refresh) -> Result<Refresh> {
        self.refreshes += 1;
        let v = self.sk.decrypt_values(&request.ct)?;
        Ok(Refresh {
            step: request.step,
            ct: self.encrypt(&v)?,
        })
    }

    /// The weights: block 0 of a replicated ciphertext.
    pub fn decrypt_weights(&self, ct: &Ciphertext) -> Result<Vec<f64>> {
        let v = self.sk.decrypt_values(ct)?;
        Ok(v[..self.layout.d.min(v.len())].to_vec())
    }

    /// The owner's keys and refresh count as bytes, for its own storage between processes
    /// (a Flower ClientApp handles each message in a fresh one). They hold the secret key:
    /// keep them as secret as the owner.
    pub fn save(&self) -> Vec<u8> {
        wire::encode(Method::Dpfhe, KIND_OWNER_STATE, |w| {
            w.bytes(&self.sk.to_bytes());
            w.bytes(&self.pk.to_bytes());
            w.u64(self.refreshes as u64);
        })
    }

    /// The owner [`DataOwner::save`] wrote, for `ctx` and `layout`, drawing its encryption
    /// randomness from `rng` from now on.
    pub fn restore(
        ctx: &Arc<EvalContext>,
        layout: Layout,
        bytes: &[u8],
        rng: ChaCha20Rng,
    ) -> std::result::Result<Self, DecodeError> {
        wire::decode(
            bytes,
            "dpfhe data owner state",
            Method::Dpfhe,
            KIND_OWNER_STATE,
            |r| {
                let sk =
                    SecretKey::from_bytes(ctx, r.bytes()?).map_err(|e| r.invalid(e.to_string()))?;
                let pk =
                    PublicKey::from_bytes(ctx, r.bytes()?).map_err(|e| r.invalid(e.to_string()))?;
                let refreshes = r.u64()? as usize;
                Ok(Self {
                    ctx: Arc::clone(ctx),
                    sk,
                    pk,
                    layout,
                    level: ctx.max_level(),
                    rng,
                    refreshes,
                })
            },
        )
    }

    /// Refresh round trips answered so far.
    pub fn refreshes(&self) -> usize {
        self.refreshes
    }
}
