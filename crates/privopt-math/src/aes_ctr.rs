//! AES-128 in counter mode on VAES-512, sixteen blocks in flight, its keystream added to (or
//! subtracted from) 32-bit words as it is made.
//!
//! SecAgg+ masks are AES-128-CTR keystreams added to vectors of millions of words, a few dozen
//! per client, so the keystream's speed is the protocol's. The counter layout is
//! `ctr::Ctr64LE<aes::Aes128>`'s: the first eight bytes of the initial block are a
//! little-endian 64-bit counter that wraps, the last eight stay, and keystream word `w` is
//! bytes `4w..4w + 4` little-endian; the tests compare the two word for word. Nothing of the
//! keystream is written to memory: each block is added to its words in registers.
//! [`AesCtrX16::detect`] returns `None` without AVX-512F, AES-NI and VAES, for the caller's
//! portable path.
#![allow(unsafe_code)]

/// Words per group: four AES blocks, one 512-bit register.
pub const GROUP_WORDS: usize = 16;

/// Whether the keystream is added to the words or subtracted from them (modulo 2^32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// `out += keystream`
    Add,
    /// `out −= keystream`
    Subtract,
}

/// Proof that the CPU has AVX-512F, AES-NI and VAES; only [`AesCtrX16::detect`] makes one.
#[derive(Clone, Copy, Debug)]
pub struct AesCtrX16(());

