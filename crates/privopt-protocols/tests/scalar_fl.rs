//! Scalar-only FL roles: a federation driven only through encoded bytes ends bit for bit where
//! the in-process one does, and every decoder refuses damaged and forged bytes with a typed
//! error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_math::SeedTree;
use privopt_ml::zo::Difference;
use privopt_protocols::scalar_fl::{
    CatchUp, Client, ModelState, Probe, ReplaySpec, Reply, RoundPlan, Rule, Server,
};
use privopt_protocols::wire::damage;
use privopt_protocols::{DecodeError, Error, Message};
use proptest::prelude::*;

const D: usize = 12;
const CLIENTS: usize = 5;

fn spec() -> ReplaySpec {
    ReplaySpec {
        lr: 0.05,
        local_steps: 2,
        perturbations: 3,
        weight_decay: 0.0,
        rule: Rule::Hiso { nu: 0.1, eps: 1e-6 },
    }
}

fn probe() -> Probe {
    Probe {
        mu: 1e-3,
        difference: Difference::TwoPoint,
    }
}

/// Client `c`'s loss: a quadratic with its own centre, different per local step.
fn loss(c: usize) -> impl Fn(usize, &[f64]) -> f64 + Sync {
    move |k, x| {
        x.iter()
            .enumerate()
            .map(|(j, v)| (v - (c + j + k) as f64 / 10.0).powi(2))
            .sum()
    }
}

/// Runs `rounds` rounds with 3 of 5 clients each, client 4 dropping out (after its catch-up,
/// before replying) of every round it is sampled in, so its next catch-up repeats what it
/// holds; with `bytes`, every message crosses as its encoding. Returns the server's and each
/// client's final state.
fn federation(rounds: u64, bytes: bool) -> (ModelState, Vec<ModelState>) {
    let spec = spec();
    let initial = ModelState::initial(vec![0.5; D], spec.rule);
    let mut server = Server::new(spec, initial.clone(), CLIENTS, Some(2)).unwrap();
    let mut clients: Vec<Client> = (0..CLIENTS)
        .map(|c| Client::new(c, initial.clone()))
        .collect();
    let mut rng = SeedTree::new(11).stream("test/federation", &[]);
    for _ in 0..rounds {
        let mut plan = server.begin_round(3, &mut rng).unwrap();
        if bytes {
            plan = RoundPlan::from_bytes(&plan.to_bytes()).unwrap();
        }
        let mut replies = Vec::new();
        for &c in &plan.clients {
            let mut catch_up = server.catch_up(c).unwrap();
            if bytes {
                catch_up = CatchUp::from_bytes(&catch_up.to_bytes()).unwrap();
            }
            clients[c].receive(catch_up, &spec).unwrap();
            if c == 4 {
                continue;
            }
            let mut reply = clients[c]
                .local_update(&plan, &spec, probe(), &loss(c))
                .unwrap();
            if bytes {
                reply = Reply::from_bytes(&reply.to_bytes()).unwrap();
            }
            replies.push(reply);
        }
        server.finish_round(&replies).unwrap();
    }
    (
        server.state().clone(),
        clients.iter().map(|c| c.state().clone()).collect(),
    )
}

fn bits(s: &ModelState) -> (u64, Vec<u64>, Option<Vec<u64>>) {
    let b = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    (s.round, b(&s.x), s.h.as_deref().map(b))
}

#[test]
fn a_federation_through_bytes_ends_where_the_in_process_one_does() {
    let (server_mem, clients_mem) = federation(12, false);
    let (server_wire, clients_wire) = federation(12, true);
    assert_eq!(bits(&server_mem), bits(&server_wire));
    for (a, b) in clients_mem.iter().zip(&clients_wire) {
        assert_eq!(bits(a), bits(b));
    }
    // The model moved, and the clients that stayed in hold rounds the server has passed.
    assert_ne!(server_mem.x, vec![0.5; D]);
    assert!(clients_mem.iter().any(|c| c.round > 0));
}

