//! The measured operations of the `mkckks` benchmarks, shared by `privopt bench mkckks` and
//! the criterion benches so both time exactly the same code.

use std::sync::Arc;

use privopt_math::sample::secret_rng;
use rand_chacha::ChaCha20Rng;

use crate::encoding::SlotEncoder;
use crate::error::CkksError;
use crate::multiparty::{
    Ciphertext, CollectivePublicKey, CommonPoly, DecryptionShare, Party, PartyId, fuse,
};
use crate::params::CkksParams;

/// A ready-made N-party setup: keys, N encryptions of full vectors, their sum, and all
/// decryption shares of the sum.
pub struct MkCkksFixture {
    params: Arc<CkksParams>,
    crs: CommonPoly,
    encoder: SlotEncoder,
    parties: Vec<Party>,
    key: CollectivePublicKey,
    ciphertexts: Vec<Ciphertext>,
    sum: Ciphertext,
    shares: Vec<DecryptionShare>,
    vector: Vec<f64>,
    rng: ChaCha20Rng,
    next_id: PartyId,
}

impl MkCkksFixture {
    /// Builds the setup for `parties` parties (seeded: benchmarks need no OS entropy).
    pub fn new(params: Arc<CkksParams>, parties: u32) -> Result<Self, CkksError> {
        let mut rng = secret_rng(Some(0xbe7c));
        let crs = CommonPoly::from_seed(&params, [1u8; 32]);
        let encoder = SlotEncoder::new(params.n())?;
        let party_list: Vec<Party> = (0..parties)
            .map(|i| Party::generate(i, &params, &crs, &mut rng))
            .collect();
        let ids: Vec<PartyId> = (0..parties).collect();
        let key_shares: Vec<_> = party_list.iter().map(|p| p.public_key_share(0)).collect();
        let key = CollectivePublicKey::aggregate(&params, &crs, &ids, 0, &key_shares)?;
        let vector: Vec<f64> = (0..encoder.slots())
            .map(|j| (j as f64 * 0.001).sin())
            .collect();
        let ciphertexts = (0..parties)
            .map(|_| key.encrypt_vector(&encoder, &vector, &mut rng))
            .collect::<Result<Vec<_>, _>>()?;
        let sum = Ciphertext::sum(&ciphertexts)?;
        let shares = party_list
            .iter()
            .map(|p| p.partial_decrypt(&sum, &mut rng))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            params,
            crs,
            encoder,
            parties: party_list,
            key,
            ciphertexts,
            sum,
            shares,
            vector,
            rng,
            next_id: parties,
        })
    }

    /// `n4096`-style label of the parameter set.
    pub fn label(&self) -> String {
        format!("n{}", self.params.n())
    }

    /// Number of parties.
    pub fn parties(&self) -> usize {
        self.parties.len()
    }

    /// One party's key generation: secret, error, partial public key.
    pub fn keygen(&mut self) -> Party {
        self.next_id = self.next_id.wrapping_add(1);
        Party::generate(self.next_id, &self.params, &self.crs, &mut self.rng)
    }

    /// Encryption of one scalar (coefficient encoding included).
    pub fn encrypt_scalar(&mut self) -> Result<Ciphertext, CkksError> {
        self.key.encrypt_scalar(0.123, &mut self.rng)
    }

    /// Encryption of a full vector of `n/2` slots (slot encoding included).
    pub fn encrypt_vector(&mut self) -> Result<Ciphertext, CkksError> {
        self.key
            .encrypt_vector(&self.encoder, &self.vector, &mut self.rng)
    }

    /// Homomorphic sum of the N ciphertexts.
    pub fn aggregate(&self) -> Result<Ciphertext, CkksError> {
        Ciphertext::sum(&self.ciphertexts)
    }

    /// One party's decryption share of the sum (ciphertext digest included).
    pub fn partial_decrypt(&mut self) -> Result<DecryptionShare, CkksError> {
        self.parties[0].partial_decrypt(&self.sum, &mut self.rng)
    }

    /// Fusion of the N shares and decoding of the full vector.
    pub fn fusion(&self) -> Result<Vec<f64>, CkksError> {
        fuse(&self.sum, &self.shares)?.vector(&self.encoder)
    }

    /// Fusion of the N shares and decoding of a coefficient-encoded scalar.
    pub fn fusion_scalar(&self) -> Result<f64, CkksError> {
        fuse(&self.sum, &self.shares)?.scalar()
    }
}
