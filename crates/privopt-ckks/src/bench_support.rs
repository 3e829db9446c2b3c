//! The measured operations of the `mkckks` and `ckks` benchmarks, shared by `privopt bench`
//! and the criterion benches so both time exactly the same code.

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

/// One parameter set of `privopt bench ckks` (arguments of [`CkksParamsBuilder::leveled`]).
///
/// [`CkksParamsBuilder::leveled`]: crate::params::CkksParamsBuilder::leveled
#[derive(Clone, Copy, Debug)]
pub struct BenchSet {
    /// Name in benchmark ids.
    pub name: &'static str,
    /// Ring degree.
    pub n: usize,
    /// Bits of the base prime `q_0`.
    pub base_bits: u32,
    /// `log2` of the scale.
    pub scale_log2: u32,
    /// Rescaling levels.
    pub levels: usize,
    /// Bits of each special prime.
    pub special_bits: &'static [u32],
}

/// The parameter sets of `privopt bench ckks`.
pub const EVAL_BENCH_SETS: &[BenchSet] = &[
    // OpenFHE's comparison point: n = 8192, log QP ≤ 218, hybrid key switching.
    BenchSet {
        name: "n8192",
        n: 8192,
        base_bits: 50,
        scale_log2: 40,
        levels: 3,
        special_bits: &[47],
    },
    // n = 2^15, log QP ≈ 866 ≤ 881: 16 levels of 40 bits, 5 digits, P of 4 × 44 bits.
    BenchSet {
        name: "n32768",
        n: 1 << 15,
        base_bits: 50,
        scale_log2: 40,
        levels: 16,
        special_bits: &[44, 44, 44, 44],
    },
    // SEAL's (TenSEAL's) default: primes of 60, 40, 40 bits and a 60-bit special prime.
    BenchSet {
        name: "seal8192",
        n: 8192,
        base_bits: 60,
        scale_log2: 40,
        levels: 2,
        special_bits: &[60],
    },
];

/// Keys, a full-vector plaintext and two ciphertexts at the top level, and a one-thread
/// evaluator (every measured operation runs inside its pool).
pub struct EvalFixture {
    name: String,
    ctx: Arc<crate::eval::EvalContext>,
    sk: crate::eval::SecretKey,
    pk: crate::eval::PublicKey,
    ev: crate::eval::Evaluator,
    values: Vec<f64>,
    pt: crate::eval::Plaintext,
    a: crate::eval::Ciphertext,
    b: crate::eval::Ciphertext,
    rng: ChaCha20Rng,
}

impl EvalFixture {
    /// Builds the fixture for one of [`EVAL_BENCH_SETS`] on `threads` threads.
    pub fn new(set: &str, threads: usize) -> Result<Self, CkksError> {
        use crate::eval::{EvalContext, Evaluator, SecretKey, encode};
        let s = EVAL_BENCH_SETS
            .iter()
            .find(|s| s.name == set)
            .copied()
            .ok_or_else(|| CkksError::InvalidParams(format!("unknown bench set {set}")))?;
        let name = s.name;
        let params = crate::params::CkksParamsBuilder::leveled(
            s.n,
            s.base_bits,
            s.scale_log2,
            s.levels,
            s.special_bits,
        )
        .build()?;
        let ctx = EvalContext::new(&params)?;
        let mut rng = secret_rng(Some(0xcc5));
        let sk = SecretKey::generate(&ctx, &mut rng);
        let pk = sk.public_key(&mut rng);
        let ev = Evaluator::new(
            &ctx,
            Some(sk.relin_key(&mut rng)),
            sk.galois_keys(&[1], false, &mut rng),
        )
        .with_threads(threads)?;
        let values: Vec<f64> = (0..ctx.slots()).map(|j| (j as f64 * 0.001).sin()).collect();
        let pt = encode(&ctx, &values, ctx.max_level())?;
        let a = pk.encrypt(&pt, &mut rng)?;
        let b = pk.encrypt(&pt, &mut rng)?;
        Ok(Self {
            name: name.to_string(),
            ctx,
            sk,
            pk,
            ev,
            values,
            pt,
            a,
            b,
            rng,
        })
    }

    /// The set's name (`n8192`, …).
    pub fn label(&self) -> &str {
        &self.name
    }

    /// Encoding of a full vector of `n/2` slots at the top level.
    pub fn encode(&self) -> Result<crate::eval::Plaintext, CkksError> {
        self.ev
            .install(|| crate::eval::encode(&self.ctx, &self.values, self.ctx.max_level()))
    }

    /// Public-key encryption of an encoded full vector.
    pub fn encrypt(&mut self) -> Result<crate::eval::Ciphertext, CkksError> {
        let (pk, pt, rng) = (&self.pk, &self.pt, &mut self.rng);
        self.ev.install(|| pk.encrypt(pt, rng))
    }

