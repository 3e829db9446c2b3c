//! xMK-CKKS end to end: correctness of 10-party sums, the noise variance against the
//! analytic product rule, and every rejection.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_ckks::encoding::SlotEncoder;
use privopt_ckks::multiparty::{
    Ciphertext, CollectivePublicKey, CommonPoly, DecryptionShare, Party, fuse,
};
use privopt_ckks::{CkksError, CkksParams, CkksParamsBuilder};
use privopt_math::sample::secret_rng;
use rand_chacha::ChaCha20Rng;

const N_PARTIES: u32 = 10;

struct Setup {
    parties: Vec<Party>,
    key: CollectivePublicKey,
    rng: ChaCha20Rng,
}

fn setup(params: Arc<CkksParams>, seed: u64, session: u64) -> Setup {
    let mut rng = secret_rng(Some(seed));
    let crs = CommonPoly::from_seed(&params, [7u8; 32]);
    let parties: Vec<Party> = (0..N_PARTIES)
        .map(|i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    let shares: Vec<_> = parties
        .iter()
        .map(|p| p.public_key_share(session))
        .collect();
    let ids: Vec<u32> = (0..N_PARTIES).collect();
    let key = CollectivePublicKey::aggregate(&params, &crs, &ids, session, &shares).unwrap();
    Setup { parties, key, rng }
}

fn shares_for(s: &mut Setup, ct: &Ciphertext) -> Vec<DecryptionShare> {
    s.parties
        .iter()
        .map(|p| p.partial_decrypt(ct, &mut s.rng).unwrap())
        .collect()
}

#[test]
fn ten_encrypted_scalars_decrypt_to_their_sum() {
    for params in [
        CkksParams::paper_n4096().unwrap(),
        CkksParams::paper_n8192().unwrap(),
    ] {
        let n = params.n();
        let mut s = setup(params, 1, 3);
        let xs: Vec<f64> = (0..N_PARTIES).map(|i| (i as f64 - 4.5) * 0.731).collect();
        let cts: Vec<Ciphertext> = xs
            .iter()
            .map(|&x| s.key.encrypt_scalar(x, &mut s.rng).unwrap())
            .collect();
        let sum = Ciphertext::sum(&cts).unwrap();
        assert_eq!(sum.count(), N_PARTIES);
        let shares = shares_for(&mut s, &sum);
        let got = fuse(&sum, &shares).unwrap().scalar().unwrap();
        let want: f64 = xs.iter().sum();
        eprintln!(
            "n = {n}, 10 parties: scalar error {:.3e}",
            (got - want).abs()
        );
        // Smudging dominates: sd ≈ √10 · 2^20 / 2^40 ≈ 3.0e-6; 7 sd.
        assert!((got - want).abs() < 7.0 * 3.02e-6, "{got} vs {want}");
    }
}

#[test]
fn ten_encrypted_vectors_decrypt_to_their_sum() {
    let params = CkksParams::paper_n4096().unwrap();
    let enc = SlotEncoder::new(params.n()).unwrap();
    let mut s = setup(params, 2, 0);
    let slots = enc.slots();
    let vecs: Vec<Vec<f64>> = (0..N_PARTIES)
        .map(|i| {
            (0..slots)
                .map(|j| ((i as usize * 31 + j) as f64 * 0.01).sin())
                .collect()
        })
        .collect();
    let cts: Vec<Ciphertext> = vecs
        .iter()
        .map(|v| s.key.encrypt_vector(&enc, v, &mut s.rng).unwrap())
        .collect();
    let sum = Ciphertext::sum(&cts).unwrap();
    let shares = shares_for(&mut s, &sum);
    let got = fuse(&sum, &shares).unwrap().vector(&enc).unwrap();
    // Per slot the coefficient noise adds up over n coefficients: sd ≈ √(n/2) · 3.0e-6 ≈ 1.4e-4.
    let sd = (2048f64).sqrt() * 3.02e-6;
    let rms = ((0..slots)
        .map(|j| (got[j] - vecs.iter().map(|v| v[j]).sum::<f64>()).powi(2))
        .sum::<f64>()
        / slots as f64)
        .sqrt();
    eprintln!("n = 4096, 10 parties: slot error rms {rms:.3e} (predicted {sd:.3e})");
    for j in 0..slots {
        let want: f64 = vecs.iter().map(|v| v[j]).sum();
        assert!(
            (got[j] - want).abs() < 7.0 * sd,
            "slot {j}: {} vs {want}",
            got[j]
        );
    }
}

/// Per-coefficient variance of the fused error `V·ΣE + ΣE0 + S·ΣE1 + ΣE*` by the ring product
/// rule (paper App. B, eq. (22), per coefficient): `n σ_p² σ_r²` for a product.
fn analytic_variance(params: &CkksParams, parties: f64) -> f64 {
    let n = params.n() as f64;
    let e2 = params.error().sigma().powi(2);
    let v2 = 2.0 / 3.0; // ternary encryption randomness
    let s2 = params.secret().variance(params.n());
    let smudge2 = 2f64.powf(2.0 * params.smudging_log2()) + 1.0 / 12.0; // + rounding
    n * (parties * v2) * (parties * e2)
        + parties * e2
        + n * (parties * s2) * (parties * e2)
        + parties * smudge2
}

fn measured_variances(params: Arc<CkksParams>, trials: u64) -> Vec<f64> {
    (0..trials)
        .map(|t| {
            let mut s = setup(Arc::clone(&params), 100 + t, t);
            let n = params.n();
            // Random integer messages, so the check is on exact error, not on rounding.
            let msgs: Vec<Vec<i64>> = (0..N_PARTIES as i64)
                .map(|i| {
                    (0..n as i64)
                        .map(|j| (i * 7919 + j * 104_729) % 1_000_003 - 500_000)
                        .collect()
                })
                .collect();
            let cts: Vec<Ciphertext> = msgs
                .iter()
                .map(|m| s.key.encrypt(m, &mut s.rng).unwrap())
                .collect();
            let sum = Ciphertext::sum(&cts).unwrap();
            let shares = shares_for(&mut s, &sum);
            let coeffs = fuse(&sum, &shares).unwrap().integer_coefficients().unwrap();
            let sq: f64 = (0..n)
                .map(|j| {
                    let want: i128 = msgs.iter().map(|m| i128::from(m[j])).sum();
                    let e = (coeffs[j] - want) as f64;
                    e * e
                })
                .sum();
            sq / n as f64
        })
        .collect()
}

fn assert_variance_matches(params: Arc<CkksParams>, trials: u64) {
    let analytic = analytic_variance(&params, f64::from(N_PARTIES));
    let v = measured_variances(Arc::clone(&params), trials);
    let t = v.len() as f64;
    let mean = v.iter().sum::<f64>() / t;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (t - 1.0)).sqrt();
    // The mean of T independent per-trial variances has standard error sd/√T; allow 5 of them
    // plus 1% for the discrete Gaussian's variance differing from σ² in the last digits.
    let tol = 5.0 * sd / t.sqrt() + 0.01 * analytic;
    eprintln!(
        "n = {}, smudging 2^{}: measured {mean:.5e} ± {:.2e} (se), analytic {analytic:.5e}, tolerance {tol:.2e}",
        params.n(),
        params.smudging_log2(),
        sd / t.sqrt()
    );
    assert!(
        (mean - analytic).abs() < tol,
        "smudging 2^{}: measured {mean:.4e} vs analytic {analytic:.4e} (tolerance {tol:.3e})",
        params.smudging_log2()
    );
}

