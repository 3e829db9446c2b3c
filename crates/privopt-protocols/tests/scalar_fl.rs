//! Scalar-only FL roles: a federation driven only through encoded bytes ends bit for bit where
//! the in-process one does, and every decoder refuses damaged and forged bytes with a typed
//! error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_math::SeedTree;
use privopt_ml::zo::Difference;
use privopt_protocols::scalar_fl::{
    CatchUp, Client, ModelState, Probe, ReplaySpec, Reply, RoundPlan, Rule, Server, Update,
};
use privopt_protocols::wire::damage;
use privopt_protocols::{DecodeError, Message, ProtocolError};
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

/// `update` addressed to client `client` of session 5 (a catch-up no server sent).
fn to(client: usize, update: Update) -> CatchUp {
    CatchUp {
        session: 5,
        client,
        ticket: [1; 16],
        dim: match &update {
            Update::Full(state) => state.x.len(),
            _ => D,
        },
        update,
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
                assert!(matches!(msg.update, Update::Replay(ref v) if v.len() == 3));
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
    assert!(matches!(
        server.catch_up(1).unwrap().update,
        Update::Full(_)
    ));
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
        .receive(to(0, Update::Replay(records[..2].to_vec())), &spec)
        .unwrap();
    let before = bits(client.state());
    // Records 0, 1 again (held, skipped) then 3: round 2 is missing.
    let gap = vec![records[0].clone(), records[1].clone(), records[3].clone()];
    assert!(client.receive(to(0, Update::Replay(gap)), &spec).is_err());
    assert_eq!(bits(client.state()), before);
    // Repeated delivery of held records and the rest is fine.
    client
        .receive(to(0, Update::Replay(records.clone())), &spec)
        .unwrap();
    assert_eq!(client.state().round, 4);
}

/// One message of every kind and variant.
fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let plan = RoundPlan {
        session: 5,
        round: 7,
        seeds: vec![1, u64::MAX],
        clients: vec![0, 3, 9],
    };
    let reply = Reply {
        session: 5,
        client: 3,
        ticket: [1; 16],
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
        (
            "up to date",
            to(3, Update::UpToDate { round: 2 }).to_bytes(),
        ),
        (
            "replay",
            to(3, Update::Replay(vec![rec(2), rec(3)])).to_bytes(),
        ),
        ("full", to(3, Update::Full(full)).to_bytes()),
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
        session: 5,
        round: 7,
        seeds: vec![1, 2],
        clients: vec![0, 3],
    };
    assert_eq!(RoundPlan::from_bytes(&plan.to_bytes()).unwrap(), plan);
    let full = to(
        0,
        Update::Full(ModelState {
            x: vec![0.1],
            h: None,
            round: 4,
        }),
    );
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

/// Bytes of a catch-up's addressing: session, recipient, ticket, model length.
const ADDRESS: usize = 8 + 4 + 16 + 8;

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
    let huge = damage::forge(plan, |f| f[16..20].copy_from_slice(&u32::MAX.to_le_bytes()));
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
    // Replayed rounds with a gap (after the session, the recipient and the ticket).
    let gap = damage::forge(replay, |f| {
        let second = ADDRESS + 1 + 4 + 8 + 4 + 8 + 4 + 2 * 4;
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
    let variant = damage::forge(full, |f| f[ADDRESS] = 9);
    // A model length that is not the full state's.
    let length = damage::forge(full, |f| f[ADDRESS - 8] = 2);
    let e = CatchUp::from_bytes(&length).unwrap_err().to_string();
    assert!(e.contains("for a model of 2"), "{e}");
    assert!(
        CatchUp::from_bytes(&variant)
            .unwrap_err()
            .to_string()
            .contains("variant")
    );
    let flag = damage::forge(full, |f| f[ADDRESS + 1 + 8 + 4 + 3 * 8] = 2);
    assert!(CatchUp::from_bytes(&flag).is_err());
    let mut future = full.clone();
    future[4] = 3;
    let future = damage::forge(&future, |_| {});
    assert!(matches!(
        CatchUp::from_bytes(&future),
        Err(DecodeError::Version { version: 3, .. })
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
        Update::Replay(vec![rec]),
        Update::Full(ModelState {
            x: vec![0.0; D + 1],
            h: Some(vec![1.0; D + 1]),
            round: 0,
        }),
        Update::UpToDate { round: 3 },
    ] {
        let wrong_size = matches!(bad, Update::Full(_));
        let e = client.receive(to(0, bad), &spec).unwrap_err();
        if wrong_size {
            // A catch-up for a model of another length: the two sides were built differently.
            assert!(matches!(e, ProtocolError::Parameters(_)), "{e}");
            assert!(
                e.to_string().contains("13 parameters; client 0's has 12"),
                "{e}"
            );
        } else {
            assert!(matches!(e, ProtocolError::PeerMisbehaved { .. }), "{e}");
        }
        assert_eq!(client.state(), &initial);
    }
    // Another client's catch-up, even a harmless one.
    let e = client
        .receive(to(1, Update::UpToDate { round: 0 }), &spec)
        .unwrap_err();
    assert!(e.to_string().contains("catch-up of client 1"), "{e}");
    // A plan with a million seeds would make the client train a million steps.
    client
        .receive(to(0, Update::UpToDate { round: 0 }), &spec)
        .unwrap();
    let plan = RoundPlan {
        session: 5,
        round: 0,
        seeds: vec![0; 1_000_000],
        clients: vec![0],
    };
    let e = client
        .local_update(&plan, &spec, probe(), &loss(0))
        .unwrap_err();
    assert!(matches!(e, ProtocolError::PeerMisbehaved { .. }), "{e}");
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

/// Finding 2 of the third adversarial pass: the server trusted every reply. Now a huge scalar
/// is refused naming its sender; a reply under another client's id (without that client's
/// ticket) is refused and the real client's reply still counts; a reply or plan of another
/// server run is refused; and a model driven to infinity stops the round with `Diverged`.
#[test]
fn replies_are_bounded_and_bound_to_their_sender_and_session() {
    let spec = ReplaySpec {
        local_steps: 1,
        perturbations: 1,
        ..spec()
    };
    let initial = ModelState::initial(vec![0.5; D], spec.rule);
    let new_server = || Server::new(spec, initial.clone(), 3, None).unwrap();
    let mut server = new_server();
    let mut other_run = new_server();
    assert_ne!(server.session(), other_run.session());
    let mut rng = SeedTree::new(21).stream("test/bounds", &[]);
    let plan = server.begin_round(3, &mut rng).unwrap();
    let mut clients: Vec<Client> = (0..3).map(|c| Client::new(c, initial.clone())).collect();
    let replies: Vec<Reply> = clients
        .iter_mut()
        .enumerate()
        .map(|(c, client)| {
            client.receive(server.catch_up(c).unwrap(), &spec).unwrap();
            client
                .local_update(&plan, &spec, probe(), &loss(c))
                .unwrap()
        })
        .collect();
    let peer = |e: ProtocolError| match e {
        ProtocolError::PeerMisbehaved {
            peer: privopt_protocols::error::Peer::Party(p),
            detail,
            ..
        } => (p, detail),
        other => panic!("{other}"),
    };
    // 3e38 from client 1: refused, named.
    let mut huge = replies[1].clone();
    huge.scalars[0] = 3e38;
    let (who, why) = peer(server.check_reply(&huge, &[]).unwrap_err());
    assert_eq!(who, 1);
    assert!(why.contains("beyond the bound"), "{why}");
    server.set_scalar_bound(1e3).unwrap();
    let mut big = replies[1].clone();
    big.scalars[0] = 2e3;
    assert!(server.check_reply(&big, &[]).is_err());
    assert!(server.set_scalar_bound(f32::NAN).is_err() && server.set_scalar_bound(0.0).is_err());
    // Client 0 replies under client 2's id: no ticket of client 2, refused.
    let mut impostor = replies[0].clone();
    impostor.client = 2;
    let (who, why) = peer(server.check_reply(&impostor, &[]).unwrap_err());
    assert_eq!(who, 2);
    assert!(why.contains("ticket"), "{why}");
    // A reply made in another server run.
    let other_plan = other_run.begin_round(3, &mut rng).unwrap();
    let mut stranger = Client::new(0, initial.clone());
    stranger
        .receive(other_run.catch_up(0).unwrap(), &spec)
        .unwrap();
    let foreign = stranger
        .local_update(&other_plan, &spec, probe(), &loss(0))
        .unwrap();
    let (_, why) = peer(server.check_reply(&foreign, &[]).unwrap_err());
    assert!(why.contains("session"), "{why}");
    // A client refuses to train a plan of another run than its catch-up.
    let e = clients[0]
        .local_update(&other_plan, &spec, probe(), &loss(0))
        .unwrap_err();
    assert!(matches!(e, ProtocolError::PeerMisbehaved { .. }), "{e}");
    // The honest replies, client 2's included, complete the round.
    let before = server.state().x.clone();
    server.finish_round(&replies).unwrap();
    assert_ne!(server.state().x, before);

    // A learning rate that overflows the model: the round reports divergence.
    let wild = ReplaySpec { lr: 1e305, ..spec };
    let mut server = Server::new(wild, initial.clone(), 1, None).unwrap();
    let plan = server.begin_round(1, &mut rng).unwrap();
    let mut client = Client::new(0, initial.clone());
    client.receive(server.catch_up(0).unwrap(), &wild).unwrap();
    let mut reply = client
        .local_update(&plan, &wild, probe(), &loss(0))
        .unwrap();
    reply.scalars[0] = 1e5;
    server.set_scalar_bound(1e6).unwrap();
    let e = server.finish_round(&[reply]).unwrap_err();
    assert!(matches!(e, ProtocolError::Diverged { .. }), "{e}");
}

/// A state held in pieces (a PyTorch module's tensors), advanced window by window with
/// `apply_record`, and probed in place with `perturb`, gives the whole-vector values.
#[test]
fn windows_of_a_state_advance_and_perturb_as_the_whole_does() {
    use privopt_protocols::scalar_fl::{
        RoundRecord, Scratch, apply_record, load_preconditioner, perturb,
    };
    let spec = spec();
    let d = 9000; // three direction blocks, windows straddling their edges
    let mut whole = ModelState::initial((0..d).map(|j| (j as f64).sin()).collect(), spec.rule);
    let mut scratch = Scratch::default();
    let records: Vec<RoundRecord> = (0..3)
        .map(|r| RoundRecord {
            round: r,
            seeds: vec![11 + r, 29 * r + 1],
            scalars: (0..6).map(|i| (i as f32 - 2.5) * 0.3).collect(),
        })
        .collect();
    let mut x = whole.x.clone();
    let mut h = whole.h.clone().unwrap();
    for rec in &records {
        whole.apply(rec, &spec, &mut scratch).unwrap();
        let mut offset = 0;
        for len in [1, 4095, 3, 4000, 901] {
            let window = offset..offset + len;
            apply_record(
                rec,
                &spec,
                offset,
                &mut x[window.clone()],
                Some(&mut h[window]),
                &mut scratch,
            );
            offset += len;
        }
    }
    assert_eq!(x, whole.x);
    assert_eq!(Some(h.clone()), whole.h);
    // The in-place probe point equals x + t·H^{-1/2}u computed over the whole vector.
    let (t, offset, len) = (1e-3, 4090, 20);
    let mut window = x[offset..offset + len].to_vec();
    scratch.ensure(len);
    load_preconditioner(Some(&h[offset..offset + len]), len, &mut scratch);
    perturb(
        7,
        3,
        1,
        2,
        t,
        offset,
        &mut window,
        Some(&scratch.h_inv_sqrt),
    );
    let mut all = Scratch::default();
    all.ensure(d);
    whole.load_preconditioner(&mut all);
    let mut probe = x.clone();
    perturb(7, 3, 1, 2, t, 0, &mut probe, Some(&all.h_inv_sqrt));
    assert_eq!(&window[..], &probe[offset..offset + len]);
    // ... which is x + t·H^{-1/2}u with u drawn whole, as the engine's client draws it.
    let mut u = vec![0.0; d];
    privopt_ml::zo::gaussian_fill(
        &privopt_protocols::scalar_fl::direction_key(7, 3, 1, 2),
        &mut u,
    );
    for j in 0..d {
        assert_eq!(probe[j], x[j] + t * all.h_inv_sqrt[j] * u[j]);
    }
    // Without a preconditioner (DeComFL) the product by one is left out, to the same values.
    let (mut plain, mut ones) = (x.clone(), x.clone());
    perturb(7, 3, 1, 2, t, 0, &mut plain, None);
    perturb(7, 3, 1, 2, t, 0, &mut ones, Some(&vec![1.0; d]));
    assert_eq!(plain, ones);
}