    /// Decryption and decoding of all slots.
    pub fn decrypt(&self) -> Result<Vec<f64>, CkksError> {
        self.ev.install(|| self.sk.decrypt_values(&self.a))
    }

    /// Ciphertext addition.
    pub fn add(&self) -> Result<crate::eval::Ciphertext, CkksError> {
        self.ev.add(&self.a, &self.b)
    }

    /// Multiplication, relinearization and rescaling at the top level.
    pub fn mul_relin_rescale(&self) -> Result<crate::eval::Ciphertext, CkksError> {
        self.ev.multiply(&self.a, &self.b)
    }

    /// Rotation by one slot at the top level.
    pub fn rotate(&self) -> Result<crate::eval::Ciphertext, CkksError> {
        self.ev.rotate(&self.a, 1)
    }

    /// Largest slot error of `a·b` after one product (a sanity check printed by the bench).
    pub fn product_error(&self) -> Result<f64, CkksError> {
        let got = self.sk.decrypt_values(&self.mul_relin_rescale()?)?;
        Ok(got
            .iter()
            .zip(&self.values)
            .map(|(g, v)| (g - v * v).abs())
            .fold(0.0, f64::max))
    }
}

/// One preset's bootstrapping, set up for timing: the transforms, the keys (one thread) and a
/// level-0 ciphertext of full slots (or slots of the sparse packing's period).
pub struct BootstrapFixture {
    boot: crate::eval::Bootstrapper,
    ev: crate::eval::Evaluator,
    sk: crate::eval::SecretKey,
    input: crate::eval::Ciphertext,
    values: Vec<f64>,
    /// Seconds to prepare the transforms.
    pub setup_seconds: f64,
    /// Seconds to generate the keys.
    pub keygen_seconds: f64,
    /// Bytes of the Galois keys.
    pub galois_bytes: usize,
    /// Galois keys generated.
    pub galois_keys: usize,
    /// Bytes of the transforms' encoded diagonals.
    pub transform_bytes: usize,
}

impl BootstrapFixture {
    /// Builds `preset`'s parameters with `config` (the preset's own or a variant of it: see
    /// `BootstrapPreset::config`) and one evaluation thread (seeded: benchmarks need no OS
    /// entropy); the input repeats with the sparse packing's period if `config.slots` has one.
    pub fn new(
        preset: crate::eval::bootstrap::BootstrapPreset,
        config: crate::eval::bootstrap::BootstrapConfig,
    ) -> Result<Self, CkksError> {
        use crate::eval::{Bootstrapper, EvalContext, SecretKey, encode_at};
        let params = preset.params().build()?;
        let ctx = EvalContext::new(&params)?;
        let clock = std::time::Instant::now();
        let boot = Bootstrapper::new(&ctx, &config)?;
        let setup_seconds = clock.elapsed().as_secs_f64();
        let transform_bytes = boot.transform_bytes();
        let clock = std::time::Instant::now();
        let mut rng = secret_rng(Some(0xb007));
        let sk = SecretKey::generate(&ctx, &mut rng);
        let ev = boot.evaluator(&sk, &[], &mut rng)?.with_threads(1)?;
        let galois = ev.galois_keys();
        let (galois_bytes, galois_keys) = (galois.byte_len(), galois.elements().count());
        let keygen_seconds = clock.elapsed().as_secs_f64();
        let period = config.slots.unwrap_or(ctx.slots());
        let values: Vec<f64> = (0..ctx.slots())
            .map(|i| ((i % period) as f64 * 0.731).sin())
            .collect();
        let level = boot.input_level();
        let input = sk.encrypt(
            &encode_at(&ctx, &values, level, ctx.level_scale(level))?,
            &mut rng,
        )?;
        Ok(Self {
            boot,
            ev,
            sk,
            input,
            values,
            setup_seconds,
            keygen_seconds,
            galois_bytes,
            galois_keys,
            transform_bytes,
        })
    }

    /// Bootstraps on `threads` threads from now on (the keys stay).
    pub fn set_threads(&mut self, threads: usize) -> Result<(), CkksError> {
        self.ev.set_threads(threads)
    }

    /// One bootstrap of the input (at the bootstrapper's input level), with the seconds of
    /// each phase.
    pub fn bootstrap(
        &self,
    ) -> Result<
        (
            crate::eval::Ciphertext,
            crate::eval::bootstrap::PhaseSeconds,
        ),
        CkksError,
    > {
        self.boot.bootstrap_timed(&self.ev, &self.input)
    }

    /// `−log2` of the largest slot error of `out` (a bootstrap of the input), and the levels
    /// it has above the bootstrapper's input level (what a circuit can spend before the next
    /// bootstrap).
    pub fn precision_bits(&self, out: &crate::eval::Ciphertext) -> Result<(f64, usize), CkksError> {
        let got = self.sk.decrypt_values(out)?;
        let worst = got
            .iter()
            .zip(&self.values)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        Ok((-worst.log2(), out.level() - self.boot.input_level()))
    }
}
