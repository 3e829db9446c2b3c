//! Byte encodings of the SecAgg+ messages of [`privopt_secagg`] (whose state machines do the
//! protocol), so its rounds can cross process boundaries. DOME sums its clients' vectors with
//! them; they are usable on their own.
//!
//! Every message starts with its context (16-byte session, 8-byte round) and the client it is
//! from or to; lists are counted and bounded by the bytes that remain, and clients and shares
//! are checked against the protocol's ranges (client ids below [`MAX_CLIENTS`], share limbs
//! below the field prime). The state machines check the rest (membership, round, duplicates).

use privopt_secagg::shamir::{LIMBS, PRIME, Share};
use privopt_secagg::{
    AdvertiseKeys, ClientConfig, ClientId, ClientSnapshot, Context, EncryptedShares,
    IncomingShares, MaskedInput, NeighbourKeys, PublicKeys, SessionId, ShareKeys, Stage,
    UnmaskRequest, UnmaskShares,
};
use zeroize::Zeroizing;

use crate::wire::{DecodeError, Message, Method, Reader, Writer};

/// Largest client id a message may name (a federation of 2^20 clients).
pub const MAX_CLIENTS: u32 = 1 << 20;
/// Largest vector a masked input may carry (2^24 words: 64 MiB, the frame limit).
pub const MAX_VECTOR: usize = 1 << 24;
/// Largest encrypted share pair.
pub const MAX_SHARE_CIPHERTEXT: usize = 1024;

fn put_context(w: &mut Writer, c: &Context) {
    w.raw(&c.session.0);
    w.u64(c.round);
}

fn context(r: &mut Reader<'_>) -> Result<Context, DecodeError> {
    let mut session = [0u8; 16];
    session.copy_from_slice(r.fixed(16)?);
    Ok(Context {
        session: SessionId(session),
        round: r.u64()?,
    })
}

fn client(r: &mut Reader<'_>) -> Result<ClientId, DecodeError> {
    let c = r.u32()?;
    if c >= MAX_CLIENTS {
        return Err(r.invalid(format!("client id {c} is not below {MAX_CLIENTS}")));
    }
    Ok(c)
}

fn put_keys(w: &mut Writer, k: &PublicKeys) {
    w.raw(&k.encryption);
    w.raw(&k.masking);
}

fn keys(r: &mut Reader<'_>) -> Result<PublicKeys, DecodeError> {
    let mut encryption = [0u8; 32];
    let mut masking = [0u8; 32];
    encryption.copy_from_slice(r.fixed(32)?);
    masking.copy_from_slice(r.fixed(32)?);
    Ok(PublicKeys {
        encryption,
        masking,
    })
}

fn put_encrypted(w: &mut Writer, list: &[EncryptedShares]) {
    w.len(list.len());
    for s in list {
        w.u32(s.peer);
        w.bytes(&s.ciphertext);
    }
}

fn encrypted(r: &mut Reader<'_>) -> Result<Vec<EncryptedShares>, DecodeError> {
    let n = r.count(8)?;
    (0..n)
        .map(|_| {
            let peer = client(r)?;
            let ciphertext = r.bytes()?;
            if ciphertext.len() > MAX_SHARE_CIPHERTEXT {
                return Err(r.invalid(format!(
                    "a {}-byte share ciphertext (at most {MAX_SHARE_CIPHERTEXT})",
                    ciphertext.len()
                )));
            }
            Ok(EncryptedShares {
                peer,
                ciphertext: ciphertext.to_vec(),
            })
        })
        .collect()
}

fn put_shares(w: &mut Writer, list: &[(ClientId, Share)]) {
    w.len(list.len());
    for (owner, s) in list {
        w.u32(*owner);
        w.u32(s.holder);
        s.limbs.iter().for_each(|&l| w.u64(l));
    }
}