#[test]
fn a_client_restarted_from_an_old_save_catches_up_by_replay() {
    let spec = spec();
    let initial = ModelState::initial(vec![0.5; D], spec.rule);
    let mut server = Server::new(spec, initial.clone(), 3, None).unwrap();
    let mut clients: Vec<Client> = (0..3).map(|c| Client::new(c, initial.clone())).collect();
    let mut rng = SeedTree::new(5).stream("test/restart", &[]);
    let mut saved = None;
    for r in 0..8u64 {
        let plan = server.begin_round(3, &mut rng).unwrap();
        let mut replies = Vec::new();
        for c in 0..3 {
            if c == 2 && r == 6 {
                // Restarted from its last save (round 3, the last message it handled).
                clients[2] = Client::new(2, saved.take().unwrap());
            }
            let msg = server.catch_up(c).unwrap();
            if c == 2 && r == 6 {
                assert!(matches!(msg, CatchUp::Replay(ref v) if v.len() == 3));
                assert!(
                    server.rewind(2, 3).is_err(),
                    "not once sent this round's catch-up"
                );
            }
            if c == 2 && (4..6).contains(&r) {
                continue; // killed: neither the catch-up nor a reply went anywhere
            }
            clients[c].receive(msg, &spec).unwrap();
            if c == 2 && r == 3 {
                saved = Some(clients[2].state().clone());
            }
            replies.push(
                clients[c]
                    .local_update(&plan, &spec, probe(), &loss(c))
                    .unwrap(),
            );
        }
        server.finish_round(&replies).unwrap();
        if r == 5 {
            server.rewind(2, 3).unwrap();
        }
    }
    assert_eq!(server.full_downloads(), 0);
    let plan = server.begin_round(3, &mut rng).unwrap();
    for c in plan.clients {
        clients[c]
            .receive(server.catch_up(c).unwrap(), &spec)
            .unwrap();
        assert_eq!(bits(clients[c].state()), bits(server.state()));
    }
    assert!(server.rewind(7, 0).is_err() && server.rewind(0, 99).is_err());
    // A client that lost everything gets the full state once the history is gone.
    server.finish_round(&[]).unwrap();
    server.rewind(1, 0).unwrap();
    server.begin_round(3, &mut rng).unwrap();
    assert!(matches!(server.catch_up(1).unwrap(), CatchUp::Full(_)));
}

#[test]
fn a_replay_that_skips_a_round_the_client_lacks_is_refused() {
    let spec = spec();
    let initial = ModelState::initial(vec![0.5; D], spec.rule);
    let mut server = Server::new(spec, initial.clone(), 2, None).unwrap();
    let mut rng = SeedTree::new(6).stream("test/gap", &[]);
    for _ in 0..4 {
        server.begin_round(1, &mut rng).unwrap();
        server.finish_round(&[]).unwrap();
    }
    let records: Vec<_> = server.history().cloned().collect();
    let mut client = Client::new(0, initial);
    client
        .receive(CatchUp::Replay(records[..2].to_vec()), &spec)
        .unwrap();
    let before = bits(client.state());
    // Records 0, 1 again (held, skipped) then 3: round 2 is missing.
    let gap = vec![records[0].clone(), records[1].clone(), records[3].clone()];
    assert!(client.receive(CatchUp::Replay(gap), &spec).is_err());
    assert_eq!(bits(client.state()), before);
    // Repeated delivery of held records and the rest is fine.
    client
        .receive(CatchUp::Replay(records.clone()), &spec)
        .unwrap();
    assert_eq!(client.state().round, 4);
}

/// One message of every kind and variant.
fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let plan = RoundPlan {
        round: 7,
        seeds: vec![1, u64::MAX],
        clients: vec![0, 3, 9],
    };
    let reply = Reply {
        client: 3,
        round: 7,
        scalars: vec![0.25, -1.5, 3.0],
    };
    let rec = |round| privopt_protocols::scalar_fl::RoundRecord {
        round,
        seeds: vec![round * 3],
        scalars: vec![0.5, -0.125],
    };
    let full = ModelState {
        x: vec![0.1, -0.2, 0.3],
        h: Some(vec![1.0, 2.0, 0.5]),
        round: 4,
    };
    vec![
        ("plan", plan.to_bytes()),
        ("reply", reply.to_bytes()),
        ("up to date", CatchUp::UpToDate { round: 2 }.to_bytes()),
        ("replay", CatchUp::Replay(vec![rec(2), rec(3)]).to_bytes()),
        ("full", CatchUp::Full(full).to_bytes()),
    ]
}

fn decode_any(bytes: &[u8]) -> Vec<Result<(), DecodeError>> {
    vec![
        RoundPlan::from_bytes(bytes).map(drop),
        Reply::from_bytes(bytes).map(drop),
        CatchUp::from_bytes(bytes).map(drop),
    ]
}

#[test]
fn every_message_round_trips() {
    let plan = RoundPlan {
        round: 7,
        seeds: vec![1, 2],
        clients: vec![0, 3],
    };
    assert_eq!(RoundPlan::from_bytes(&plan.to_bytes()).unwrap(), plan);
    let full = CatchUp::Full(ModelState {
        x: vec![0.1],
        h: None,
        round: 4,
    });
    assert_eq!(CatchUp::from_bytes(&full.to_bytes()).unwrap(), full);
}

