//! Scalar-only FL's replicated state (the HiSo paper): every client that pulls holds the
//! server's model and Hessian bit for bit, history kept back to the stalest client, the full
//! state past the staleness bound, refused replies that change nothing, and the HiSo update.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::needless_range_loop
)]

use privopt_math::SeedTree;
use privopt_ml::zo::{Difference, gaussian_fill};
use privopt_protocols::scalar_fl::{
    CatchUp, Client, ModelState, Probe, ReplaySpec, Reply, RoundRecord, Rule, Scratch, Server,
    Update, direction_key,
};
use rand::Rng;

const D: usize = 40;

/// Client `i`'s loss: a quadratic centred at a client-specific point, scaled per coordinate
/// (anisotropic, so HiSo's Hessian has something to learn).
fn client_loss(i: usize) -> impl Fn(usize, &[f64]) -> f64 + Sync {
    move |_k, x: &[f64]| {
        x.iter()
            .enumerate()
            .map(|(j, v)| {
                let c = ((i * 7 + j) % 5) as f64 * 0.1;
                0.5 * (1.0 + j as f64 / 4.0) * (v - c) * (v - c)
            })
            .sum()
    }
}

fn hiso_spec() -> ReplaySpec {
    ReplaySpec {
        lr: 0.01,
        local_steps: 2,
        perturbations: 3,
        weight_decay: 1e-3,
        rule: Rule::Hiso { nu: 0.1, eps: 1e-6 },
    }
}

