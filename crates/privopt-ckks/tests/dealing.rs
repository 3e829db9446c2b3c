//! The dealing check: after a threshold setup every dealer's shares are tested to lie on one
//! polynomial of degree < t with its key's secret as constant. A dealer that sends one member
//! a wrong point, or deals a secret other than its key's, is named; a member that answers
//! falsely is not mistaken for a bad dealer; every member answers once per setup.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_ckks::multiparty::{
    Committee, CommonPoly, DealingAnswer, DealingCheck, Party, PublicKeyShare, SecretShare,
    ThresholdParty, verify_dealing,
};
use privopt_ckks::{CkksError, CkksParams};
use privopt_math::sample::secret_rng;

const N: u32 = 10;
const T: usize = 7;
const SESSION: u64 = 4;

struct Setup {
    params: Arc<CkksParams>,
    crs: CommonPoly,
    committee: Committee,
    keys: Vec<PublicKeyShare>,
    members: Vec<ThresholdParty>,
}

/// Ten parties, threshold 7; `tamper` may change the dealt shares before they are kept.
fn setup(tamper: impl FnOnce(&Arc<CkksParams>, &mut Vec<Vec<SecretShare>>)) -> Setup {
    let params = CkksParams::paper_n4096().unwrap();
    let mut rng = secret_rng(Some(21));
    let crs = CommonPoly::from_seed(&params, [5u8; 32]);
    let ids: Vec<u32> = (0..N).collect();
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    let keys = parties.iter().map(|p| p.public_key_share(1)).collect();
    let committee = Committee::new(T, &ids).unwrap();
    let mut inbox: Vec<Vec<SecretShare>> = (0..N).map(|_| Vec::new()).collect();
    for p in &parties {
        for share in p.deal(&committee, SESSION, &mut rng).unwrap() {
            inbox[share.to() as usize].push(share);
        }
    }
    tamper(&params, &mut inbox);
    let members = parties
        .iter()
        .zip(&inbox)
        .map(|(p, s)| ThresholdParty::from_shares(p, &committee, SESSION, s).unwrap())
        .collect();
    Setup {
        params,
        crs,
        committee,
        keys,
        members,
    }
}

/// Every member's answers to a check among all ten, through bytes.
fn answers(s: &mut Setup, check: &DealingCheck) -> Vec<DealingAnswer> {
    let mut rng = secret_rng(Some(22));
    let check = DealingCheck::from_bytes(&s.params, &check.to_bytes(&s.params)).unwrap();
    s.members
        .iter_mut()
        .map(|m| {
            let a = m.answer_dealing_check(&check, &s.crs, &mut rng).unwrap();
            DealingAnswer::from_bytes(&s.params, &a.to_bytes(&s.params)).unwrap()
        })
        .collect()
}

fn check_of(s: &Setup) -> DealingCheck {
    let ids: Vec<u32> = (0..N).collect();
    DealingCheck::new(&s.committee, SESSION, [7u8; 32], &ids).unwrap()
}

fn verify(s: &Setup, check: &DealingCheck, answers: &[DealingAnswer]) -> Result<(), CkksError> {
    verify_dealing(&s.params, &s.committee, &s.crs, &s.keys, check, answers)
}

/// Adds 1 to the first residue of the share `dealer` dealt to `recipient`.
fn shift_point(params: &CkksParams, inbox: &mut [Vec<SecretShare>], dealer: u32, recipient: u32) {
    let shares = &mut inbox[recipient as usize];
    let i = shares.iter().position(|s| s.from() == dealer).unwrap();
    let mut bytes = shares[i].to_bytes(params).to_vec();
    let q = params.basis().moduli()[0];
    let at = bytes.len() - 4 - 8 * params.n() * params.basis().moduli().len();
    let r = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    bytes[at..at + 8].copy_from_slice(&((r + 1) % q).to_le_bytes());
    shares[i] = SecretShare::from_bytes(params, &bytes).unwrap();
}

#[test]
fn an_honest_setup_passes_and_each_member_answers_once() {
    let mut s = setup(|_, _| {});
    let check = check_of(&s);
    // T and T with its last member replaced by each of the other three: N − t + 1 sets.
    assert_eq!(check.sets().len(), 4);
    assert_eq!(check.sets()[3], vec![0, 1, 2, 3, 4, 5, 9]);
    let all = answers(&mut s, &check);
    verify(&s, &check, &all).unwrap();
    // A few coefficients per dealer and set: a few kilobytes per member, not polynomials.
    let m = DealingCheck::coefficients(&s.params, &s.committee);
    assert!((2..=8).contains(&m), "{m}");
    let primes = s.params.basis().moduli().len();
    assert!(all[0].to_bytes(&s.params).len() < 10 * 4 * m * primes * 8 + 200);
    // A second check, with another seed, is refused, also by a member restored from bytes.
    let again =
        DealingCheck::new(&s.committee, SESSION, [8u8; 32], &[0, 1, 2, 3, 4, 5, 6]).unwrap();
    let mut rng = secret_rng(Some(1));
    let e = s.members[0]
        .answer_dealing_check(&again, &s.crs, &mut rng)
        .unwrap_err();
    assert!(matches!(e, CkksError::DealingChecked { party: 0 }), "{e}");
    let mut restored = ThresholdParty::from_bytes(&s.params, &s.members[1].to_bytes()).unwrap();
    assert!(matches!(
        restored.answer_dealing_check(&again, &s.crs, &mut rng),
        Err(CkksError::DealingChecked { party: 1 })
    ));
}