#[test]
fn noise_variance_matches_the_product_rule() {
    // Small smudging, so the product terms dominate and are what is checked.
    let p = CkksParamsBuilder::new(4096, &[37, 36, 36])
        .smudging_log2(3.0)
        .insecure_for_testing(true)
        .build()
        .unwrap();
    assert_variance_matches(p, 30);
    // Default smudging: the flooding term dominates.
    assert_variance_matches(CkksParams::paper_n4096().unwrap(), 30);
}

#[test]
fn rejections_are_specific() {
    let params = CkksParams::paper_n4096().unwrap();
    let mut s = setup(params.clone(), 5, 9);
    let ct = Ciphertext::sum(&[
        s.key.encrypt_scalar(1.0, &mut s.rng).unwrap(),
        s.key.encrypt_scalar(2.0, &mut s.rng).unwrap(),
    ])
    .unwrap();
    let mut shares = shares_for(&mut s, &ct);

    // A missing party's share.
    let last = shares.pop().unwrap();
    assert_eq!(
        fuse(&ct, &shares).unwrap_err(),
        CkksError::MissingShare { party: 9 }
    );
    // A duplicated share.
    shares.push(shares[3].clone());
    assert_eq!(
        fuse(&ct, &shares).unwrap_err(),
        CkksError::DuplicateShare { party: 3 }
    );
    shares.pop();
    shares.push(last);
    assert!((fuse(&ct, &shares).unwrap().scalar().unwrap() - 3.0).abs() < 1e-4);

    // A share made for another ciphertext (same session, same key).
    let other = s.key.encrypt_scalar(5.0, &mut s.rng).unwrap();
    let foreign = s.parties[4].partial_decrypt(&other, &mut s.rng).unwrap();
    let mut mixed = shares.clone();
    mixed[4] = foreign;
    assert_eq!(
        fuse(&ct, &mixed).unwrap_err(),
        CkksError::WrongBinding {
            party: 4,
            what: "ciphertext"
        }
    );

    // A share from another session (round) of the protocol.
    let mut s2 = setup(params.clone(), 5, 10);
    let ct2 = s2.key.encrypt_scalar(1.0, &mut s2.rng).unwrap();
    let stale = s2.parties[2].partial_decrypt(&ct2, &mut s2.rng).unwrap();
    let mut mixed = shares.clone();
    mixed[2] = stale;
    assert_eq!(
        fuse(&ct, &mixed).unwrap_err(),
        CkksError::WrongSession {
            party: 2,
            got: 10,
            expected: 9
        }
    );

    // Key shares: missing, unknown party, wrong common polynomial.
    let crs = CommonPoly::from_seed(&params, [7u8; 32]);
    let ids: Vec<u32> = (0..N_PARTIES).collect();
    let key_shares: Vec<_> = s.parties.iter().map(|p| p.public_key_share(9)).collect();
    assert_eq!(
        CollectivePublicKey::aggregate(&params, &crs, &ids, 9, &key_shares[1..]).unwrap_err(),
        CkksError::MissingShare { party: 0 }
    );
    assert_eq!(
        CollectivePublicKey::aggregate(&params, &crs, &ids[..9], 9, &key_shares).unwrap_err(),
        CkksError::UnknownParty { party: 9 }
    );
    let other_crs = CommonPoly::from_seed(&params, [8u8; 32]);
    assert_eq!(
        CollectivePublicKey::aggregate(&params, &other_crs, &ids, 9, &key_shares).unwrap_err(),
        CkksError::WrongBinding {
            party: 0,
            what: "common polynomial"
        }
    );

    // Ciphertexts of different sessions do not add.
    assert!(matches!(
        Ciphertext::sum(&[ct.clone(), ct2]),
        Err(CkksError::Mismatch(_))
    ));
    // A party outside the key cannot make a decryption share for it.
    let outsider = Party::generate(77, &params, &crs, &mut s.rng);
    assert_eq!(
        outsider.partial_decrypt(&ct, &mut s.rng).unwrap_err(),
        CkksError::UnknownParty { party: 77 }
    );
}

