//! Paillier D-SGD agents: the exchange yields the weighted difference, an agent cannot read a
//! neighbour's ciphertexts, out-of-place responses are peer errors, and every decoder refuses
//! damaged and forged bytes with a typed error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_math::SeedTree;
use privopt_paillier::{KeyPair, PublicKey};
use privopt_protocols::pdsgd::{
    Agent, KeyAnnouncement, Paillier, Request, Transparent, TransparentKey,
};
use privopt_protocols::wire::damage;
use privopt_protocols::{DecodeError, ProtocolError};

fn keys(n: usize, seed: u64) -> Vec<KeyPair> {
    let mut r = SeedTree::new(seed).stream("test/keys", &[]);
    (0..n)
        .map(|_| KeyPair::generate_insecure_for_testing(1024, &mut r).unwrap())
        .collect()
}

/// Agents 0..n on a path 0–1–…, with weight integers `k_{i→j} = 1 + i + 2j`.
fn path(n: usize, seed: u64) -> Vec<Agent<Paillier>> {
    let mut agents: Vec<Agent<Paillier>> = keys(n, seed)
        .into_iter()
        .enumerate()
        .map(|(i, kp)| Agent::new(i, kp.public.clone(), kp))
        .collect();
    let ann: Vec<_> = agents.iter().map(Agent::announcement).collect();
    for (i, agent) in agents.iter_mut().enumerate() {
        for j in [i.wrapping_sub(1), i + 1] {
            if j < n {
                let k = (1 + i + 2 * j) as i64;
                agent.add_neighbour(ann[j].clone(), k).unwrap();
            }
        }
    }
    agents
}

#[test]
fn the_exchange_through_bytes_returns_the_weighted_difference() {
    let mut a = path(2, 1);
    let mut r = SeedTree::new(2).stream("test/enc", &[]);
    // Q(x_0) = (−3, 7), Q(x_1) = (5, −12); k_{0→1} = 3, k_{1→0} = 2; δ = 0.1.
    let req = a[0].initiate(1, 0, &[-3, 7], &mut r).unwrap();
    let req = a[1].decode_request(&a[0].encode_request(&req)).unwrap();
    let resp = a[1].respond(&req, &[5, -12], &mut r).unwrap();
    let resp = a[0]
        .decode_response(&a[1].encode_response(&resp).unwrap())
        .unwrap();
    let out = a[0].finish(&resp, 0.1).unwrap();
    // w_{0→1} w_{1→0} (x̃_1 − x̃_0) = (3δ)(2δ) · δ(Q_1 − Q_0).
    let want = [0.3 * 0.2 * 0.1 * 8.0, 0.3 * 0.2 * 0.1 * -19.0];
    for (o, w) in out.iter().zip(want) {
        assert!((o - w).abs() < 1e-12, "{o} vs {w}");
    }
    // The exchange is closed: the same response again is refused.
    assert!(matches!(
        a[0].finish(&resp, 0.1),
        Err(ProtocolError::PeerMisbehaved { .. })
    ));
}

#[test]
fn agents_saved_and_restored_between_steps_finish_the_exchange() {
    let mut a = path(3, 5);
    let mut r = SeedTree::new(6).stream("test/enc", &[]);
    let resume = |agent: &Agent<Paillier>| Agent::<Paillier>::restore(&agent.save()).unwrap();
    let req = a[0].initiate(1, 4, &[-3, 7], &mut r).unwrap();
    a[0] = resume(&a[0]);
    a[1] = resume(&a[1]);
    let resp = a[1].respond(&req, &[5, -12], &mut r).unwrap();
    a[0] = resume(&a[0]);
    let out = a[0].finish(&resp, 0.1).unwrap();
    // k_{0→1} = 3, k_{1→0} = 2 survived the trip, and so did the open exchange.
    let want = [0.3 * 0.2 * 0.1 * 8.0, 0.3 * 0.2 * 0.1 * -19.0];
    for (o, w) in out.iter().zip(want) {
        assert!((o - w).abs() < 1e-12, "{o} vs {w}");
    }
    // Damaged state, another kind of message, or a key pair swapped for another agent's.
    let saved = a[1].save();
    let decode = |b: &[u8]| vec![Agent::<Paillier>::restore(b).map(drop)];
    assert_eq!(damage::first_mishandled(&saved, 64, decode), None);
    assert!(Agent::<Paillier>::restore(&a[1].announcement().to_bytes::<Paillier>()).is_err());
    let mut other = path(3, 5);
    let foreign = keys(1, 99).remove(0);
    other[1] = Agent::new(1, a[1].announcement().key, foreign);
    assert!(Agent::<Paillier>::restore(&other[1].save()).is_err());
}