#[test]
fn one_wrong_point_names_its_dealer() {
    // Dealer 3 sends member 8 a point off its polynomial: only the set with 8 in it fails.
    let mut s = setup(|params, inbox| shift_point(params, inbox, 3, 8));
    let check = check_of(&s);
    let all = answers(&mut s, &check);
    let e = verify(&s, &check, &all).unwrap_err();
    assert!(matches!(e, CkksError::BadDealing { dealer: 3 }), "{e}");
    // Also when the wrong point is in T, which every set shares.
    let mut s = setup(|params, inbox| shift_point(params, inbox, 5, 0));
    let check = check_of(&s);
    let all = answers(&mut s, &check);
    let e = verify(&s, &check, &all).unwrap_err();
    assert!(matches!(e, CkksError::BadDealing { dealer: 5 }), "{e}");
}

#[test]
fn a_consistent_dealing_of_another_secret_names_its_dealer() {
    // Dealer 6 deals a polynomial whose constant is not the secret of its key share.
    let mut s = setup(|params, inbox| {
        let crs = CommonPoly::from_seed(params, [5u8; 32]);
        let impostor = Party::generate(6, params, &crs, &mut secret_rng(Some(99)));
        let committee = Committee::new(T, &(0..N).collect::<Vec<_>>()).unwrap();
        for share in impostor
            .deal(&committee, SESSION, &mut secret_rng(Some(98)))
            .unwrap()
        {
            let list = &mut inbox[share.to() as usize];
            let i = list.iter().position(|x| x.from() == 6).unwrap();
            list[i] = share;
        }
    });
    let check = check_of(&s);
    let all = answers(&mut s, &check);
    let e = verify(&s, &check, &all).unwrap_err();
    assert!(matches!(e, CkksError::BadDealing { dealer: 6 }), "{e}");
}

#[test]
fn bad_answers_are_refused_by_party_and_a_lying_member_is_not_taken_for_a_dealer() {
    let mut s = setup(|_, _| {});
    let check = check_of(&s);
    let mut all = answers(&mut s, &check);
    // Missing, duplicated, foreign, for another check.
    let e = verify(&s, &check, &all[1..]).unwrap_err();
    assert!(matches!(e, CkksError::MissingShare { party: 0 }), "{e}");
    let mut twice = all.clone();
    twice.push(all[4].clone());
    let e = verify(&s, &check, &twice).unwrap_err();
    assert!(matches!(e, CkksError::DuplicateShare { party: 4 }), "{e}");
    let other = DealingCheck::new(
        &s.committee,
        SESSION,
        [9u8; 32],
        &(0..N).collect::<Vec<_>>(),
    )
    .unwrap();
    let e = verify(&s, &other, &all).unwrap_err();
    assert!(matches!(e, CkksError::WrongBinding { party: 0, .. }), "{e}");
    // A member of every set (member 2) answers zeros: every dealer fails on every set, and
    // the error names the set, not a dealer.
    let mut bytes = all[2].to_bytes(&s.params);
    bytes[92..].fill(0); // after the header (48), party, digest, counts (44)
    all[2] = DealingAnswer::from_bytes(&s.params, &bytes).unwrap();
    let e = verify(&s, &check, &all).unwrap_err();
    assert!(e.to_string().contains("fails for every dealer"), "{e}");
    // Keys missing a dealer's share; fewer members present than the threshold; a stranger.
    let e =
        verify_dealing(&s.params, &s.committee, &s.crs, &s.keys[1..], &check, &all).unwrap_err();
    assert!(matches!(e, CkksError::MissingShare { party: 0 }), "{e}");
    assert!(DealingCheck::new(&s.committee, SESSION, [7u8; 32], &[0, 1, 2, 3, 4, 5]).is_err());
    let e = DealingCheck::new(&s.committee, SESSION, [7u8; 32], &[0, 1, 2, 3, 4, 5, 6, 42])
        .unwrap_err();
    assert!(matches!(e, CkksError::UnknownParty { party: 42 }), "{e}");
    // Damaged bytes.
    let b = check.to_bytes(&s.params);
    assert!(DealingCheck::from_bytes(&s.params, &b[..b.len() - 1]).is_err());
    let b = all[0].to_bytes(&s.params);
    assert!(DealingAnswer::from_bytes(&s.params, &b[..b.len() - 8]).is_err());
}
