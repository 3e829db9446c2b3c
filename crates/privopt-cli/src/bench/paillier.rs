//! The Paillier suite.

use std::hint::black_box;

use anyhow::Result;

use super::Case;

pub(super) fn paillier_suite() -> Result<Vec<Case>> {
    use std::rc::Rc;

    use privopt_paillier::{BigInt as Integer, KeyPair};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// Ciphertexts per batch in the two-thread decryption throughput case.
    const BATCH: usize = 32;

    let mut cases = Vec::new();
    for bits in [2048u32, 3072] {
        let name = |op: &str| format!("paillier/{bits}/{op}");
        let mut rng = ChaCha20Rng::seed_from_u64(u64::from(bits));
        let kp = Rc::new(KeyPair::generate(bits, &mut rng)?);
        let m = Integer::from(-123_456_789i64);
        let c = kp.public.encrypt(&m, &mut rng)?;
        let c2 = kp.public.encrypt(&Integer::from(42), &mut rng)?;
        let obf = kp.public.obfuscator_djn(&mut rng);

        let mut r = ChaCha20Rng::seed_from_u64(1);
        cases.push(Case::new(name("keygen"), move || {
            black_box(KeyPair::generate(bits, &mut r).ok());
        }));
        let (k, mm, mut r) = (Rc::clone(&kp), m.clone(), ChaCha20Rng::seed_from_u64(2));
        cases.push(Case::new(name("encrypt"), move || {
            black_box(k.public.encrypt(&mm, &mut r).ok());
        }));
        let (k, mm, mut r) = (Rc::clone(&kp), m.clone(), ChaCha20Rng::seed_from_u64(3));
        cases.push(Case::new(name("encrypt_owner"), move || {
            black_box(k.encrypt_owner(&mm, &mut r).ok());
        }));
        let (k, mm, mut r) = (Rc::clone(&kp), m.clone(), ChaCha20Rng::seed_from_u64(4));
        cases.push(Case::new(name("encrypt_textbook"), move || {
            black_box(k.public.encrypt_textbook(&mm, &mut r).ok());
        }));
        let (k, mm) = (Rc::clone(&kp), m.clone());
        cases.push(Case::new(name("encrypt_online"), move || {
            black_box(k.public.encrypt_with(&mm, &obf).ok());
        }));
        let (k, cc) = (Rc::clone(&kp), c.clone());
        cases.push(Case::new(name("decrypt"), move || {
            black_box(k.decrypt(&cc));
        }));
        let (k, cc) = (Rc::clone(&kp), c.clone());
        cases.push(Case::new(name("decrypt_2threads"), move || {
            black_box(k.decrypt_parallel(&cc));
        }));
        let batch: Vec<_> = (0..BATCH).map(|_| c.clone()).collect();
        let k = Rc::clone(&kp);
        cases.push(Case::new(name("decrypt_batch32_2threads"), move || {
            // A batch of 32 split over both cores: divide by 32 for throughput per ciphertext.
            let (a, b) = batch.split_at(BATCH / 2);
            let key: &KeyPair = &k;
            std::thread::scope(|s| {
                let h = s.spawn(|| a.iter().for_each(|x| drop(black_box(key.decrypt(x)))));
                b.iter().for_each(|x| drop(black_box(key.decrypt(x))));
                black_box(h.join().ok());
            });
        }));
        let (k, a, b) = (Rc::clone(&kp), c.clone(), c2.clone());
        cases.push(Case::new(name("add"), move || {
            black_box(k.public.add(&a, &b));
        }));
        for (label, scalar) in [
            ("mul16", Integer::from(-40_000i32)),
            ("mul64", Integer::from(-0x7edc_ba98_7654_3210i64)),
        ] {
            let (k, a) = (Rc::clone(&kp), c.clone());
            cases.push(Case::new(name(label), move || {
                black_box(k.public.mul_scalar(&a, &scalar));
            }));
        }
    }
    Ok(cases)
}
