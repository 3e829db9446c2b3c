//! Mask expansion: a 32-byte seed becomes a pseudorandom vector over Z_{2^32} by AES-128 in
//! counter mode (key = seed[..16], initial counter block = seed[16..]).
//!
//! Masks are added or subtracted in place as the keystream is made, so a mask never exists
//! as a vector of its own: on CPUs with VAES-512 by `privopt_math::aes_ctr` (the keystream
//! stays in registers), elsewhere block by block through a small stack buffer. Any word range
//! can be produced on its own (the counter is seeked), which lets [`apply_all`] apply many
//! masks a cache-sized range at a time and the server split long vectors across threads.

use aes::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use privopt_math::aes_ctr::{AesCtrX16, Combine, GROUP_WORDS};
use zeroize::Zeroize;

type MaskCipher = ctr::Ctr64LE<aes::Aes128>;

/// Words per keystream block handled at once by the portable path (16 KiB of keystream).
const CHUNK_WORDS: usize = 4096;

/// Words [`apply_all`] applies every mask to before moving on: 64 KiB stays in the L2 cache,
/// and the per-mask set-up (key schedule, counter) is paid once per range.
const RANGE_WORDS: usize = 1 << 14;

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
        let Some(kernel) = AesCtrX16::detect() else {
            return self.apply_portable(out, first_word, sign);
        };
        // Words up to the next whole group and after the last one take the portable path.
        let head = ((GROUP_WORDS - first_word % GROUP_WORDS) % GROUP_WORDS).min(out.len());
        let (head_words, rest) = out.split_at_mut(head);
        self.apply_portable(head_words, first_word, sign);
        let (groups, tail) = rest.as_chunks_mut::<GROUP_WORDS>();
        let first_group = (first_word + head) / GROUP_WORDS;
        let (key, iv) = self.key_and_iv();
        let combine = match sign {
            Sign::Plus => Combine::Add,
            Sign::Minus => Combine::Subtract,
        };
        kernel.apply(key, iv, first_group as u64, groups, combine);
        let tail_first = first_word + head + groups.len() * GROUP_WORDS;
        self.apply_portable(tail, tail_first, sign);
    }

    fn key_and_iv(&self) -> (&[u8; 16], &[u8; 16]) {
        let (key, iv) = self
            .0
            .split_first_chunk::<16>()
            .unwrap_or_else(|| unreachable!());
        (
            key,
            iv.first_chunk::<16>().unwrap_or_else(|| unreachable!()),
        )
    }

    /// [`MaskSeed::apply`] through the `ctr` crate, for CPUs without VAES-512 and the words
    /// outside whole groups.
    fn apply_portable(&self, out: &mut [u32], first_word: usize, sign: Sign) {
        if out.is_empty() {
            return;
        }
        let (key, iv) = self.key_and_iv();
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

/// Applies many masks to `out` (words `first_word ..` of each), one cache-sized range at a
/// time: every mask passes over a range while it is in the L2 cache, rather than each mask
/// streaming the whole vector through memory.
pub fn apply_all(masks: &[(&MaskSeed, Sign)], out: &mut [u32], first_word: usize) {
    for (i, range) in out.chunks_mut(RANGE_WORDS).enumerate() {
        for (seed, sign) in masks {
            seed.apply(range, first_word + i * RANGE_WORDS, *sign);
        }
    }
}

/// Applies many masks to `out`, splitting the vector into ranges handled in parallel (every
/// range applies every mask, so the result does not depend on the thread count).
pub fn apply_all_parallel(masks: &[(MaskSeed, Sign)], out: &mut [u32]) {
    use rayon::prelude::*;
    const THREAD_WORDS: usize = 1 << 16;
    let masks: Vec<(&MaskSeed, Sign)> = masks.iter().map(|(seed, sign)| (seed, *sign)).collect();
    out.par_chunks_mut(THREAD_WORDS)
        .enumerate()
        .for_each(|(i, range)| apply_all(&masks, range, i * THREAD_WORDS));
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
    fn every_offset_and_length_gives_the_portable_mask() {
        // Heads and tails around whole groups, ranges inside one group, long runs.
        let seed = MaskSeed(std::array::from_fn(|i| (i * 37 + 11) as u8));
        let start: Vec<u32> = (0..9000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        for first in [0, 1, 7, 15, 16, 17, 4095, 4096, 4100] {
            for len in [0, 1, 3, 15, 16, 17, 64, 65, 200, 4096, 4900] {
                for sign in [Sign::Plus, Sign::Minus] {
                    let (mut fast, mut portable) = (start[..len].to_vec(), start[..len].to_vec());
                    seed.apply(&mut fast, first, sign);
                    seed.apply_portable(&mut portable, first, sign);
                    assert_eq!(fast, portable, "words {first}.. of length {len}");
                }
            }
        }
    }

    #[test]
    fn applying_all_at_once_is_applying_each() {
        let seeds: Vec<MaskSeed> = (0..5u8).map(|i| MaskSeed([i; 32])).collect();
        let masks: Vec<(&MaskSeed, Sign)> = seeds
            .iter()
            .enumerate()
            .map(|(i, s)| (s, if i % 2 == 0 { Sign::Plus } else { Sign::Minus }))
            .collect();
        let start: Vec<u32> = (0..40_001).collect();
        let mut together = start.clone();
        apply_all(&masks, &mut together, 3);
        let mut each = start;
        for (seed, sign) in &masks {
            seed.apply_portable(&mut each, 3, *sign);
        }
        assert_eq!(together, each);
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
