//! Mask expansion: a 32-byte seed becomes a pseudorandom vector over Z_{2^32} by AES-128 in
//! counter mode (key = seed[..16], initial counter block = seed[16..]).
//!
//! Masks are added or subtracted in place, block by block through a small stack buffer, so a
//! mask never exists as a vector of its own. Any word range can be produced on its own (the
//! counter is seeked), which lets the server split long vectors across threads.

use aes::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use zeroize::Zeroize;

type MaskCipher = ctr::Ctr64LE<aes::Aes128>;

/// Words per keystream block handled at once (16 KiB of keystream).
const CHUNK_WORDS: usize = 4096;

/// A 32-byte seed that expands to a mask; wiped on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct MaskSeed(pub(crate) [u8; 32]);

impl Drop for MaskSeed {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for MaskSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MaskSeed(..)")
    }
}

/// Whether a mask is added to or subtracted from a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sign {
    /// `out += mask`
    Plus,
    /// `out −= mask`
    Minus,
}

impl Sign {
    /// The opposite sign.
    pub fn flip(self) -> Self {
        match self {
            Sign::Plus => Sign::Minus,
            Sign::Minus => Sign::Plus,
        }
    }
}

impl MaskSeed {
    /// Adds (or subtracts) words `first_word .. first_word + out.len()` of this seed's mask to
    /// `out`, wrapping modulo 2^32.
    pub fn apply(&self, out: &mut [u32], first_word: usize, sign: Sign) {
        let (key, iv) = self.0.split_at(16);
        let mut cipher = MaskCipher::new(key.into(), iv.into());
        cipher.seek(first_word as u64 * 4);
        let mut buf = [0u8; CHUNK_WORDS * 4];
        for chunk in out.chunks_mut(CHUNK_WORDS) {
            let bytes = &mut buf[..chunk.len() * 4];
            bytes.fill(0);
            cipher.apply_keystream(bytes);
            let words = bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            match sign {
                Sign::Plus => chunk
                    .iter_mut()
                    .zip(words)
                    .for_each(|(o, w)| *o = o.wrapping_add(w)),
                Sign::Minus => chunk
                    .iter_mut()
                    .zip(words)
                    .for_each(|(o, w)| *o = o.wrapping_sub(w)),
            }
        }
        buf.zeroize();
    }
}

/// Applies many masks to `out`, splitting the vector into ranges handled in parallel (every
/// range applies every mask, so the result does not depend on the thread count).
pub fn apply_all_parallel(masks: &[(MaskSeed, Sign)], out: &mut [u32]) {
    use rayon::prelude::*;
    const RANGE_WORDS: usize = 1 << 16;
    out.par_chunks_mut(RANGE_WORDS)
        .enumerate()
        .for_each(|(i, range)| {
            for (seed, sign) in masks {
                seed.apply(range, i * RANGE_WORDS, *sign);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compose_to_the_whole_mask() {
        let seed = MaskSeed([5u8; 32]);
        let mut whole = vec![0u32; 10_000];
        seed.apply(&mut whole, 0, Sign::Plus);
        let mut pieces = vec![0u32; 10_000];
        seed.apply(&mut pieces[..4097], 0, Sign::Plus);
        seed.apply(&mut pieces[4097..], 4097, Sign::Plus);
        assert_eq!(whole, pieces);
        let mut par = vec![0u32; 200_000];
        apply_all_parallel(&[(seed.clone(), Sign::Plus)], &mut par);
        let mut seq = vec![0u32; 200_000];
        seed.apply(&mut seq, 0, Sign::Plus);
        assert_eq!(par, seq);
    }

    #[test]
    fn plus_then_minus_cancels_and_distinct_seeds_differ() {
        let mut v: Vec<u32> = (0..5000).collect();
        let a = MaskSeed([1u8; 32]);
        a.apply(&mut v, 0, Sign::Plus);
        assert_ne!(v[..10], (0..10).collect::<Vec<u32>>()[..]);
        a.apply(&mut v, 0, Sign::Minus);
        assert_eq!(v, (0..5000).collect::<Vec<u32>>());
        let (mut x, mut y) = (vec![0u32; 64], vec![0u32; 64]);
        MaskSeed([2u8; 32]).apply(&mut x, 0, Sign::Plus);
        let mut other = [2u8; 32];
        other[31] ^= 1;
        MaskSeed(other).apply(&mut y, 0, Sign::Plus);
        assert_ne!(x, y);
    }
}
