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

/// The keystream of one seed and stream as a random number generator: the same words, in
/// the same order, as `rand_chacha::ChaCha20Rng` seeded alike with `set_stream(stream)`, so
/// `rand`'s samplers draw the same values from either.
#[derive(Clone, Debug)]
pub struct Keystream {
    kernel: ChaCha20x16,
    key: [u32; 8],
    stream: u64,
    /// The first block of the next batch.
    counter: u64,
    words: [u32; BLOCKS * BLOCK_WORDS],
    /// The next unread word of `words`.
    pos: usize,
}

impl ChaCha20x16 {
    /// The keystream of `seed` (read as eight little-endian words, as `rand_chacha` reads
    /// it) and `stream`, from block 0.
    pub fn keystream(self, seed: &[u8; 32], stream: u64) -> Keystream {
        let mut key = [0u32; 8];
        for (k, bytes) in key.iter_mut().zip(seed.chunks_exact(4)) {
            *k = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        Keystream {
            kernel: self,
            key,
            stream,
            counter: 0,
            words: [0; BLOCKS * BLOCK_WORDS],
            pos: BLOCKS * BLOCK_WORDS,
        }
    }
}

// `#[inline]`: a key's seed expansion draws one word pair per coefficient from another crate.
impl rand::RngCore for Keystream {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        if self.pos == self.words.len() {
            self.kernel
                .blocks(&self.key, self.stream, self.counter, &mut self.words);
            self.counter = self.counter.wrapping_add(BLOCKS as u64);
            self.pos = 0;
        }
        self.pos += 1;
        self.words[self.pos - 1]
    }

    /// Two words, the first the low half (also across a batch boundary, as `rand_core`'s
    /// block generator does).
    #[inline]
    fn next_u64(&mut self) -> u64 {
        match self.words.get(self.pos..self.pos + 2) {
            Some(&[low, high]) => {
                self.pos += 2;
                u64::from(low) | (u64::from(high) << 32)
            }
            _ => u64::from(self.next_u32()) | (u64::from(self.next_u32()) << 32),
        }
    }

    /// Whole words, little-endian; the unused bytes of the last word are dropped.
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(4) {
            let word = self.next_u32().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
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
    fn the_keystream_draws_what_chacha20rng_draws() {
        let Some(kernel) = ChaCha20x16::detect() else {
            return;
        };
        let seed = [5u8; 32];
        let mut wide = kernel.keystream(&seed, 77);
        let mut reference = ChaCha20Rng::from_seed(seed);
        reference.set_stream(77);
        // Mixed widths, so that a u64 straddles a batch boundary (256 words) and a byte
        // fill ends inside a word.
        for step in 0..600 {
            match step % 3 {
                0 => assert_eq!(wide.next_u32(), reference.next_u32()),
                1 => assert_eq!(wide.next_u64(), reference.next_u64()),
                _ => {
                    let (mut a, mut b) = ([0u8; 7], [0u8; 7]);
                    wide.fill_bytes(&mut a);
                    reference.fill_bytes(&mut b);
                    assert_eq!(a, b);
                }
            }
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