fn shares(r: &mut Reader<'_>) -> Result<Vec<(ClientId, Share)>, DecodeError> {
    let n = r.count(8 + 8 * LIMBS)?;
    (0..n)
        .map(|_| {
            let owner = client(r)?;
            let holder = client(r)?;
            let mut limbs = [0u64; LIMBS];
            for l in &mut limbs {
                *l = r.u64()?;
                if *l >= PRIME {
                    return Err(r.invalid("a share limb is not below the field prime"));
                }
            }
            Ok((owner, Share { holder, limbs }))
        })
        .collect()
}

fn clients(r: &mut Reader<'_>) -> Result<Vec<ClientId>, DecodeError> {
    let n = r.count(4)?;
    let list = (0..n).map(|_| client(r)).collect::<Result<Vec<_>, _>>()?;
    if list.windows(2).any(|w| w[0] >= w[1]) {
        return Err(r.invalid("client list is not strictly increasing"));
    }
    Ok(list)
}

macro_rules! secagg_message {
    ($t:ty, $kind:expr, $name:expr, |$s:ident, $w:ident| $write:block, |$r:ident| $read:block) => {
        impl Message for $t {
            const METHOD: Method = Method::SecAgg;
            const KIND: u8 = $kind;
            const NAME: &'static str = $name;
            fn write_fields(&self, $w: &mut Writer) {
                let $s = self;
                $write
            }
            fn read_fields($r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                $read
            }
        }
    };
}

secagg_message!(
    AdvertiseKeys,
    1,
    "SecAgg+ advertise keys",
    |s, w| {
        put_context(w, &s.context);
        w.u32(s.sender);
        put_keys(w, &s.keys);
    },
    |r| {
        Ok(Self {
            context: context(r)?,
            sender: client(r)?,
            keys: keys(r)?,
        })
    }
);