#[test]
fn damaged_bytes_are_typed_errors_for_every_decoder() {
    for (name, bytes) in samples() {
        assert_eq!(
            damage::first_mishandled(&bytes, 64, decode_any),
            None,
            "{name}"
        );
    }
    // Each decoder accepts only its own kind.
    let plan = &samples()[0].1;
    assert!(matches!(
        Reply::from_bytes(plan),
        Err(DecodeError::WrongKind { .. })
    ));
}

#[test]
fn forged_fields_are_refused_by_validation() {
    let s = samples();
    let (plan, reply, replay, full) = (&s[0].1, &s[1].1, &s[3].1, &s[4].1);
    // Participants out of order.
    let unsorted = damage::forge(plan, |f| {
        let n = f.len();
        f[n - 4] = 1;
    });
    let e = RoundPlan::from_bytes(&unsorted).unwrap_err().to_string();
    assert!(e.contains("ascending"), "{e}");
    // A count far beyond the bytes: refused before any allocation.
    let huge = damage::forge(plan, |f| f[8..12].copy_from_slice(&u32::MAX.to_le_bytes()));
    assert!(matches!(
        RoundPlan::from_bytes(&huge),
        Err(DecodeError::Truncated { .. })
    ));
    // A NaN scalar.
    let nan = damage::forge(reply, |f| {
        let at = f.len() - 4;
        f[at..].copy_from_slice(&f32::NAN.to_bits().to_le_bytes());
    });
    assert!(
        Reply::from_bytes(&nan)
            .unwrap_err()
            .to_string()
            .contains("non-finite")
    );
    // Replayed rounds with a gap.
    let gap = damage::forge(replay, |f| {
        let second = 1 + 4 + 8 + 4 + 8 + 4 + 2 * 4;
        f[second..second + 8].copy_from_slice(&9u64.to_le_bytes());
    });
    assert!(
        CatchUp::from_bytes(&gap)
            .unwrap_err()
            .to_string()
            .contains("consecutive")
    );
    // A non-positive Hessian entry, an unknown variant, a bad flag, a future version.
    let neg = damage::forge(full, |f| {
        let at = f.len() - 8;
        f[at..].copy_from_slice(&(-1.0f64).to_le_bytes());
    });
    assert!(CatchUp::from_bytes(&neg).is_err());
    let variant = damage::forge(full, |f| f[0] = 9);
    assert!(
        CatchUp::from_bytes(&variant)
            .unwrap_err()
            .to_string()
            .contains("variant")
    );
    let flag = damage::forge(full, |f| f[1 + 8 + 4 + 3 * 8] = 2);
    assert!(CatchUp::from_bytes(&flag).is_err());
    let mut future = full.clone();
    future[4] = 2;
    let future = damage::forge(&future, |_| {});
    assert!(matches!(
        CatchUp::from_bytes(&future),
        Err(DecodeError::Version { version: 2, .. })
    ));
}

#[test]
fn a_hostile_catch_up_or_plan_is_a_peer_error_and_changes_nothing() {
    let spec = spec();
    let initial = ModelState::initial(vec![0.5; D], spec.rule);
    let mut client = Client::new(0, initial.clone());
    // A replay that skips a round, and a full state of the wrong size.
    let rec = privopt_protocols::scalar_fl::RoundRecord {
        round: 1,
        seeds: vec![1, 2],
        scalars: vec![0.0; 6],
    };
    for bad in [
        CatchUp::Replay(vec![rec]),
        CatchUp::Full(ModelState {
            x: vec![0.0; D + 1],
            h: Some(vec![1.0; D + 1]),
            round: 0,
        }),
        CatchUp::UpToDate { round: 3 },
    ] {
        let e = client.receive(bad, &spec).unwrap_err();
        assert!(matches!(e, Error::PeerMisbehaved { .. }), "{e}");
        assert_eq!(client.state(), &initial);
    }
    // A plan with a million seeds would make the client train a million steps.
    let plan = RoundPlan {
        round: 0,
        seeds: vec![0; 1_000_000],
        clients: vec![0],
    };
    let e = client
        .local_update(&plan, &spec, probe(), &loss(0))
        .unwrap_err();
    assert!(matches!(e, Error::PeerMisbehaved { .. }), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random bodies with a valid frame and checksum (what a malicious peer can send) never
    /// panic and never allocate beyond their own size.
    #[test]
    fn random_forged_bodies_never_panic(kind in 1u8..=3, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let frame = privopt_protocols::wire::encode(privopt_protocols::wire::Method::ScalarFl, kind, |_| {});
        let forged = damage::forge(&frame, |f| f.extend_from_slice(&body));
        let _ = decode_any(&forged);
    }
}
