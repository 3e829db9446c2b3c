//! ChaCha20 keystream sixteen blocks at a time on AVX-512, one block per 32-bit lane.
//!
//! Seeded key halves are expanded at every use (millions of uniform words per compact key
//! product), where generating one block at a time (`rand_chacha`'s path) is most of the
//! cost. The stream is the one `rand_chacha::ChaCha20Rng` gives for the same seed and stream
//! (the original layout: a 64-bit block counter in words 12–13, the 64-bit stream in words
//! 14–15), so a key expands to the same words either way; the tests compare the two.
//! [`ChaCha20x16::detect`] returns `None` without AVX-512, for the caller's scalar path.

#[cfg(target_arch = "x86_64")]
use pulp::cast;

#[cfg(target_arch = "x86_64")]
pulp::simd_type! {
    struct V4F {
        pub avx512f: "avx512f",
    }
}

/// Blocks per call.
pub const BLOCKS: usize = 16;

/// Words per block.
pub const BLOCK_WORDS: usize = 16;

/// "expand 32-byte k".
const CONSTANTS: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

/// Proof that the CPU has AVX-512F.
#[derive(Clone, Copy, Debug)]
pub struct ChaCha20x16 {
    #[cfg(target_arch = "x86_64")]
    simd: V4F,
}

impl ChaCha20x16 {
    /// The kernel, if this CPU can run it.
    pub fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            V4F::try_new().map(|simd| Self { simd })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// Keystream blocks `counter, counter + 1, …, counter + 15` of `key` (the seed's eight
    /// little-endian words) and `stream`, block after block: word `w` of block `b` lands in
    /// `out[16·b + w]`.
    pub fn blocks(self, key: &[u32; 8], stream: u64, counter: u64, out: &mut [u32; 256]) {
        #[cfg(target_arch = "x86_64")]
        {
            let simd = self.simd;
            simd.vectorize(
                #[inline(always)]
                || sixteen_blocks(simd, key, stream, counter, out),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (key, stream, counter, out);
            unreachable!("ChaCha20x16 is only detected on x86_64");
        }
    }
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::__m512i;

/// The rounds, the feed-forward and the transpose into block order. (A named function, not
/// a closure: only `#[inline(always)]` code is compiled with the caller's target features.)
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn sixteen_blocks(simd: V4F, key: &[u32; 8], stream: u64, counter: u64, out: &mut [u32; 256]) {
    let f = simd.avx512f;
    let splat = |w: u32| f._mm512_set1_epi32(w as i32);
    let lanes = |word: fn(u64) -> u32| -> __m512i {
        let words: [u32; 16] = std::array::from_fn(|l| word(counter.wrapping_add(l as u64)));
        cast(words)
    };
    let mut init = [f._mm512_setzero_si512(); 16];
    for (x, &c) in init.iter_mut().zip(&CONSTANTS) {
        *x = splat(c);
    }
    for (x, &k) in init[4..12].iter_mut().zip(key) {
        *x = splat(k);
    }
    init[12] = lanes(|c| c as u32);
    init[13] = lanes(|c| (c >> 32) as u32);
    init[14] = splat(stream as u32);
    init[15] = splat((stream >> 32) as u32);
    let mut x = init;
    for _ in 0..10 {
        for (a, b, c, d) in [(0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)] {
            quarter_round(simd, &mut x, a, b, c, d);
        }
        for (a, b, c, d) in [(0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)] {
            quarter_round(simd, &mut x, a, b, c, d);
        }
    }
    for (w, (x, i)) in x.iter().zip(&init).enumerate() {
        let words: [u32; 16] = cast(f._mm512_add_epi32(*x, *i));
        for (b, &v) in words.iter().enumerate() {
            out[BLOCK_WORDS * b + w] = v;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn quarter_round(simd: V4F, x: &mut [__m512i; 16], a: usize, b: usize, c: usize, d: usize) {
    let f = simd.avx512f;
    x[a] = f._mm512_add_epi32(x[a], x[b]);
    x[d] = f._mm512_rol_epi32::<16>(f._mm512_xor_si512(x[d], x[a]));
    x[c] = f._mm512_add_epi32(x[c], x[d]);
    x[b] = f._mm512_rol_epi32::<12>(f._mm512_xor_si512(x[b], x[c]));
    x[a] = f._mm512_add_epi32(x[a], x[b]);
    x[d] = f._mm512_rol_epi32::<8>(f._mm512_xor_si512(x[d], x[a]));
    x[c] = f._mm512_add_epi32(x[c], x[d]);
    x[b] = f._mm512_rol_epi32::<7>(f._mm512_xor_si512(x[b], x[c]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn sixteen_blocks_are_rand_chachas_stream() {
        let Some(kernel) = ChaCha20x16::detect() else {
            eprintln!("no AVX-512 on this CPU: nothing to compare");
            return;
        };
        let mut seeds = ChaCha20Rng::seed_from_u64(7);
        for (stream, counter) in [(0u64, 0u64), (5 << 32 | 17, 0), (u64::MAX, 16), (3, 48)] {
            let mut seed = [0u8; 32];
            seeds.fill_bytes(&mut seed);
            let key: [u32; 8] = std::array::from_fn(|i| {
                u32::from_le_bytes(seed[4 * i..4 * i + 4].try_into().unwrap())
            });
            let mut reference = ChaCha20Rng::from_seed(seed);
            reference.set_stream(stream);
            reference.set_word_pos(u128::from(counter) * BLOCK_WORDS as u128);
            let want: Vec<u32> = (0..BLOCKS * BLOCK_WORDS)
                .map(|_| reference.next_u32())
                .collect();
            let mut got = [0u32; 256];
            kernel.blocks(&key, stream, counter, &mut got);
            assert_eq!(&got[..], &want[..], "stream {stream}, counter {counter}");
        }
    }

    #[test]
    fn the_counter_carries_into_its_high_word() {
        let Some(kernel) = ChaCha20x16::detect() else {
            return;
        };
        let seed = [9u8; 32];
        let key: [u32; 8] = std::array::from_fn(|_| u32::from_le_bytes([9; 4]));
        let counter = (1u64 << 32) - 8;
        let mut reference = ChaCha20Rng::from_seed(seed);
        reference.set_stream(1);
        reference.set_word_pos(u128::from(counter) * BLOCK_WORDS as u128);
        let want: Vec<u32> = (0..BLOCKS * BLOCK_WORDS)
            .map(|_| reference.next_u32())
            .collect();
        let mut got = [0u32; 256];
        kernel.blocks(&key, 1, counter, &mut got);
        assert_eq!(&got[..], &want[..]);
    }
}