secagg_message!(
    NeighbourKeys,
    2,
    "SecAgg+ neighbour keys",
    |s, w| {
        put_context(w, &s.context);
        w.u32(s.recipient);
        w.len(s.keys.len());
        for (c, k) in &s.keys {
            w.u32(*c);
            put_keys(w, k);
        }
    },
    |r| {
        let context = context(r)?;
        let recipient = client(r)?;
        let n = r.count(4 + 64)?;
        let keys = (0..n)
            .map(|_| Ok((client(r)?, keys(r)?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        if keys.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(r.invalid("neighbours are not strictly increasing"));
        }
        Ok(Self {
            context,
            recipient,
            keys,
        })
    }
);

secagg_message!(
    ShareKeys,
    3,
    "SecAgg+ share keys",
    |s, w| {
        put_context(w, &s.context);
        w.u32(s.sender);
        put_encrypted(w, &s.shares);
    },
    |r| {
        Ok(Self {
            context: context(r)?,
            sender: client(r)?,
            shares: encrypted(r)?,
        })
    }
);

secagg_message!(
    IncomingShares,
    4,
    "SecAgg+ incoming shares",
    |s, w| {
        put_context(w, &s.context);
        w.u32(s.recipient);
        put_encrypted(w, &s.shares);
    },
    |r| {
        Ok(Self {
            context: context(r)?,
            recipient: client(r)?,
            shares: encrypted(r)?,
        })
    }
);

secagg_message!(
    MaskedInput,
    5,
    "SecAgg+ masked input",
    |s, w| {
        put_context(w, &s.context);
        w.u32(s.sender);
        w.u32s(&s.masked);
    },
    |r| {
        let context = context(r)?;
        let sender = client(r)?;
        let n = r.count(4)?;
        if n > MAX_VECTOR {
            return Err(r.invalid(format!("{n} words, at most {MAX_VECTOR}")));
        }
        let masked = r.u32s(n)?;
        Ok(Self {
            context,
            sender,
            masked,
        })
    }
);

secagg_message!(
    UnmaskRequest,
    6,
    "SecAgg+ unmask request",
    |s, w| {
        put_context(w, &s.context);
        w.u32(s.recipient);
        w.len(s.survivors.len());
        s.survivors.iter().for_each(|&c| w.u32(c));
    },
    |r| {
        Ok(Self {
            context: context(r)?,
            recipient: client(r)?,
            survivors: clients(r)?,
        })
    }
);

secagg_message!(
    UnmaskShares,
    7,
    "SecAgg+ unmask shares",
    |s, w| {
        put_context(w, &s.context);
        w.u32(s.sender);
        put_shares(w, &s.self_seed_shares);
        put_shares(w, &s.mask_key_shares);
    },
    |r| {
        Ok(Self {
            context: context(r)?,
            sender: client(r)?,
            self_seed_shares: shares(r)?,
            mask_key_shares: shares(r)?,
        })
    }
);

fn secret(r: &mut Reader<'_>) -> Result<Zeroizing<[u8; 32]>, DecodeError> {
    let mut s = Zeroizing::new([0u8; 32]);
    s.copy_from_slice(r.fixed(32)?);
    Ok(s)
}

const STAGES: [Stage; 5] = [
    Stage::AdvertiseKeys,
    Stage::ShareKeys,
    Stage::MaskedInput,
    Stage::Unmask,
    Stage::Done,
];

// A client's state between stages (secrets included: the bytes are as secret as the client).
// Not a message on the wire; it is here so a role can leave its process and come back.
// `Client::restore` checks what the encoding cannot (membership, stage consistency).
secagg_message!(
    ClientSnapshot,
    8,
    "SecAgg+ client snapshot",
    |s, w| {
        put_context(w, &s.config.context);
        w.u32(s.config.id);
        w.len(s.config.neighbours.len());
        s.config.neighbours.iter().for_each(|&c| w.u32(c));
        w.len(s.config.threshold);
        w.len(s.config.vector_len);
        // Every stage is in STAGES, so the position is always found.
        let stage = STAGES
            .iter()
            .position(|&x| x == s.stage)
            .unwrap_or(STAGES.len());
        w.u8(stage as u8);
        w.raw(&*s.encryption_secret);
        w.raw(&*s.masking_secret);
        w.raw(&*s.self_seed);
        w.len(s.peers.len());
        for (c, k) in &s.peers {
            w.u32(*c);
            put_keys(w, k);
        }
        let (masks, seeds): (Vec<_>, Vec<_>) = s
            .held
            .iter()
            .map(|(owner, mask_key, seed)| ((*owner, mask_key.clone()), (*owner, seed.clone())))
            .unzip();
        put_shares(w, &masks);
        put_shares(w, &seeds);
        w.u8(u8::from(s.answered.is_some()));
        if let Some(list) = &s.answered {
            w.len(list.len());
            list.iter().for_each(|&c| w.u32(c));
        }
    },
    |r| {
        let context = context(r)?;
        let id = client(r)?;
        let neighbours = clients(r)?;
        let threshold = r.index()?;
        let vector_len = r.index()?;
        if vector_len > MAX_VECTOR {
            return Err(r.invalid(format!("{vector_len} words, at most {MAX_VECTOR}")));
        }
        let stage = *STAGES
            .get(usize::from(r.u8()?))
            .ok_or_else(|| r.invalid("unknown stage"))?;
        let encryption_secret = secret(r)?;
        let masking_secret = secret(r)?;
        let self_seed = secret(r)?;
        let n = r.count(4 + 64)?;
        let peers = (0..n)
            .map(|_| Ok((client(r)?, keys(r)?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let masks = shares(r)?;
        let seeds = shares(r)?;
        if masks.len() != seeds.len() || masks.iter().zip(&seeds).any(|(a, b)| a.0 != b.0) {
            return Err(r.invalid("masking-key and self-seed shares name different owners"));
        }
        let answered = if r.bool()? { Some(clients(r)?) } else { None };
        Ok(Self {
            config: ClientConfig {
                context,
                id,
                neighbours,
                threshold,
                vector_len,
            },
            stage,
            encryption_secret,
            masking_secret,
            self_seed,
            peers,
            held: masks
                .into_iter()
                .zip(seeds)
                .map(|((owner, m), (_, s))| (owner, m, s))
                .collect(),
            answered,
        })
    }
);
