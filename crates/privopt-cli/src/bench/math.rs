//! The arithmetic suites: seed-tree streams and ChaCha20, the NTT backend.

use std::hint::black_box;

use anyhow::Result;
use privopt_math::SeedTree;
use rand::RngCore;

use super::Case;

pub(super) fn prg_suite() -> Result<Vec<Case>> {
    let seeds = SeedTree::new(7);
    let mut k = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut stream = seeds.stream("bench", &[]);
    Ok(vec![
        Case::new("prg/sha256-chacha20/derive_stream", move || {
            k += 1;
            black_box(seeds.stream("bench/derive", &[k, 0, 1]));
        }),
        Case::new("prg/chacha20-1MiB/fill", move || {
            stream.fill_bytes(&mut buf);
            black_box(&buf);
        }),
    ]
    .into_iter()
    .chain(aes_ctr_cases())
    .collect())
}

/// One SecAgg+ mask's keystream at d = 10^6 (4 MB of AES-128-CTR) added to a vector: through
/// the `ctr` crate (AES-NI, a stack buffer, then the add) and, where the CPU has VAES-512,
/// `privopt_math::aes_ctr` (the add in registers).
fn aes_ctr_cases() -> Vec<Case> {
    use aes::cipher::{KeyIvInit, StreamCipher};
    use privopt_math::aes_ctr::{AesCtrX16, Combine, GROUP_WORDS};

    const WORDS: usize = 1_000_000;
    let (key, iv) = ([3u8; 16], [9u8; 16]);
    let mut words = vec![0u32; WORDS];
    let mut buf = vec![0u8; 16 * 1024];
    let mut cases = vec![Case::new("prg/aes128-ctr-4MB-add/ctr-crate", move || {
        let mut cipher = ctr::Ctr64LE::<aes::Aes128>::new(&key.into(), &iv.into());
        for chunk in words.chunks_mut(buf.len() / 4) {
            let bytes = &mut buf[..chunk.len() * 4];
            bytes.fill(0);
            cipher.apply_keystream(bytes);
            for (w, b) in chunk.iter_mut().zip(bytes.chunks_exact(4)) {
                *w = w.wrapping_add(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            }
        }
        black_box(&words);
    })];
    if let Some(kernel) = AesCtrX16::detect() {
        let mut groups = vec![[0u32; GROUP_WORDS]; WORDS / GROUP_WORDS];
        cases.push(Case::new("prg/aes128-ctr-4MB-add/vaes512", move || {
            kernel.apply(&key, &iv, 0, &mut groups, Combine::Add);
            black_box(&groups);
        }));
    }
    cases
}

/// The NTT suite's prime sizes: below 2^51 (the IFMA path where the CPU has it), just above,
/// and the sizes the N16 bootstrapping preset's CtS, EvalMod and key-switching primes take.
const NTT_CASE_BITS: [i32; 6] = [30, 45, 50, 52, 58, 60];

pub(super) fn ntt_suite() -> Result<Vec<Case>> {
    use privopt_math::modarith::ntt_prime_near;
    use privopt_math::ntt::{FastNtt, Ntt};
    use std::rc::Rc;

    let n = 1usize << 16;
    let mut cases = Vec::new();
    for bits in NTT_CASE_BITS {
        // Just below 2^bits, so that 50 bits stays under IFMA's 2^51 and 52 bits above it.
        let q = ntt_prime_near(n, 2f64.powi(bits) * 0.9, &[])?;
        let ntt = Rc::new(FastNtt::new(n, q)?);
        let row = |salt: u64| -> Vec<u64> {
            (0..n as u64)
                .map(|i| (i.wrapping_mul(0x9e37_79b9) ^ salt) % q)
                .collect()
        };
        let name = |op: &str| format!("ntt/n{n}/q{bits}/{op}");
        let (t, mut a) = (Rc::clone(&ntt), row(1));
        cases.push(Case::new(name("forward"), move || {
            t.forward(black_box(&mut a))
        }));
        let (t, mut a) = (Rc::clone(&ntt), row(2));
        cases.push(Case::new(name("inverse"), move || {
            t.inverse(black_box(&mut a))
        }));
        let (mut acc, x, y) = (row(3), row(4), row(5));
        cases.push(Case::new(name("mul_acc"), move || {
            ntt.mul_acc(black_box(&mut acc), &x, &y)
        }));
    }
    Ok(cases)
}
