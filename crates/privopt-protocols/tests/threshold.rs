//! The threshold key's setup round through bytes: sealed shares only their recipient opens,
//! any t members decrypting afterwards, and every bad key set or sealed share refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_ckks::CkksParams;
use privopt_ckks::multiparty::{
    ActiveSet, Ciphertext, CollectivePublicKey, Committee, CommonPoly, Party, ThresholdParty,
    fuse_threshold,
};
use privopt_math::sample::secret_rng;
use privopt_protocols::threshold::{SealedShare, SealingKey, ThresholdSetup};
use privopt_protocols::{Message, Misbehavior, ProtocolError};

const SESSION: u64 = 3;

fn kind(e: &ProtocolError) -> Option<Misbehavior> {
    match e {
        ProtocolError::PeerMisbehaved { kind, .. } => Some(*kind),
        _ => None,
    }
}

#[test]
fn five_members_set_up_through_a_relay_and_any_three_decrypt() {
    let params = CkksParams::paper_n4096().unwrap();
    let mut rng = secret_rng(Some(1));
    let crs = CommonPoly::from_seed(&params, [4u8; 32]);
    let ids: Vec<u32> = (0..5).collect();
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    let committee = Committee::new(3, &ids).unwrap();
    let mut setups: Vec<ThresholdSetup> = parties
        .iter()
        .map(|p| ThresholdSetup::new(p, &committee, SESSION, &mut rng).unwrap())
        .collect();
    // The server relays every key as bytes.
    let keys: Vec<SealingKey> = setups
        .iter()
        .map(|s| SealingKey::from_bytes(&s.sealing_key().to_bytes()).unwrap())
        .collect();
    // Refusals at the dealing step leave the setup able to go on.
    let e = setups[0]
        .deal(&parties[0], &keys[..4], &mut rng)
        .unwrap_err();
    assert!(
        matches!(e, ProtocolError::Incomplete(ref m) if m.contains("member 4")),
        "{e}"
    );
    let mut twice = keys.clone();
    twice.push(keys[2].clone());
    let e = setups[0].deal(&parties[0], &twice, &mut rng).unwrap_err();
    assert_eq!(kind(&e), Some(Misbehavior::Duplicate), "{e}");
    let mut stale = keys.clone();
    stale[1].session = 2;
    let e = setups[0].deal(&parties[0], &stale, &mut rng).unwrap_err();
    assert_eq!(kind(&e), Some(Misbehavior::WrongRound), "{e}");
    let mut swapped = keys.clone();
    swapped[0].public = keys[1].public;
    let e = setups[0].deal(&parties[0], &swapped, &mut rng).unwrap_err();
    assert_eq!(kind(&e), Some(Misbehavior::Malformed), "{e}");
    // Every member deals; the server routes each sealed share (as bytes) by recipient.
    let mut inbox: Vec<Vec<SealedShare>> = vec![Vec::new(); 5];
    for (setup, party) in setups.iter_mut().zip(&parties) {
        for s in setup.deal(party, &keys, &mut rng).unwrap() {
            let wire = SealedShare::from_bytes(&s.to_bytes()).unwrap();
            inbox[wire.to as usize].push(wire);
        }
    }
    // A tampered, misaddressed or repeated share is refused by kind.
    let mut bad = inbox[0].clone();
    let last = bad[2].ciphertext.len() - 1;
    bad[2].ciphertext[last] ^= 1;
    let e = setups[0].finish(&parties[0], &bad).unwrap_err();
    assert_eq!(kind(&e), Some(Misbehavior::Tampered), "{e}");
    let e = setups[0].finish(&parties[0], &inbox[1]).unwrap_err();
    assert_eq!(kind(&e), Some(Misbehavior::Misaddressed), "{e}");
    let mut again = inbox[0].clone();
    again.push(inbox[0][1].clone());
    let e = setups[0].finish(&parties[0], &again).unwrap_err();
    assert_eq!(kind(&e), Some(Misbehavior::Duplicate), "{e}");
    // A share re-addressed to another member does not open for it (bound to the pair).
    let mut redirected = inbox[1].clone();
    redirected[0].to = 2;
    let e = setups[2].finish(&parties[2], &redirected[..1]).unwrap_err();
    assert_eq!(kind(&e), Some(Misbehavior::Tampered), "{e}");
    let mut members: Vec<ThresholdParty> = setups
        .iter()
        .zip(&parties)
        .zip(&inbox)
        .map(|((s, p), shares)| s.finish(p, shares).unwrap())
        .collect();
    // The collective key of the five, a sum of five scalars, decrypted by members 1, 3, 4.
    let pk: Vec<_> = parties
        .iter()
        .map(|p| p.public_key_share(SESSION))
        .collect();
    let key = CollectivePublicKey::aggregate(&params, &crs, &ids, SESSION, &pk).unwrap();
    let xs = [0.5, -1.25, 2.0, 0.125, 3.0];
    let cts: Vec<Ciphertext> = xs
        .iter()
        .map(|&x| key.encrypt_scalar(x, &mut rng).unwrap())
        .collect();
    let sum = Ciphertext::sum(&cts).unwrap();
    let active = ActiveSet::new(&committee, &sum, &[1, 3, 4]).unwrap();
    let shares: Vec<_> = [1usize, 3, 4]
        .iter()
        .map(|&j| members[j].partial_decrypt(&sum, &active, &mut rng).unwrap())
        .collect();
    let got = fuse_threshold(&sum, &active, &shares)
        .unwrap()
        .scalar()
        .unwrap();
    assert!((got - xs.iter().sum::<f64>()).abs() < 1e-4, "{got}");
}