#[test]
fn an_agent_cannot_read_a_neighbours_ciphertexts() {
    let mut a = path(3, 3);
    let mut r = SeedTree::new(4).stream("test/enc", &[]);
    // Agent 1 sees agent 0's request (under 0's key). Posing it as a response to agent 1's own
    // open exchange with 0 does not reveal −Q(x_0): decryption under 1's key is garbage.
    let req = a[0].initiate(1, 0, &[-40, 41], &mut r).unwrap();
    a[1].initiate(0, 0, &[1, 1], &mut r).unwrap();
    let forged = privopt_protocols::pdsgd::Response {
        from: 0,
        to: 1,
        iteration: 0,
        cts: req.cts.clone(),
    };
    match a[1].finish(&forged, 1.0) {
        Err(e) => assert!(matches!(e, ProtocolError::Paillier(_)), "{e}"),
        Ok(v) => assert_ne!(v, vec![40.0, -41.0]),
    }
    // A request meant for another agent, or from a stranger, is refused.
    let req_2 = a[1].initiate(2, 0, &[5, 6], &mut r).unwrap();
    assert!(matches!(
        a[0].respond(&req_2, &[1, 2], &mut r),
        Err(ProtocolError::PeerMisbehaved { .. })
    ));
    let stranger = Request {
        from: 2,
        to: 0,
        iteration: 0,
        cts: req_2.cts.clone(),
    };
    assert!(matches!(
        a[0].respond(&stranger, &[1, 2], &mut r),
        Err(ProtocolError::PeerMisbehaved { .. })
    ));
}

#[test]
fn wrong_iteration_or_length_responses_are_refused_and_unanswered_exchanges_are_abandoned() {
    let mut a = path(2, 5);
    let mut r = SeedTree::new(6).stream("test/enc", &[]);
    let req = a[0].initiate(1, 3, &[1, 2, 3], &mut r).unwrap();
    let good = a[1].respond(&req, &[4, 5, 6], &mut r).unwrap();
    let mut stale = good.clone();
    stale.iteration = 2;
    let mut short = good.clone();
    short.cts.pop();
    for bad in [stale, short] {
        assert!(matches!(
            a[0].finish(&bad, 0.1),
            Err(ProtocolError::PeerMisbehaved { .. })
        ));
    }
    // A request of the wrong length is refused by the responder.
    assert!(matches!(
        a[1].respond(&req, &[4, 5], &mut r),
        Err(ProtocolError::PeerMisbehaved { .. })
    ));
    // A second request before the response is the driver's error; the good response closes.
    assert!(matches!(
        a[0].initiate(1, 3, &[1, 2, 3], &mut r),
        Err(ProtocolError::OutOfOrder(_))
    ));
    assert_eq!(a[0].finish(&good, 0.1).unwrap().len(), 3);
    // An exchange never answered (the neighbour died) is abandoned by the next iteration's
    // request, and its late response is then refused.
    let lost = a[0].initiate(1, 4, &[1, 2, 3], &mut r).unwrap();
    let late = a[1].respond(&lost, &[4, 5, 6], &mut r).unwrap();
    let next = a[0].initiate(1, 5, &[1, 2, 3], &mut r).unwrap();
    assert!(matches!(
        a[0].finish(&late, 0.1),
        Err(ProtocolError::PeerMisbehaved { .. })
    ));
    let answer = a[1].respond(&next, &[4, 5, 6], &mut r).unwrap();
    assert_eq!(a[0].finish(&answer, 0.1).unwrap().len(), 3);
}

