//! t-out-of-N xMK-CKKS: any t members decrypt what all N encrypted to, fewer cannot, each
//! member answers once per ciphertext, and every malformed share or set is refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_ckks::multiparty::{
    ActiveSet, Ciphertext, CollectivePublicKey, Committee, CommonPoly, DecryptionShare, Party,
    ThresholdParty, fuse, fuse_threshold,
};
use privopt_ckks::{CkksError, CkksParams};
use privopt_math::sample::secret_rng;
use rand_chacha::ChaCha20Rng;

const N: u32 = 10;
const T: usize = 7;

struct Setup {
    parties: Vec<Party>,
    members: Vec<ThresholdParty>,
    committee: Committee,
    key: CollectivePublicKey,
    rng: ChaCha20Rng,
}

fn setup(params: Arc<CkksParams>, seed: u64) -> Setup {
    let session = 4;
    let mut rng = secret_rng(Some(seed));
    let crs = CommonPoly::from_seed(&params, [9u8; 32]);
    let ids: Vec<u32> = (0..N).collect();
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    let pk: Vec<_> = parties
        .iter()
        .map(|p| p.public_key_share(session))
        .collect();
    let key = CollectivePublicKey::aggregate(&params, &crs, &ids, session, &pk).unwrap();
    let committee = Committee::new(T, &ids).unwrap();
    // Every party deals; member j keeps the shares addressed to it.
    let mut inbox: Vec<Vec<_>> = (0..N).map(|_| Vec::new()).collect();
    for p in &parties {
        for share in p.deal(&committee, session, &mut rng).unwrap() {
            inbox[share.to() as usize].push(share);
        }
    }
    let members = parties
        .iter()
        .zip(&inbox)
        .map(|(p, shares)| ThresholdParty::from_shares(p, &committee, session, shares).unwrap())
        .collect();
    Setup {
        parties,
        members,
        committee,
        key,
        rng,
    }
}

fn encrypted_sum(s: &mut Setup, xs: &[f64]) -> Ciphertext {
    let cts: Vec<Ciphertext> = xs
        .iter()
        .map(|&x| s.key.encrypt_scalar(x, &mut s.rng).unwrap())
        .collect();
    Ciphertext::sum(&cts).unwrap()
}

fn ask(s: &mut Setup, ct: &Ciphertext, active: &ActiveSet) -> Vec<DecryptionShare> {
    let rng = &mut s.rng;
    s.members
        .iter_mut()
        .filter(|m| active.members().contains(&m.id()))
        .map(|m| m.partial_decrypt(ct, active, rng).unwrap())
        .collect()
}

#[test]
fn any_seven_of_ten_decrypt_the_sum_as_all_ten_do() {
    let mut s = setup(CkksParams::paper_n4096().unwrap(), 1);
    let xs: Vec<f64> = (0..N).map(|i| (f64::from(i) - 4.5) * 0.613).collect();
    let want: f64 = xs.iter().sum();
    // N-of-N decryption of one encryption, as before.
    let ct = encrypted_sum(&mut s, &xs);
    let rng = &mut s.rng;
    let all: Vec<_> = s
        .parties
        .iter()
        .map(|p| p.partial_decrypt(&ct, rng).unwrap())
        .collect();
    let full = fuse(&ct, &all).unwrap().scalar().unwrap();
    // Three different 7-member sets (three devices gone each time), and all ten; each on a
    // fresh encryption.
    for active in [
        vec![0, 1, 2, 3, 4, 5, 6],
        vec![3, 4, 5, 6, 7, 8, 9],
        vec![0, 2, 4, 5, 7, 8, 9],
        (0..N).collect(),
    ] {
        let ct = encrypted_sum(&mut s, &xs);
        let set = ActiveSet::new(&s.committee, &ct, &active).unwrap();
        let shares = ask(&mut s, &ct, &set);
        let got = fuse_threshold(&ct, &set, &shares)
            .unwrap()
            .scalar()
            .unwrap();
        // Smudging dominates: sd ≈ √|A| · 2^20 / 2^40; 7 sd.
        let sd = (active.len() as f64).sqrt() * 2f64.powi(-20);
        assert!((got - want).abs() < 7.0 * sd, "{active:?}: {got} vs {want}");
        assert!((got - full).abs() < 7.0 * 2.0 * sd);
    }
}