impl AesCtrX16 {
    /// The kernel, if this CPU can run it (checked once; the standard library caches it).
    pub fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            (std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("aes")
                && std::is_x86_feature_detected!("vaes"))
            .then_some(Self(()))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// Combines keystream words `16·first_group ..` of AES-128-CTR under `key` from the
    /// initial counter block `iv` into `out`, group after group.
    pub fn apply(
        self,
        key: &[u8; 16],
        iv: &[u8; 16],
        first_group: u64,
        out: &mut [[u32; GROUP_WORDS]],
        combine: Combine,
    ) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `self` exists only where `detect` saw AVX-512F, AES-NI and VAES, the
        // features `x86::apply` is compiled for; it touches memory through `out` only.
        unsafe {
            x86::apply(key, iv, first_group, out, combine)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (key, iv, first_group, out, combine);
            unreachable!("AesCtrX16 is never made off x86-64")
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use pulp::cast;
    use zeroize::Zeroize;

    use super::{Combine, GROUP_WORDS};

    /// One step of the AES-128 key schedule, `assist` being `aeskeygenassist` of `key`.
    #[target_feature(enable = "aes")]
    fn next_round_key(key: __m128i, assist: __m128i) -> __m128i {
        let assist = _mm_shuffle_epi32::<0xff>(assist);
        let key = _mm_xor_si128(key, _mm_slli_si128::<4>(key));
        let key = _mm_xor_si128(key, _mm_slli_si128::<4>(key));
        let key = _mm_xor_si128(key, _mm_slli_si128::<4>(key));
        _mm_xor_si128(key, assist)
    }

    /// The eleven round keys of AES-128 (FIPS 197 §5.2).
    #[target_feature(enable = "aes")]
    fn round_keys(key: &[u8; 16]) -> [__m128i; 11] {
        let mut k = [cast::<[u8; 16], __m128i>(*key); 11];
        macro_rules! step {
            ($i:literal, $rcon:literal) => {
                k[$i] = next_round_key(k[$i - 1], _mm_aeskeygenassist_si128::<$rcon>(k[$i - 1]));
            };
        }
        step!(1, 0x01);
        step!(2, 0x02);
        step!(3, 0x04);
        step!(4, 0x08);
        step!(5, 0x10);
        step!(6, 0x20);
        step!(7, 0x40);
        step!(8, 0x80);
        step!(9, 0x1b);
        step!(10, 0x36);
        k
    }

    /// Encrypts the counter blocks in `blocks` (four per register) with `rk`.
    #[target_feature(enable = "avx512f,aes,vaes")]
    fn encrypt<const R: usize>(blocks: &mut [__m512i; R], rk: &[__m512i; 11]) {
        for b in blocks.iter_mut() {
            *b = _mm512_xor_si512(*b, rk[0]);
        }
        for k in &rk[1..10] {
            for b in blocks.iter_mut() {
                *b = _mm512_aesenc_epi128(*b, *k);
            }
        }
        for b in blocks.iter_mut() {
            *b = _mm512_aesenclast_epi128(*b, rk[10]);
        }
    }

    #[target_feature(enable = "avx512f")]
    fn combine_group(out: &mut [u32; GROUP_WORDS], keystream: __m512i, combine: Combine) {
        let words: __m512i = cast(*out);
        *out = cast(match combine {
            Combine::Add => _mm512_add_epi32(words, keystream),
            Combine::Subtract => _mm512_sub_epi32(words, keystream),
        });
    }

    #[target_feature(enable = "avx512f,aes,vaes")]
    pub(super) fn apply(
        key: &[u8; 16],
        iv: &[u8; 16],
        first_group: u64,
        out: &mut [[u32; GROUP_WORDS]],
        combine: Combine,
    ) {
        // Key material: the copy in memory is wiped below (register copies cannot be).
        let mut schedule: [[u8; 16]; 11] = cast(round_keys(key));
        let rk: [__m512i; 11] = std::array::from_fn(|i| _mm512_broadcast_i32x4(cast(schedule[i])));
        // Lanes of 64 bits: (counter, nonce) per block, four blocks per register; the
        // counter lanes wrap modulo 2^64 as `Ctr64LE`'s do.
        let lo = u64::from_le_bytes(std::array::from_fn(|i| iv[i]));
        let hi = u64::from_ne_bytes(std::array::from_fn(|i| iv[8 + i]));
        let start = lo.wrapping_add(first_group.wrapping_mul(4));
        let lanes: [u64; 8] = std::array::from_fn(|l| {
            if l % 2 == 0 {
                start.wrapping_add(l as u64 / 2)
            } else {
                hi
            }
        });
        let mut counter: __m512i = cast(lanes);
        let step = |n: u64| -> __m512i { cast([n, 0, n, 0, n, 0, n, 0]) };
        let (four, eight, twelve, sixteen) = (step(4), step(8), step(12), step(16));

        let mut quads = out.chunks_exact_mut(4);
        for quad in &mut quads {
            let mut blocks = [
                counter,
                _mm512_add_epi64(counter, four),
                _mm512_add_epi64(counter, eight),
                _mm512_add_epi64(counter, twelve),
            ];
            counter = _mm512_add_epi64(counter, sixteen);
            encrypt(&mut blocks, &rk);
            for (group, ks) in quad.iter_mut().zip(blocks) {
                combine_group(group, ks, combine);
            }
        }
        for group in quads.into_remainder() {
            let mut blocks = [counter];
            counter = _mm512_add_epi64(counter, four);
            encrypt(&mut blocks, &rk);
            combine_group(group, blocks[0], combine);
        }
        schedule.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
    use rand::{Rng, SeedableRng};

    type Reference = ctr::Ctr64LE<aes::Aes128>;

    /// Keystream words `first_word .. first_word + n` from the `ctr` crate.
    fn reference(key: &[u8; 16], iv: &[u8; 16], first_word: u64, n: usize) -> Vec<u32> {
        let mut cipher = Reference::new(key.into(), iv.into());
        cipher.seek(first_word * 4);
        let mut bytes = vec![0u8; n * 4];
        cipher.apply_keystream(&mut bytes);
        bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    }

    #[test]
    fn the_keystream_is_ctr64le_aes128s() {
        let Some(kernel) = AesCtrX16::detect() else {
            return;
        };
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        // Group counts that exercise the four-register loop, its remainder, and both; a
        // counter that wraps past 2^64 inside a run.
        for (groups, first_group, near_wrap) in [
            (1, 0, false),
            (3, 5, false),
            (4, 0, false),
            (9, 1, false),
            (37, 3, true),
        ] {
            let key: [u8; 16] = rng.random();
            let mut iv: [u8; 16] = rng.random();
            if near_wrap {
                iv[..8].copy_from_slice(&(u64::MAX - 2 - 4 * first_group).to_le_bytes());
            }
            let start: Vec<u32> = (0..groups * GROUP_WORDS).map(|_| rng.random()).collect();
            let ks = reference(&key, &iv, first_group * GROUP_WORDS as u64, start.len());
            for combine in [Combine::Add, Combine::Subtract] {
                let mut out: Vec<[u32; GROUP_WORDS]> = start
                    .chunks_exact(GROUP_WORDS)
                    .map(|c| c.try_into().unwrap())
                    .collect();
                kernel.apply(&key, &iv, first_group, &mut out, combine);
                let want: Vec<u32> = start
                    .iter()
                    .zip(&ks)
                    .map(|(s, k)| match combine {
                        Combine::Add => s.wrapping_add(*k),
                        Combine::Subtract => s.wrapping_sub(*k),
                    })
                    .collect();
                assert_eq!(out.concat(), want, "{groups} groups from {first_group}");
            }
        }
    }
}