#[test]
fn public_keys_round_trip_and_bad_keys_are_refused() {
    let kp = &keys(1, 7)[0];
    let bytes = kp.public.to_bytes();
    let back = PublicKey::from_bytes(&bytes).unwrap();
    assert_eq!(back.n(), kp.public.n());
    // A ciphertext made under the decoded key decrypts under the original key pair.
    let mut r = SeedTree::new(8).stream("test/enc", &[]);
    let c = back
        .encrypt(&privopt_paillier::BigInt::from(-77), &mut r)
        .unwrap();
    assert_eq!(kp.decrypt(&c), privopt_paillier::BigInt::from(-77));
    let mut even = bytes.clone();
    even[4 + 127] &= 0xfe;
    assert!(PublicKey::from_bytes(&even).is_err());
    assert!(PublicKey::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    let mut other_size = bytes.clone();
    other_size[..4].copy_from_slice(&999u32.to_le_bytes());
    assert!(PublicKey::from_bytes(&other_size).is_err());
    let ann = KeyAnnouncement {
        agent: 4,
        key: back,
    };
    let ann = KeyAnnouncement::from_bytes::<Paillier>(&ann.to_bytes::<Paillier>()).unwrap();
    assert_eq!(ann.agent, 4);
}

#[test]
fn damaged_and_forged_exchange_bytes_are_typed_errors() {
    let mut a = path(2, 9);
    let mut r = SeedTree::new(10).stream("test/enc", &[]);
    let req = a[0].initiate(1, 0, &[3, -4], &mut r).unwrap();
    let resp = a[1].respond(&req, &[1, 1], &mut r).unwrap();
    let req_bytes = a[0].encode_request(&req);
    let resp_bytes = a[1].encode_response(&resp).unwrap();
    let ann_bytes = a[0].announcement().to_bytes::<Paillier>();
    for (bytes, name) in [
        (&req_bytes, "request"),
        (&resp_bytes, "response"),
        (&ann_bytes, "key"),
    ] {
        let decode = |b: &[u8]| {
            vec![
                a[1].decode_request(b).map(drop),
                a[0].decode_response(b).map(drop),
                KeyAnnouncement::<PublicKey>::from_bytes::<Paillier>(b).map(drop),
            ]
        };
        assert_eq!(damage::first_mishandled(bytes, 48, decode), None, "{name}");
    }
    // Forged: a ciphertext ≥ n², a sender that is not a neighbour, a lying count.
    let big = damage::forge(&req_bytes, |f| {
        let at = f.len() - 256;
        f[at..].fill(0xff);
    });
    assert!(
        a[1].decode_request(&big)
            .unwrap_err()
            .to_string()
            .contains("invalid ciphertext")
    );
    let stranger = damage::forge(&req_bytes, |f| f[0] = 7);
    assert!(
        a[1].decode_request(&stranger)
            .unwrap_err()
            .to_string()
            .contains("not a neighbour")
    );
    let lying = damage::forge(&req_bytes, |f| {
        f[16..20].copy_from_slice(&u32::MAX.to_le_bytes())
    });
    assert!(matches!(
        a[1].decode_request(&lying),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn the_transparent_scheme_refuses_overflow_instead_of_wrapping() {
    let key = TransparentKey {
        ciphertext_bytes: 512,
    };
    let mut a: Vec<Agent<Transparent>> = (0..2).map(|i| Agent::new(i, key, ())).collect();
    let ann: Vec<_> = a.iter().map(Agent::announcement).collect();
    a[0].add_neighbour(ann[1].clone(), 1).unwrap();
    a[1].add_neighbour(ann[0].clone(), i64::MAX).unwrap();
    let mut r = SeedTree::new(1).stream("x", &[]);
    let req = a[0].initiate(1, 0, &[-1], &mut r).unwrap();
    let e = a[1].respond(&req, &[1], &mut r).unwrap_err();
    assert!(e.to_string().contains("does not fit"), "{e}");
}