#[test]
fn secret_keys_never_print() {
    let params = CkksParams::paper_n4096().unwrap();
    let s = setup(params, 6, 0);
    let text = format!("{:?}", s.parties[0]);
    assert!(
        text.contains("SecretKey(<redacted>)"),
        "{}",
        &text[..200.min(text.len())]
    );
}

#[test]
fn wire_round_trips_and_rejects_bad_bytes() {
    use privopt_ckks::multiparty::PublicKeyShare;
    let params = CkksParams::paper_n4096().unwrap();
    let mut s = setup(params.clone(), 11, 4);
    let ct = s.key.encrypt_scalar(0.25, &mut s.rng).unwrap();
    let shares = shares_for(&mut s, &ct);

    // Round trips: the decoded messages decrypt like the originals.
    let ct_bytes = ct.to_bytes();
    let ct2 = Ciphertext::from_bytes(&params, &ct_bytes).unwrap();
    assert_eq!(ct2.digest(), ct.digest());
    let decoded: Vec<DecryptionShare> = shares
        .iter()
        .map(|d| DecryptionShare::from_bytes(&params, &d.to_bytes(&params)).unwrap())
        .collect();
    assert_eq!(decoded, shares);
    assert!((fuse(&ct2, &decoded).unwrap().scalar().unwrap() - 0.25).abs() < 1e-4);

    let share_bytes = shares[0].to_bytes(&params);
    let malformed = |r: Result<DecryptionShare, CkksError>| match r {
        Err(CkksError::Malformed { reason, .. }) => reason,
        other => panic!("expected Malformed, got {other:?}"),
    };
    // Truncated and oversized.
    assert!(
        malformed(DecryptionShare::from_bytes(
            &params,
            &share_bytes[..share_bytes.len() - 1]
        ))
        .starts_with("truncated")
    );
    let mut longer = share_bytes.clone();
    longer.push(0);
    assert!(malformed(DecryptionShare::from_bytes(&params, &longer)).starts_with("oversized"));
    assert!(malformed(DecryptionShare::from_bytes(&params, &[])).starts_with("truncated"));
    // Wrong kind: a decryption share is not a public-key share.
    assert!(matches!(
        PublicKeyShare::from_bytes(&params, &share_bytes),
        Err(CkksError::Malformed { .. })
    ));
    // Other parameters.
    let other = CkksParams::paper_n8192().unwrap();
    assert!(DecryptionShare::from_bytes(&other, &share_bytes).is_err());
    let mut other_fp = share_bytes.clone();
    other_fp[10] ^= 1;
    assert!(malformed(DecryptionShare::from_bytes(&params, &other_fp)).contains("fingerprint"));
    // A residue not below its prime.
    let mut big = share_bytes.clone();
    let at = big.len() - 8;
    big[at..].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(malformed(DecryptionShare::from_bytes(&params, &big)).contains("not below"));
    // Bad magic.
    let mut magic = share_bytes.clone();
    magic[0] = b'X';
    assert_eq!(
        malformed(DecryptionShare::from_bytes(&params, &magic)),
        "bad magic"
    );
    // Reserved header bytes (they were never checked).
    for at in [6, 7] {
        let mut reserved = share_bytes.clone();
        reserved[at] = 1;
        assert_eq!(
            malformed(DecryptionShare::from_bytes(&params, &reserved)),
            "reserved header bytes are not zero"
        );
    }

    // Ciphertexts: truncated, oversized, absurd member count.
    assert!(Ciphertext::from_bytes(&params, &ct_bytes[..ct_bytes.len() - 3]).is_err());
    let mut longer = ct_bytes.clone();
    longer.extend_from_slice(&[0; 8]);
    assert!(Ciphertext::from_bytes(&params, &longer).is_err());
    let mut absurd = ct_bytes.clone();
    absurd[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Ciphertext::from_bytes(&params, &absurd).is_err());
}

