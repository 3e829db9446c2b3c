//! Key agreement and share encryption: X25519, HKDF-SHA256, AES-128-GCM.
//!
//! Each client makes two X25519 key pairs per round: one whose agreements key the encryption of
//! Shamir shares sent through the server, one whose agreements seed the pairwise masks. Every
//! derived key is bound by HKDF to the session, the round and the ordered pair of clients.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Nonce};
use hkdf::Hkdf;
use rand::{CryptoRng, Rng};
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::mask::MaskSeed;
use crate::messages::{Context, PublicKeys};
use crate::shamir::{LIMBS, Share};
use crate::{ClientId, SecAggError};

/// An X25519 secret; the crate wipes it on drop.
pub(crate) struct SecretKey(StaticSecret);

impl SecretKey {
    pub(crate) fn generate<R: Rng + CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut bytes = [0u8; 32];
        rng.fill(&mut bytes);
        Self(StaticSecret::from(bytes))
    }

    pub(crate) fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(StaticSecret::from(bytes))
    }

    pub(crate) fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    pub(crate) fn public(&self) -> [u8; 32] {
        PublicKey::from(&self.0).to_bytes()
    }

    fn agree(&self, peer: &[u8; 32]) -> Result<Zeroizing<[u8; 32]>, SecAggError> {
        let shared = self.0.diffie_hellman(&PublicKey::from(*peer));
        // A low-order peer key gives an all-zero secret: refuse it rather than mask with it.
        if !shared.was_contributory() {
            return Err(SecAggError::Malformed("a public key of low order".into()));
        }
        Ok(Zeroizing::new(shared.to_bytes()))
    }
}

/// Refuses a public key of low order (on the curve or its twist): agreeing with it gives the
/// all-zero secret whatever the secret key, so no honest client could use it. Checked by one
/// agreement with a fixed secret: clamped scalars are multiples of 8 (the cofactor) and below
/// both large subgroup orders, so the result is zero exactly for low-order keys.
pub(crate) fn check_public(key: &[u8; 32]) -> Result<(), SecAggError> {
    let probe = StaticSecret::from([0x5a; 32]);
    if probe
        .diffie_hellman(&PublicKey::from(*key))
        .was_contributory()
    {
        Ok(())
    } else {
        Err(SecAggError::Malformed("a public key of low order".into()))
    }
}

fn derive(
    shared: &[u8; 32],
    ctx: &Context,
    label: &[u8],
    a: ClientId,
    b: ClientId,
) -> Zeroizing<[u8; 44]> {
    let mut salt = Vec::with_capacity(24);
    salt.extend_from_slice(&ctx.session.0);
    salt.extend_from_slice(&ctx.round.to_le_bytes());
    let mut info = label.to_vec();
    info.extend_from_slice(&a.to_le_bytes());
    info.extend_from_slice(&b.to_le_bytes());
    let mut okm = Zeroizing::new([0u8; 44]);
    // HKDF-SHA256 expands up to 8160 bytes, far above 44.
    let _ = Hkdf::<Sha256>::new(Some(&salt), shared).expand(&info, okm.as_mut());
    okm
}

/// The pairwise mask seed of `me` and `peer` (the same on both sides).
pub(crate) fn pairwise_seed(
    mask_secret: &SecretKey,
    peer_mask_public: &[u8; 32],
    ctx: &Context,
    me: ClientId,
    peer: ClientId,
) -> Result<MaskSeed, SecAggError> {
    let shared = mask_secret.agree(peer_mask_public)?;
    let okm = derive(
        &shared,
        ctx,
        b"privopt-secagg mask",
        me.min(peer),
        me.max(peer),
    );
    let mut seed = [0u8; 32];
    seed.copy_from_slice(&okm[..32]);
    Ok(MaskSeed(seed))
}

/// A client's two shares for one holder, as sent (encrypted) to that holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharePair {
    pub(crate) mask_key: Share,
    pub(crate) self_seed: Share,
}

const SHARE_PAIR_BYTES: usize = 2 * LIMBS * 8;

fn encode(pair: &SharePair) -> Vec<u8> {
    pair.mask_key
        .limbs
        .iter()
        .chain(&pair.self_seed.limbs)
        .flat_map(|l| l.to_le_bytes())
        .collect()
}

fn decode(bytes: &[u8], holder: ClientId) -> Result<SharePair, SecAggError> {
    if bytes.len() != SHARE_PAIR_BYTES {
        return Err(SecAggError::Malformed(format!(
            "a share of {} bytes",
            bytes.len()
        )));
    }
    let mut limbs = bytes.chunks_exact(8).map(|c| {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        u64::from_le_bytes(w)
    });
    let mut take = || {
        let mut l = [0u64; LIMBS];
        l.iter_mut()
            .for_each(|x| *x = limbs.next().unwrap_or(u64::MAX));
        l
    };
    let (mask_key, self_seed) = (take(), take());
    if mask_key
        .iter()
        .chain(&self_seed)
        .any(|&x| x >= crate::shamir::PRIME)
    {
        return Err(SecAggError::Malformed(
            "a share limb outside the field".into(),
        ));
    }
    Ok(SharePair {
        mask_key: Share {
            holder,
            limbs: mask_key,
        },
        self_seed: Share {
            holder,
            limbs: self_seed,
        },
    })
}

fn cipher_for(
    enc_secret: &SecretKey,
    peer: &PublicKeys,
    ctx: &Context,
    from: ClientId,
    to: ClientId,
) -> Result<(Aes128Gcm, [u8; 12], Vec<u8>), SecAggError> {
    let shared = enc_secret.agree(&peer.encryption)?;
    // Directional keys: the share from `from` to `to` never shares a key with the reverse one.
    let okm = derive(&shared, ctx, b"privopt-secagg share", from, to);
    let cipher = Aes128Gcm::new_from_slice(&okm[..16])
        .map_err(|_| SecAggError::Malformed("AES-GCM key length".into()))?;
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&okm[32..44]);
    let mut aad = ctx.session.0.to_vec();
    aad.extend_from_slice(&ctx.round.to_le_bytes());
    aad.extend_from_slice(&from.to_le_bytes());
    aad.extend_from_slice(&to.to_le_bytes());
    Ok((cipher, nonce, aad))
}

/// Encrypts `pair` from `from` to `to`, binding session, round and both ids.
pub(crate) fn seal(
    pair: &SharePair,
    enc_secret: &SecretKey,
    to_keys: &PublicKeys,
    ctx: &Context,
    from: ClientId,
    to: ClientId,
) -> Result<Vec<u8>, SecAggError> {
    let (cipher, nonce, aad) = cipher_for(enc_secret, to_keys, ctx, from, to)?;
    cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: &encode(pair),
                aad: &aad,
            },
        )
        .map_err(|_| SecAggError::Malformed("share encryption failed".into()))
}

/// Decrypts a share pair sent by `from` to `to`; any change to it, or a copy from another
/// session, round or pair of clients, fails authentication.
pub(crate) fn open(
    ciphertext: &[u8],
    enc_secret: &SecretKey,
    from_keys: &PublicKeys,
    ctx: &Context,
    from: ClientId,
    to: ClientId,
) -> Result<SharePair, SecAggError> {
    let (cipher, nonce, aad) = cipher_for(enc_secret, from_keys, ctx, from, to)?;
    let plain = cipher
        .decrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: ciphertext,
                aad: &aad,
            },
        )
        .map_err(|_| SecAggError::Authentication { from })?;
    decode(&plain, to)
}