#[test]
fn fewer_than_seven_members_are_refused_before_and_at_fusion() {
    let mut s = setup(CkksParams::paper_n4096().unwrap(), 2);
    let ct = encrypted_sum(&mut s, &[1.25, -0.5]);
    // Below the threshold the set itself is refused.
    let e = ActiveSet::new(&s.committee, &ct, &[0, 1, 2, 3, 4, 5]).unwrap_err();
    assert!(e.to_string().contains("threshold is 7"), "{e}");
    // Seven shares weighted for a set of seven, fused without one of them (as a server
    // that kept six would): the result is not the message.
    let set = ActiveSet::new(&s.committee, &ct, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let shares = ask(&mut s, &ct, &set);
    let e = fuse_threshold(&ct, &set, &shares[..6]).unwrap_err();
    assert!(matches!(e, CkksError::MissingShare { party: 6 }), "{e}");
}

#[test]
fn a_member_answers_once_per_ciphertext_and_a_retry_needs_a_fresh_encryption() {
    let mut s = setup(CkksParams::paper_n4096().unwrap(), 3);
    let ct = encrypted_sum(&mut s, &[0.5, 0.25]);
    let first = ActiveSet::new(&s.committee, &ct, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let rng = &mut s.rng;
    s.members[0].partial_decrypt(&ct, &first, rng).unwrap();
    assert!(s.members[0].has_answered(&ct));
    // Again, for the same set or another one (another server session asking): refused.
    let other = ActiveSet::new(&s.committee, &ct, &[0, 2, 3, 4, 5, 6, 7]).unwrap();
    for set in [&first, &other] {
        let e = s.members[0].partial_decrypt(&ct, set, rng).unwrap_err();
        assert!(matches!(e, CkksError::AlreadyAnswered { party: 0 }), "{e}");
    }
    // The same message encrypted afresh is a new ciphertext: answered.
    let again = encrypted_sum(&mut s, &[0.5, 0.25]);
    assert_ne!(again.digest(), ct.digest());
    let set = ActiveSet::new(&s.committee, &again, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let shares = ask(&mut s, &again, &set);
    let got = fuse_threshold(&again, &set, &shares)
        .unwrap()
        .scalar()
        .unwrap();
    assert!((got - 0.75).abs() < 1e-4, "{got}");
}

#[test]
fn shares_and_sets_for_anything_else_are_refused_by_name() {
    let mut s = setup(CkksParams::paper_n4096().unwrap(), 4);
    let ct = encrypted_sum(&mut s, &[1.0]);
    let other_ct = encrypted_sum(&mut s, &[2.0]);
    let set = ActiveSet::new(&s.committee, &ct, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let other_set = ActiveSet::new(&s.committee, &other_ct, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let rng = &mut s.rng;
    // A set made for another ciphertext, a member outside the set.
    let e = s.members[1]
        .partial_decrypt(&ct, &other_set, rng)
        .unwrap_err();
    assert!(e.to_string().contains("another ciphertext"), "{e}");
    let e = s.members[9].partial_decrypt(&ct, &set, rng).unwrap_err();
    assert!(matches!(e, CkksError::UnknownParty { party: 9 }), "{e}");
    // Sets with a stranger or a repeated member.
    let e = ActiveSet::new(&s.committee, &ct, &[0, 1, 2, 3, 4, 5, 42]).unwrap_err();
    assert!(matches!(e, CkksError::UnknownParty { party: 42 }), "{e}");
    assert!(ActiveSet::new(&s.committee, &ct, &[0, 1, 2, 3, 4, 5, 5, 6]).is_err());
    // Fusing: a share for another set, a duplicate.
    let mut shares = ask(&mut s, &ct, &set);
    let foreign = ask(&mut s, &other_ct, &other_set);
    let swapped: Vec<_> = foreign[..1].iter().chain(&shares[1..]).cloned().collect();
    let e = fuse_threshold(&ct, &set, &swapped).unwrap_err();
    assert!(matches!(e, CkksError::WrongBinding { party: 0, .. }), "{e}");
    shares.push(shares[0].clone());
    let e = fuse_threshold(&ct, &set, &shares).unwrap_err();
    assert!(matches!(e, CkksError::DuplicateShare { party: 0 }), "{e}");
    // Committees: a threshold of 1 or above N, a repeated member.
    assert!(Committee::new(1, &[0, 1, 2]).is_err());
    assert!(Committee::new(4, &[0, 1, 2]).is_err());
    assert!(Committee::new(2, &[0, 1, 1]).is_err());
}

#[test]
fn setup_refuses_missing_misaddressed_and_foreign_secret_shares() {
    let params = CkksParams::paper_n4096().unwrap();
    let mut rng = secret_rng(Some(5));
    let crs = CommonPoly::from_seed(&params, [1u8; 32]);
    let parties: Vec<Party> = (0..4)
        .map(|i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    let committee = Committee::new(3, &[0, 1, 2, 3]).unwrap();
    let dealt: Vec<Vec<_>> = parties
        .iter()
        .map(|p| p.deal(&committee, 0, &mut rng).unwrap())
        .collect();
    let for_0 = |skip: Option<usize>| -> Vec<_> {
        dealt
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, d)| d.iter().find(|s| s.to() == 0).unwrap())
            .collect()
    };
    // Whole: accepted. Without dealer 2: refused naming it.
    let whole: Vec<_> = for_0(None).into_iter().cloned().collect();
    ThresholdParty::from_shares(&parties[0], &committee, 0, &whole).unwrap();
    let partial: Vec<_> = for_0(Some(2)).into_iter().cloned().collect();
    let e = ThresholdParty::from_shares(&parties[0], &committee, 0, &partial).unwrap_err();
    assert!(matches!(e, CkksError::MissingShare { party: 2 }), "{e}");
    // Addressed to member 1, or made for another session: refused.
    let e = ThresholdParty::from_shares(&parties[1], &committee, 0, &whole).unwrap_err();
    assert!(e.to_string().contains("recipient"), "{e}");
    let e = ThresholdParty::from_shares(&parties[0], &committee, 1, &whole).unwrap_err();
    assert!(
        matches!(
            e,
            CkksError::WrongSession {
                party: 0,
                got: 0,
                expected: 1
            }
        ),
        "{e}"
    );
    // Dealt for another committee (threshold 2 of the same four): another binding.
    let other = Committee::new(2, &[0, 1, 2, 3]).unwrap();
    let e = ThresholdParty::from_shares(&parties[0], &other, 0, &whole).unwrap_err();
    assert!(matches!(e, CkksError::WrongBinding { party: 0, .. }), "{e}");
    // A party outside the committee cannot deal.
    let outsider = Party::generate(7, &params, &crs, &mut rng);
    assert!(outsider.deal(&committee, 0, &mut rng).is_err());
}

#[test]
fn smudging_for_two_to_the_minus_forty_is_sized_from_the_noise_formula() {
    use privopt_ckks::multiparty::smudging_for_distance;
    let params = CkksParams::paper_n4096().unwrap();
    // 10 parties, 10 encryptions summed, 7 members answering, 2^-40.
    let b = smudging_for_distance(&params, 10, 10, 7, 40.0);
    // The error sd of docs/mkckks.md's product rule without smudging: variance 6.99e6 at
    // n = 4096, 10 parties (measured 6.91e6 there).
    assert!(
        (b.error_sd_log2 - (6.991e6f64).sqrt().log2()).abs() < 0.01,
        "{b:?}"
    );
    // σ* = √n · 13·sd · 2^40 / √(2π) = 2^(6 + 3.70 + 11.37 + 40 − 1.33) ≈ 2^59.7, from one
    // honest member alone: the same whoever else answers.
    assert!((59.6..59.8).contains(&b.smudging_log2), "{b:?}");
    let alone = smudging_for_distance(&params, 10, 10, 1, 40.0);
    assert_eq!(alone.smudging_log2, b.smudging_log2);
    // The fused noise is the 7 answering members' smudging: √7 above σ*, over the scale.
    let expected = b.smudging_log2 + 0.5 * 7f64.log2() - f64::from(params.scale_log2());
    assert!((b.precision_log2 - expected).abs() < 1e-9);
    // Each halving of the distance costs a bit; twice the encryptions, half a bit.
    let c = smudging_for_distance(&params, 10, 10, 7, 41.0);
    assert!((c.smudging_log2 - b.smudging_log2 - 1.0).abs() < 1e-9);
    let d = smudging_for_distance(&params, 10, 20, 7, 40.0);
    assert!((d.smudging_log2 - b.smudging_log2 - 0.5).abs() < 0.01);
}

#[test]
fn setup_and_decryption_through_bytes_and_a_forged_set_is_refused() {
    use privopt_ckks::multiparty::SecretShare;
    let params = CkksParams::paper_n4096().unwrap();
    let mut rng = secret_rng(Some(6));
    let crs = CommonPoly::from_seed(&params, [2u8; 32]);
    let ids = [0u32, 1, 2, 3];
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    let pk: Vec<_> = parties.iter().map(|p| p.public_key_share(0)).collect();
    let key = CollectivePublicKey::aggregate(&params, &crs, &ids, 0, &pk).unwrap();
    let committee = Committee::new(3, &ids).unwrap();
    // Every secret share crosses as bytes (the transport would encrypt them).
    let wire: Vec<Vec<Vec<u8>>> = parties
        .iter()
        .map(|p| {
            let dealt = p.deal(&committee, 0, &mut rng).unwrap();
            dealt.iter().map(|s| s.to_bytes(&params).to_vec()).collect()
        })
        .collect();
    let mut members: Vec<ThresholdParty> = parties
        .iter()
        .enumerate()
        .map(|(j, p)| {
            let inbox: Vec<SecretShare> = wire
                .iter()
                .map(|d| SecretShare::from_bytes(&params, &d[j]).unwrap())
                .collect();
            ThresholdParty::from_shares(p, &committee, 0, &inbox).unwrap()
        })
        .collect();
    let ct = key.encrypt_scalar(0.375, &mut rng).unwrap();
    let set = ActiveSet::new(&committee, &ct, &[0, 2, 3]).unwrap();
    let set_bytes = set.to_bytes(&params);
    let decoded = ActiveSet::from_bytes(&params, &set_bytes).unwrap();
    assert_eq!(decoded, set);
    let shares: Vec<_> = [0usize, 2, 3]
        .iter()
        .map(|&j| {
            let share = members[j].partial_decrypt(&ct, &decoded, &mut rng).unwrap();
            DecryptionShare::from_bytes(&params, &share.to_bytes(&params)).unwrap()
        })
        .collect();
    let got = fuse_threshold(&ct, &set, &shares)
        .unwrap()
        .scalar()
        .unwrap();
    assert!((got - 0.375).abs() < 1e-4, "{got}");
    // A forged set of two members (below the threshold) passes decoding but not the member.
    let fresh = key.encrypt_scalar(0.5, &mut rng).unwrap();
    let full = ActiveSet::new(&committee, &fresh, &[0, 1, 2])
        .unwrap()
        .to_bytes(&params);
    let mut forged = full[..full.len() - 12].to_vec();
    forged[full.len() - 16..full.len() - 12].copy_from_slice(&2u32.to_le_bytes());
    forged.extend_from_slice(&0u32.to_le_bytes());
    forged.extend_from_slice(&1u32.to_le_bytes());
    let two = ActiveSet::from_bytes(&params, &forged).unwrap();
    let e = members[0]
        .partial_decrypt(&fresh, &two, &mut rng)
        .unwrap_err();
    assert!(e.to_string().contains("threshold is 3"), "{e}");
    // Damaged bytes: truncated, a residue out of range, another kind.
    let share_bytes = wire[0][1].clone();
    assert!(SecretShare::from_bytes(&params, &share_bytes[..share_bytes.len() - 1]).is_err());
    let mut high = share_bytes.clone();
    let last = high.len() - 8;
    high[last..].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(SecretShare::from_bytes(&params, &high).is_err());
    assert!(ActiveSet::from_bytes(&params, &share_bytes).is_err());
    let mut unsorted = set_bytes.clone();
    let n = unsorted.len();
    unsorted[n - 4..].copy_from_slice(&0u32.to_le_bytes());
    assert!(ActiveSet::from_bytes(&params, &unsorted).is_err());
}

#[test]
fn a_member_restored_from_its_bytes_keeps_its_share_and_its_ledger() {
    let params = CkksParams::paper_n4096().unwrap();
    let mut s = setup(Arc::clone(&params), 7);
    let answered = encrypted_sum(&mut s, &[0.25]);
    let set = ActiveSet::new(&s.committee, &answered, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let rng = &mut s.rng;
    s.members[0].partial_decrypt(&answered, &set, rng).unwrap();
    let saved = s.members[0].to_bytes();
    let mut restored = ThresholdParty::from_bytes(&params, &saved).unwrap();
    assert_eq!(restored.id(), 0);
    assert_eq!(restored.committee(), &s.committee);
    let e = restored.partial_decrypt(&answered, &set, rng).unwrap_err();
    assert!(matches!(e, CkksError::AlreadyAnswered { party: 0 }), "{e}");
    // The restored member's share still decrypts with the others.
    let ct = encrypted_sum(&mut s, &[1.5, 2.0]);
    let set = ActiveSet::new(&s.committee, &ct, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let rng = &mut s.rng;
    let mut shares = vec![restored.partial_decrypt(&ct, &set, rng).unwrap()];
    for m in &mut s.members[1..7] {
        shares.push(m.partial_decrypt(&ct, &set, rng).unwrap());
    }
    let got = fuse_threshold(&ct, &set, &shares)
        .unwrap()
        .scalar()
        .unwrap();
    assert!((got - 3.5).abs() < 1e-4, "{got}");
    // Damaged state: truncated, a ledger out of order, a party outside its committee.
    assert!(ThresholdParty::from_bytes(&params, &saved[..saved.len() - 1]).is_err());
    let mut two = s.members[0].to_bytes().to_vec();
    assert!(ThresholdParty::from_bytes(&params, &two).is_ok());
    let n = two.len();
    let (a, b) = (two[n - 64..n - 32].to_vec(), two[n - 32..].to_vec());
    two[n - 64..n - 32].copy_from_slice(&b);
    two[n - 32..].copy_from_slice(&a);
    assert!(ThresholdParty::from_bytes(&params, &two).is_err());
    let mut stranger = saved.to_vec();
    stranger[48..52].copy_from_slice(&42u32.to_le_bytes());
    assert!(ThresholdParty::from_bytes(&params, &stranger).is_err());
}

#[test]
fn fused_noise_matches_the_product_rule_with_the_active_members_smudging() {
    // Per coefficient: n(Kσ_v²)(Nσ_e²) + Kσ_e² + n(Nσ_s²)(Kσ_e²) + |A|(σ*² + 1/12), with N = K
    // = 10 parties and encryptions and |A| = 7 members answering (not N, as in N-of-N).
    let params = CkksParams::paper_n4096().unwrap();
    let n = params.n();
    let (nf, e2, s2) = (
        n as f64,
        params.error().sigma().powi(2),
        params.secret().variance(n),
    );
    let smudge2 = 2f64.powf(2.0 * params.smudging_log2()) + 1.0 / 12.0;
    let products =
        nf * (10.0 * 2.0 / 3.0) * (10.0 * e2) + 10.0 * e2 + nf * (10.0 * s2) * (10.0 * e2);
    let analytic = products + 7.0 * smudge2;
    let trials = 12;
    let v: Vec<f64> = (0..trials)
        .map(|t| {
            let mut s = setup(Arc::clone(&params), 200 + t);
            let msgs: Vec<Vec<i64>> = (0..10i64)
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
            let set = ActiveSet::new(&s.committee, &sum, &[1, 2, 3, 5, 6, 8, 9]).unwrap();
            let shares = ask(&mut s, &sum, &set);
            let coeffs = fuse_threshold(&sum, &set, &shares)
                .unwrap()
                .integer_coefficients()
                .unwrap();
            (0..n)
                .map(|j| {
                    let want: i128 = msgs.iter().map(|m| i128::from(m[j])).sum();
                    ((coeffs[j] - want) as f64).powi(2)
                })
                .sum::<f64>()
                / nf
        })
        .collect();
    let t = v.len() as f64;
    let mean = v.iter().sum::<f64>() / t;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (t - 1.0)).sqrt();
    let tol = 5.0 * sd / t.sqrt() + 0.01 * analytic;
    eprintln!(
        "threshold 7 of 10: measured {mean:.5e}, analytic {analytic:.5e}, tolerance {tol:.2e}"
    );
    assert!((mean - analytic).abs() < tol, "{mean} vs {analytic}");
    // Ten members' worth of smudging (N-of-N's formula) is far outside.
    assert!((mean - (products + 10.0 * smudge2)).abs() > 10.0 * tol);
}