#[test]
fn a_saved_party_decrypts_and_shares_keys_as_the_original() {
    let params = CkksParams::paper_n4096().unwrap();
    let mut s = setup(params.clone(), 12, 5);
    let saved = s.parties[3].to_bytes();
    let restored = Party::from_bytes(&params, &saved).unwrap();
    assert_eq!(restored.id(), 3);
    assert_eq!(
        restored.public_key_share(5).to_bytes(&params),
        s.parties[3].public_key_share(5).to_bytes(&params)
    );
    s.parties[3] = restored;
    let ct = s.key.encrypt_scalar(-0.5, &mut s.rng).unwrap();
    let shares = shares_for(&mut s, &ct);
    assert!((fuse(&ct, &shares).unwrap().scalar().unwrap() + 0.5).abs() < 1e-4);
    // Damaged, cut or foreign bytes are refused.
    assert!(Party::from_bytes(&params, &saved[..saved.len() - 1]).is_err());
    let mut big = saved.clone();
    let at = big.len() - 8;
    big[at..].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Party::from_bytes(&params, &big).is_err());
    let other = CkksParams::paper_n8192().unwrap();
    assert!(Party::from_bytes(&other, &saved).is_err());
    assert!(Party::from_bytes(&params, &ct.to_bytes()).is_err());
}