fn probe() -> Probe {
    Probe {
        mu: 1e-4,
        difference: Difference::OneSided,
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn assert_same_state(a: &ModelState, b: &ModelState) {
    assert_eq!(a.round, b.round);
    assert_eq!(bits(&a.x), bits(&b.x), "models differ");
    assert_eq!(
        a.h.as_deref().map(bits),
        b.h.as_deref().map(bits),
        "Hessians differ"
    );
}

/// One round: catch up every participant, train (some drop out), close the round.
fn round(
    server: &mut Server,
    clients: &mut [Client],
    spec: &ReplaySpec,
    per_round: usize,
    rng: &mut impl Rng,
) -> Vec<(usize, CatchUp)> {
    let plan = server.begin_round(per_round, rng).unwrap();
    let mut replies = Vec::new();
    let mut msgs = Vec::new();
    for &c in &plan.clients {
        let msg = server.catch_up(c).unwrap();
        msgs.push((c, msg.clone()));
        clients[c].receive(msg, spec).unwrap();
        // After the catch-up the client holds the server's state exactly.
        assert_same_state(clients[c].state(), server.state());
        if rng.random::<f64>() < 0.2 {
            continue; // dropped after its catch-up
        }
        replies.push(
            clients[c]
                .local_update(&plan, spec, probe(), &client_loss(c))
                .unwrap(),
        );
    }
    server.finish_round(&replies).unwrap();
    msgs
}

fn federation(spec: &ReplaySpec, n: usize, bound: Option<u64>) -> (Server, Vec<Client>) {
    let x0: Vec<f64> = (0..D).map(|j| (j as f64 * 0.37).sin()).collect();
    let initial = ModelState::initial(x0, spec.rule);
    let server = Server::new(*spec, initial.clone(), n, bound).unwrap();
    let clients = (0..n).map(|i| Client::new(i, initial.clone())).collect();
    (server, clients)
}

#[test]
fn every_client_that_pulls_holds_the_servers_model_and_hessian_bit_for_bit() {
    for spec in [
        hiso_spec(),
        ReplaySpec {
            rule: Rule::Decomfl,
            ..hiso_spec()
        },
    ] {
        let n = 12;
        let (mut server, mut clients) = federation(&spec, n, None);
        let mut rng = SeedTree::new(4).stream("test/rounds", &[]);
        for _ in 0..60 {
            round(&mut server, &mut clients, &spec, 3, &mut rng);
        }
        // Training moved the model, and HiSo's H away from its initial identity.
        let loss = |x: &[f64]| (0..n).map(|i| client_loss(i)(0, x)).sum::<f64>();
        let x0 = federation(&spec, n, None).0.state().x.clone();
        assert!(loss(&server.state().x) < 0.8 * loss(&x0));
        if let Some(h) = &server.state().h {
            assert!(h.iter().any(|v| (v - 1.0).abs() > 0.05));
        }
        // A final pull by everyone, including clients that skipped many rounds.
        let plan = server.begin_round(n, &mut rng).unwrap();
        for &c in &plan.clients {
            let msg = server.catch_up(c).unwrap();
            clients[c].receive(msg, &spec).unwrap();
            assert_same_state(clients[c].state(), server.state());
        }
    }
}

#[test]
fn history_is_kept_back_to_the_stalest_client_and_no_further() {
    let spec = hiso_spec();
    let n = 10;
    let (mut server, mut clients) = federation(&spec, n, None);
    let mut rng = SeedTree::new(5).stream("test/gc", &[]);
    for _ in 0..40 {
        round(&mut server, &mut clients, &spec, 2, &mut rng);
        let stalest = *server.synced_rounds().iter().min().unwrap();
        let oldest = server.history().next().map(|r| r.round);
        assert_eq!(oldest.unwrap_or(server.state().round), stalest);
        // The kept records are exactly the rounds stalest..now.
        let rounds: Vec<u64> = server.history().map(|r| r.round).collect();
        assert_eq!(rounds, (stalest..server.state().round).collect::<Vec<_>>());
    }
    assert_eq!(server.full_downloads(), 0);
}

#[test]
fn a_client_past_the_staleness_bound_gets_the_full_state_and_its_bytes_are_counted() {
    let spec = hiso_spec();
    let n = 10;
    let bound = 3;
    let (mut server, mut clients) = federation(&spec, n, Some(bound));
    let mut rng = SeedTree::new(6).stream("test/stale", &[]);
    let mut saw_full = false;
    let per_record =
        8 * spec.local_steps as u64 + 4 * (spec.local_steps * spec.perturbations) as u64;
    for _ in 0..40 {
        let before: Vec<u64> = server.synced_rounds().to_vec();
        let now = server.state().round;
        for (c, msg) in round(&mut server, &mut clients, &spec, 2, &mut rng) {
            let behind = now - before[c];
            match &msg.update {
                Update::UpToDate { .. } => assert_eq!((behind, msg.bytes()), (0, 0)),
                Update::Replay(recs) => {
                    assert!(behind >= 1 && behind <= bound);
                    assert_eq!(recs.len() as u64, behind);
                    assert_eq!(msg.bytes(), per_record * behind);
                }
                Update::Full(s) => {
                    saw_full = true;
                    assert!(behind > bound, "client {c} was only {behind} rounds behind");
                    assert_eq!(s.round, now);
                    assert_eq!(msg.bytes(), 8 * 2 * D as u64, "model and Hessian, f64");
                }
            }
        }
        // History never reaches back past the bound.
        if let Some(oldest) = server.history().next() {
            assert!(server.state().round - oldest.round <= bound);
        }
    }
    assert!(saw_full && server.full_downloads() > 0);
}

#[test]
fn wrong_round_duplicate_foreign_and_malformed_replies_are_rejected_and_change_nothing() {
    let spec = hiso_spec();
    let (mut server, mut clients) = federation(&spec, 6, None);
    let mut rng = SeedTree::new(7).stream("test/reject", &[]);
    let plan = server.begin_round(3, &mut rng).unwrap();
    let mut replies = Vec::new();
    for &c in &plan.clients {
        let m = server.catch_up(c).unwrap();
        clients[c].receive(m, &spec).unwrap();
        replies.push(
            clients[c]
                .local_update(&plan, &spec, probe(), &client_loss(c))
                .unwrap(),
        );
    }
    let outsider = (0..6).find(|c| !plan.clients.contains(c)).unwrap();
    let before = server.state().clone();
    type Edit = Box<dyn Fn(&mut Vec<Reply>)>;
    let tamper: [(&str, Edit); 5] = [
        ("replied for round", Box::new(|r| r[0].round += 1)),
        ("replied twice", Box::new(|r| r.push(r[0].clone()))),
        (
            "which it is not in",
            Box::new(move |r| r[0].client = outsider),
        ),
        (
            "scalars",
            Box::new(|r| r[1].scalars.pop().map(|_| ()).unwrap()),
        ),
        ("scalars", Box::new(|r| r[2].scalars[0] = f32::NAN)),
    ];
    for (what, edit) in &tamper {
        let mut bad = replies.clone();
        edit(&mut bad);
        let e = server.finish_round(&bad).unwrap_err();
        assert!(
            matches!(e, privopt_protocols::ProtocolError::PeerMisbehaved { .. }),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains(what), "{e}");
        assert_same_state(server.state(), &before);
    }
    // Catch-ups only for participants; a second round cannot open over this one.
    assert!(server.catch_up(outsider).is_err());
    assert!(server.begin_round(2, &mut rng).is_err());
    server.finish_round(&replies).unwrap();
    assert_eq!(server.state().round, 1);
    assert!(server.finish_round(&replies).is_err(), "no round is open");

    // A client refuses records that do not continue its state, and plans for another round.
    let mut c = Client::new(0, before.clone());
    let rec = server.history().next().unwrap().clone();
    let mut skipped = rec.clone();
    skipped.round = 1;
    let to_c = |update| CatchUp {
        session: server.session(),
        client: 0,
        ticket: [0; 16],
        dim: before.x.len(),
        update,
    };
    assert!(
        c.receive(to_c(Update::Replay(vec![skipped])), &spec)
            .is_err()
    );
    assert!(
        c.receive(to_c(Update::UpToDate { round: 1 }), &spec)
            .is_err()
    );
    let mut short = rec.clone();
    short.scalars.pop();
    assert!(c.receive(to_c(Update::Replay(vec![short])), &spec).is_err());
    c.receive(to_c(Update::UpToDate { round: 0 }), &spec)
        .unwrap();
    let mut wrong_plan = plan.clone();
    wrong_plan.round = 5;
    assert!(
        c.local_update(&wrong_plan, &spec, probe(), &client_loss(0))
            .is_err()
    );
}

#[test]
fn replay_applies_the_documented_hiso_update() {
    // One round, τ = 2, P = 2, weight decay 0.02, checked against the formulas written out
    // independently.
    let spec = ReplaySpec {
        lr: 0.05,
        local_steps: 2,
        perturbations: 2,
        weight_decay: 0.02,
        rule: Rule::Hiso { nu: 0.3, eps: 1e-3 },
    };
    let d = 9;
    let mut state = ModelState::initial(vec![0.5; d], spec.rule);
    state.h = Some((0..d).map(|j| 0.5 + j as f64).collect());
    let h0 = state.h.clone().unwrap();
    let rec = RoundRecord {
        round: 0,
        seeds: vec![11, 12],
        scalars: vec![0.7, -1.25, 2.0, 0.125],
    };
    let mut expect_x = state.x.clone();
    let mut expect_h = h0.clone();
    let mut u = vec![0.0; d];
    for k in 0..2 {
        let mut delta = vec![0.0; d];
        for p in 0..2 {
            gaussian_fill(&direction_key(rec.seeds[k], 0, k as u64, p as u64), &mut u);
            for j in 0..d {
                delta[j] += f64::from(rec.scalars[2 * k + p]) / 2.0 * u[j] / h0[j].sqrt();
            }
        }
        for j in 0..d {
            expect_x[j] = (1.0 - 0.05 * 0.02) * expect_x[j] - 0.05 * delta[j];
            expect_h[j] = 0.7 * expect_h[j] + 0.3 * (delta[j] * delta[j] + 1e-3);
        }
    }
    state.apply(&rec, &spec, &mut Scratch::default()).unwrap();
    for j in 0..d {
        assert!((state.x[j] - expect_x[j]).abs() < 1e-15);
        assert!((state.h.as_ref().unwrap()[j] - expect_h[j]).abs() < 1e-15);
    }
    assert_eq!(state.round, 1);
    // DeComFL's update is the same with H = I and no state.
    let dspec = ReplaySpec {
        rule: Rule::Decomfl,
        ..spec
    };
    let mut plain = ModelState::initial(vec![0.5; d], Rule::Decomfl);
    assert!(plain.h.is_none());
    plain.apply(&rec, &dspec, &mut Scratch::default()).unwrap();
    let mut expect = vec![0.5; d];
    for k in 0..2 {
        let mut delta = vec![0.0; d];
        for p in 0..2 {
            gaussian_fill(&direction_key(rec.seeds[k], 0, k as u64, p as u64), &mut u);
            for j in 0..d {
                delta[j] += f64::from(rec.scalars[2 * k + p]) / 2.0 * u[j];
            }
        }
        for j in 0..d {
            expect[j] = (1.0 - 0.05 * 0.02) * expect[j] - 0.05 * delta[j];
        }
    }
    for j in 0..d {
        assert!((plain.x[j] - expect[j]).abs() < 1e-15);
    }
    // A record for another round is refused.
    assert!(plain.apply(&rec, &dspec, &mut Scratch::default()).is_err());
}
