//! DOME roles: rounds whose every message (broadcast, sketch columns, each SecAgg+ stage)
//! crosses as bytes, and every SecAgg+ client resumes from its snapshot's bytes before each
//! stage, end with the same model as the in-process rounds; SecAgg+ survives a
//! client that drops after sending its masked input; every decoder refuses damaged and forged
//! bytes with a typed error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_math::SeedTree;
use privopt_protocols::Message;
use privopt_protocols::dome::{
    BasisAssembler, BasisChunk, DomeServer, RoundBroadcast, ServerSettings, Sketch, SketchKind,
    basis_chunks, basis_wire_bytes, check_broadcast, quantizer, release, release_many,
};
use privopt_protocols::wire::damage;
use privopt_secagg::simulation::run_round;
use privopt_secagg::{
    AdvertiseKeys, Client, ClientConfig, ClientSnapshot, Context, Graph, IncomingShares,
    MaskedInput, NeighbourKeys, Server, ServerConfig, SessionId, ShareKeys, UnmaskRequest,
    UnmaskShares,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const D: usize = 24;
const K: usize = 4;
const B: usize = 6;

fn through<M: Message>(m: M) -> M {
    M::from_bytes(&m.to_bytes()).unwrap()
}

/// The client as another process would resume it: snapshot, bytes, restore.
fn resumed(client: &Client) -> Client {
    Client::restore(through(client.snapshot())).unwrap()
}

/// One SecAgg+ round with every message through its bytes; `drop_after_masking` leaves
/// before the unmask stage. Every damaged copy of every message is refused on the way.
fn secagg_through_bytes(
    context: Context,
    graph: &Graph,
    threshold: usize,
    inputs: &[Vec<u32>],
    drop_after_masking: Option<u32>,
    check_damage: bool,
) -> Vec<u32> {
    let n = graph.len();
    let vector_len = inputs[0].len();
    let mut server = Server::new(ServerConfig {
        context,
        graph: graph.clone(),
        threshold,
        vector_len,
    })
    .unwrap();
    let mut clients = Vec::new();
    for c in 0..n as u32 {
        let mut rng = ChaCha20Rng::seed_from_u64(7 ^ (u64::from(c) << 32));
        let config = ClientConfig {
            context,
            id: c,
            neighbours: graph.neighbours(c).to_vec(),
            threshold,
            vector_len,
        };
        let (client, advert) = Client::new(config, &mut rng).unwrap();
        if check_damage && c == 0 {
            refuse_damage::<AdvertiseKeys>(&advert.to_bytes());
            refuse_damage::<ClientSnapshot>(&client.snapshot().to_bytes());
        }
        server.receive_keys(through(advert)).unwrap();
        clients.push((client, rng));
    }
    let relayed: Vec<NeighbourKeys> = server.finish_advertising().unwrap();
    let mut shared = Vec::new();
    for ((client, rng), msg) in clients.iter_mut().zip(&relayed) {
        if check_damage && client.id() == 0 {
            refuse_damage::<NeighbourKeys>(&msg.to_bytes());
        }
        *client = resumed(client);
        shared.push(client.share_keys(&through(msg.clone()), rng).unwrap());
    }
    for s in shared {
        if check_damage && s.sender == 0 {
            refuse_damage::<ShareKeys>(&s.to_bytes());
        }
        server.receive_shares(through(s)).unwrap();
    }
    let routed: Vec<IncomingShares> = server.finish_sharing().unwrap();
    for ((client, _), msg) in clients.iter_mut().zip(&routed) {
        if check_damage && client.id() == 0 {
            refuse_damage::<IncomingShares>(&msg.to_bytes());
        }
        *client = resumed(client);
        let masked = client
            .mask_input(&through(msg.clone()), &inputs[client.id() as usize])
            .unwrap();
        if check_damage && client.id() == 0 {
            refuse_damage::<MaskedInput>(&masked.to_bytes());
        }
        server.receive_masked(&through(masked)).unwrap();
    }
    let requests: Vec<UnmaskRequest> = server.finish_masking().unwrap();
    for ((client, _), msg) in clients.iter_mut().zip(&requests) {
        if Some(client.id()) == drop_after_masking {
            continue;
        }
        if check_damage && client.id() == 0 {
            refuse_damage::<UnmaskRequest>(&msg.to_bytes());
        }
        *client = resumed(client);
        if check_damage && client.id() == 0 {
            refuse_damage::<ClientSnapshot>(&client.snapshot().to_bytes());
        }
        let reply = client.unmask(&through(msg.clone())).unwrap();
        if check_damage && client.id() == 0 {
            refuse_damage::<UnmaskShares>(&reply.to_bytes());
        }
        server.receive_unmask(through(reply)).unwrap();
    }
    server.finish().unwrap().sum
}

fn refuse_damage<M: Message + std::fmt::Debug>(bytes: &[u8]) {
    let decode = |b: &[u8]| vec![M::from_bytes(b).map(drop)];
    assert_eq!(
        damage::first_mishandled(bytes, 64, decode),
        None,
        "{}",
        M::NAME
    );
}

fn settings() -> ServerSettings {
    ServerSettings {
        lr: 0.05,
        beta1: 0.9,
        beta2: 0.999,
        gamma_prime: 1e-6,
        clip: 1.0,
        noise_total: 3.0,
        noise_floor: None,
        learned_sketch: true,
    }
}

/// `rounds` DOME rounds of `B` clients with fixed synthetic gradients; with `bytes`, every
/// message crosses as bytes. Returns the final model.
fn dome(rounds: u64, bytes: bool) -> Vec<f64> {
    let seeds = SeedTree::new(3);
    let mut rng = seeds.stream("dome", &[]);
    let sketch = Sketch::new(SketchKind::Learned { energy: 0.9 }, D, K, &mut rng).unwrap();
    let mut server = DomeServer::new(settings(), vec![0.1; D], sketch).unwrap();
    let graph = Graph::harary(B, 4, [11; 32]).unwrap();
    let session = SessionId([5; 16]);
    for t in 1..=rounds {
        let mut broadcast = server.open_round(t, B).unwrap();
        let assembled;
        let basis = if bytes {
            broadcast = through(broadcast);
            let privopt_protocols::dome::Basis::Matrix(s) = server.basis() else {
                panic!("a learned sketch has a matrix");
            };
            let mut asm = BasisAssembler::new(t, D, K);
            for chunk in basis_chunks(t, s) {
                asm.add(&through(chunk)).unwrap();
            }
            assembled = asm.finish().unwrap();
            privopt_protocols::dome::Basis::Matrix(assembled.as_ref())
        } else {
            server.basis()
        };
        let q = quantizer(&broadcast).unwrap();
        let inputs: Vec<Vec<u32>> = (0..B)
            .map(|c| {
                let mut g: Vec<f64> = (0..D)
                    .map(|j| ((c * 31 + j * 7 + t as usize) % 13) as f64 / 13.0 - 0.4)
                    .collect();
                q.encode(&release(&mut g, &broadcast, basis, &mut rng).unwrap().vector)
                    .unwrap()
            })
            .collect();
        let context = Context { session, round: t };
        let sum = if bytes {
            secagg_through_bytes(context, &graph, 3, &inputs, None, t == 1)
        } else {
            let refs: Vec<&[u32]> = inputs.iter().map(Vec::as_slice).collect();
            run_round(context, &graph, 3, &refs, &vec![None; B], 9)
                .unwrap()
                .0
                .sum
        };
        server.close_round(&sum, B, &mut rng).unwrap();
    }
    server.model().to_vec()
}

#[test]
fn releasing_many_gradients_at_once_equals_releasing_them_one_by_one() {
    let seeds = SeedTree::new(4);
    let mut rng = seeds.stream("sketch", &[]);
    let mut server = DomeServer::new(
        settings(),
        vec![0.1; D],
        Sketch::new(SketchKind::Random, D, K, &mut rng).unwrap(),
    )
    .unwrap();
    let broadcast = server.open_round(1, B).unwrap();
    // Large enough that some gradients are clipped and some are not.
    let grads: Vec<f64> = (0..D * B)
        .map(|i| ((i * 37) % 17) as f64 / 17.0 * (1 + i / D) as f64 - 0.5)
        .collect();
    let mut one_by_one = grads.clone();
    let mut rng_a = seeds.stream("noise", &[]);
    let singles: Vec<_> = one_by_one
        .chunks_mut(D)
        .map(|g| release(g, &broadcast, server.basis(), &mut rng_a).unwrap())
        .collect();
    let mut at_once = grads.clone();
    let mut rng_b = seeds.stream("noise", &[]);
    let many = release_many(&mut at_once, &broadcast, server.basis(), &mut rng_b).unwrap();
    assert_eq!(many.len(), B);
    assert_eq!(one_by_one, at_once, "both leave g − m̂ in place");
    for (a, b) in singles.iter().zip(&many) {
        assert_eq!(a.noise, b.noise, "the noise is drawn in the same order");
        for (x, y) in a.vector.iter().zip(&b.vector) {
            assert!((x - y).abs() <= 1e-12 * x.abs().max(1.0), "{x} vs {y}");
        }
    }
    let ragged = release_many(
        &mut at_once[..D + 1],
        &broadcast,
        server.basis(),
        &mut rng_b,
    );
    assert!(ragged.unwrap_err().to_string().contains("dimension 24"));
    assert!(release_many(&mut [], &broadcast, server.basis(), &mut rng_b).is_err());
}

#[test]
fn dome_rounds_through_bytes_equal_the_in_process_rounds() {
    let (mem, wire) = (dome(4, false), dome(4, true));
    assert_eq!(
        mem.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        wire.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert!(
        mem.iter().any(|&v| (v - 0.1).abs() > 1e-3),
        "the model moved"
    );
}

#[test]
fn secagg_through_bytes_survives_a_dropout_after_masking() {
    let graph = Graph::harary(B, 4, [2; 32]).unwrap();
    let inputs: Vec<Vec<u32>> = (0..B as u32).map(|c| vec![c, 10 * c, u32::MAX]).collect();
    let context = Context {
        session: SessionId([1; 16]),
        round: 1,
    };
    let sum = secagg_through_bytes(context, &graph, 3, &inputs, Some(2), false);
    // The dropped client's masked input arrived, so the sum still includes it.
    let want: Vec<u32> = (0..3)
        .map(|j| inputs.iter().fold(0u32, |a, v| a.wrapping_add(v[j])))
        .collect();
    assert_eq!(sum, want);
}

#[test]
fn dome_downlink_decoders_refuse_damaged_and_forged_bytes() {
    let b = RoundBroadcast {
        round: 2,
        participants: 5,
        noise_std: 0.3,
        clip: 1.0,
        quantizer_bound: 4.0,
        m_hat: vec![0.5; 10],
    };
    refuse_damage::<RoundBroadcast>(&b.to_bytes());
    let chunk = BasisChunk {
        round: 2,
        d: 3,
        k: 2,
        first: 1,
        values: vec![0.1, 0.2, 0.3],
    };
    refuse_damage::<BasisChunk>(&chunk.to_bytes());
    // Forged: zero participants; a column that runs past k; a ragged column; NaN.
    let bytes = b.to_bytes();
    let zero = damage::forge(&bytes, |f| f[8..12].copy_from_slice(&0u32.to_le_bytes()));
    assert!(RoundBroadcast::from_bytes(&zero).is_err());
    let past = damage::forge(&chunk.to_bytes(), |f| {
        f[16..20].copy_from_slice(&2u32.to_le_bytes())
    });
    assert!(
        BasisChunk::from_bytes(&past)
            .unwrap_err()
            .to_string()
            .contains("whole columns")
    );
    let nan = damage::forge(&bytes, |f| {
        let at = f.len() - 8;
        f[at..].copy_from_slice(&f64::NAN.to_bits().to_le_bytes());
    });
    assert!(RoundBroadcast::from_bytes(&nan).is_err());
    // The assembler refuses a repeated column and a chunk of another round, and reports a
    // missing one.
    let mut asm = BasisAssembler::new(2, 3, 2);
    asm.add(&chunk).unwrap();
    assert!(asm.add(&chunk).is_err());
    let mut other = chunk.clone();
    other.round = 3;
    other.first = 0;
    assert!(asm.add(&other).is_err());
    assert!(asm.finish().is_err());
}

#[test]
fn secagg_decoders_refuse_forged_fields() {
    let context = Context {
        session: SessionId([1; 16]),
        round: 1,
    };
    let req = UnmaskRequest {
        context,
        recipient: 1,
        survivors: vec![0, 2, 3],
    };
    let bytes = req.to_bytes();
    // Survivors out of order; a client id past the bound.
    let unsorted = damage::forge(&bytes, |f| {
        let n = f.len();
        f[n - 4..].copy_from_slice(&1u32.to_le_bytes());
    });
    assert!(
        UnmaskRequest::from_bytes(&unsorted)
            .unwrap_err()
            .to_string()
            .contains("increasing")
    );
    let huge = damage::forge(&bytes, |f| {
        f[24..28].copy_from_slice(&u32::MAX.to_le_bytes())
    });
    assert!(UnmaskRequest::from_bytes(&huge).is_err());
    // Random forged bodies of every kind never panic.
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for kind in 1..=7u8 {
        let frame =
            privopt_protocols::wire::encode(privopt_protocols::wire::Method::SecAgg, kind, |_| {});
        for len in [0usize, 3, 24, 28, 60, 200] {
            let body: Vec<u8> = (0..len).map(|_| rand::Rng::random(&mut rng)).collect();
            let forged = damage::forge(&frame, |f| f.extend_from_slice(&body));
            let _ = AdvertiseKeys::from_bytes(&forged);
            let _ = NeighbourKeys::from_bytes(&forged);
            let _ = ShareKeys::from_bytes(&forged);
            let _ = IncomingShares::from_bytes(&forged);
            let _ = MaskedInput::from_bytes(&forged);
            let _ = UnmaskRequest::from_bytes(&forged);
            let _ = UnmaskShares::from_bytes(&forged);
        }
    }
}

#[test]
fn secagg_client_restore_refuses_state_no_client_could_hold() {
    let graph = Graph::complete(4).unwrap();
    let context = Context {
        session: SessionId([3; 16]),
        round: 2,
    };
    let config = ClientConfig {
        context,
        id: 0,
        neighbours: graph.neighbours(0).to_vec(),
        threshold: 2,
        vector_len: 3,
    };
    let (client, _) = Client::new(config, &mut ChaCha20Rng::seed_from_u64(1)).unwrap();
    let good = client.snapshot();
    assert!(Client::restore(good.clone()).is_ok());
    let keys = privopt_secagg::PublicKeys {
        encryption: [9; 32],
        masking: [9; 32],
    };
    let refused = |edit: &dyn Fn(&mut ClientSnapshot)| {
        let mut s = good.clone();
        edit(&mut s);
        Client::restore(through(s)).is_err()
    };
    // Keys before the stage that receives them, keys of a non-neighbour, self as neighbour.
    assert!(refused(&|s| s.peers.push((1, keys))));
    assert!(refused(&|s| {
        s.stage = privopt_secagg::Stage::ShareKeys;
        s.peers.push((7, keys));
    }));
    assert!(refused(&|s| s.config.neighbours.insert(0, 0)));
    assert!(refused(&|s| s.config.threshold = 9));
    assert!(refused(&|s| s.stage = privopt_secagg::Stage::Unmask));
}

#[test]
fn an_aborted_round_changes_nothing_and_the_next_one_opens() {
    let mut rng = SeedTree::new(4).stream("abort", &[]);
    let sketch = Sketch::new(SketchKind::Learned { energy: 0.9 }, D, K, &mut rng).unwrap();
    let mut server = DomeServer::new(settings(), vec![0.1; D], sketch).unwrap();
    let before = server.model().to_vec();
    assert!(!server.abort_round());
    let first = server.open_round(1, B).unwrap();
    assert!(server.open_round(2, B).is_err());
    assert!(server.abort_round());
    assert_eq!(server.model(), before.as_slice());
    let again = server.open_round(2, B).unwrap();
    assert_eq!(first.m_hat, again.m_hat);
    assert!(server.close_round(&[0; K], B, &mut rng).is_ok());
}

#[test]
fn the_mean_is_over_contributors_and_the_noise_floor_refuses_thin_rounds() {
    let mut rng = SeedTree::new(5).stream("floor", &[]);
    let floor = ServerSettings {
        noise_total: 0.0,
        noise_floor: Some(0.5),
        ..settings()
    };
    let identity = || {
        Sketch::new(
            SketchKind::Identity,
            D,
            K,
            &mut SeedTree::new(6).stream("s", &[]),
        )
        .unwrap()
    };
    let mut server = DomeServer::new(floor, vec![0.1; D], identity()).unwrap();
    let broadcast = server.open_round(1, B).unwrap();
    // ⌈0.5 · 6⌉ = 3 contributors are needed; the driver can ask before unmasking.
    assert_eq!(server.required_contributors(), Some(3));
    let q = quantizer(&broadcast).unwrap();
    let v: Vec<f64> = (0..D).map(|j| (j as f64 - 10.0) / 100.0).collect();
    let one = q.encode(&v).unwrap();
    let sum_of = |n: usize| -> Vec<u32> {
        (0..D)
            .map(|j| (0..n).fold(0u32, |acc, _| acc.wrapping_add(one[j])))
            .collect()
    };
    let before = server.model().to_vec();
    let thin = server.close_round(&sum_of(2), 2, &mut rng);
    assert!(
        matches!(thin, Err(privopt_protocols::ProtocolError::Incomplete(_))),
        "{thin:?}"
    );
    assert_eq!(
        server.model(),
        before.as_slice(),
        "a refused round changed the model"
    );
    assert!(
        server.close_round(&sum_of(7), 7, &mut rng).is_err(),
        "more contributors than participants"
    );
    // Four of six contributed: ĝ is their mean (v), not their sum over six (4v/6).
    let g_hat = server.close_round(&sum_of(4), 4, &mut rng).unwrap();
    for (g, x) in g_hat.iter().zip(&v) {
        assert!((g - x).abs() < 1e-6, "{g} vs {x}");
    }
    // Without a floor the paper's shares hold and any contributor count is taken.
    let mut plain = DomeServer::new(settings(), vec![0.1; D], identity()).unwrap();
    let b = plain.open_round(1, B).unwrap();
    assert_eq!(plain.required_contributors(), Some(1));
    assert!((b.noise_std - (3.0 / B as f64).sqrt()).abs() < 1e-12);
    let mut floored = DomeServer::new(
        ServerSettings {
            noise_floor: Some(0.5),
            ..settings()
        },
        vec![0.1; D],
        identity(),
    )
    .unwrap();
    let b = floored.open_round(1, B).unwrap();
    assert!((b.noise_std - (3.0 / 3.0f64).sqrt()).abs() < 1e-12);
}

#[test]
fn the_sketch_traffic_formula_equals_the_encoded_chunks() {
    for (d, k) in [(1, 1), (24, 4), (1000, 37)] {
        let s = faer::Mat::<f64>::from_fn(d, k, |i, j| (i * k + j) as f64);
        let real: usize = basis_chunks(3, s.as_ref())
            .iter()
            .map(|c| c.to_bytes().len())
            .sum();
        assert_eq!(basis_wire_bytes(d, k), real as u64, "d = {d}, k = {k}");
    }
}

#[test]
fn sums_at_the_quantizer_boundary_decode_without_wrapping() {
    // Every participant at the quantizer's bound C + 10a (or beyond it, or at −bound): the
    // largest sums the 32-bit code must carry. Each code is at most (2^31 − 1)/B in magnitude,
    // so B of them stay within an i32 and the mod-2^32 sum decodes without wrapping.
    let identity = || {
        Sketch::new(
            SketchKind::Identity,
            D,
            K,
            &mut SeedTree::new(6).stream("s", &[]),
        )
        .unwrap()
    };
    let mut rng = SeedTree::new(7).stream("edge", &[]);
    for (value, expect) in [
        (1.0, 1.0),
        (-1.0, -1.0),
        (1e12, 1.0),
        (-1e12, -1.0),
        (1e300, 1.0),
    ] {
        let mut server = DomeServer::new(settings(), vec![0.1; D], identity()).unwrap();
        let broadcast = server.open_round(1, B).unwrap();
        let bound = broadcast.quantizer_bound;
        let q = quantizer(&broadcast).unwrap();
        // Infinity is refused, not clipped: it can only come from a broken computation.
        assert!(q.encode(&[f64::INFINITY; D]).is_err());
        let one = q.encode(&[value * bound; D]).unwrap();
        let sum: Vec<u32> = one.iter().map(|&w| w.wrapping_mul(B as u32)).collect();
        // The summed codes are exactly B times one code: no i32 overflow on the way.
        let code = one[0] as i32;
        assert!(
            i64::from(code).abs() * B as i64 <= i64::from(i32::MAX),
            "{code}"
        );
        let g_hat = server.close_round(&sum, B, &mut rng).unwrap();
        // ĝ is the mean (m̂ = 0 in round 1): the bound itself, up to half a step per summand.
        for g in &g_hat {
            assert!(
                (g - expect * bound).abs() <= q.sum_error_bound(B) / B as f64,
                "{value}: {g} vs {}",
                expect * bound
            );
        }
    }
    // Mixed signs at the bound: B − 1 at +bound and one at −bound.
    let mut server = DomeServer::new(settings(), vec![0.1; D], identity()).unwrap();
    let broadcast = server.open_round(1, B).unwrap();
    let (bound, q) = (broadcast.quantizer_bound, quantizer(&broadcast).unwrap());
    let (hi, lo) = (
        q.encode(&[bound; D]).unwrap(),
        q.encode(&[-bound; D]).unwrap(),
    );
    let sum: Vec<u32> = hi
        .iter()
        .zip(&lo)
        .map(|(&h, &l)| h.wrapping_mul(B as u32 - 1).wrapping_add(l))
        .collect();
    let g_hat = server.close_round(&sum, B, &mut rng).unwrap();
    let want = bound * (B as f64 - 2.0) / B as f64;
    assert!((g_hat[0] - want).abs() <= q.sum_error_bound(B) / B as f64);
}

#[test]
fn a_client_refuses_a_broadcast_with_less_noise_or_a_larger_clip_than_its_terms() {
    let run = ServerSettings {
        noise_floor: Some(0.5),
        ..settings()
    };
    let terms = run.noise();
    let identity = Sketch::new(
        SketchKind::Identity,
        D,
        K,
        &mut SeedTree::new(6).stream("s", &[]),
    )
    .unwrap();
    let mut server = DomeServer::new(run, vec![0.1; D], identity).unwrap();
    let honest = through(server.open_round(1, B).unwrap());
    // ⌈0.5 · 6⌉ = 3: the share is sized for three, and so is the client's unmask floor.
    assert_eq!(check_broadcast(&honest, run.clip, &terms).unwrap(), 3);
    let thin = RoundBroadcast {
        noise_std: honest.noise_std * 0.99,
        ..honest.clone()
    };
    let wide = RoundBroadcast {
        clip: run.clip * 1.01,
        ..honest.clone()
    };
    for lie in [thin, wide] {
        let e = check_broadcast(&lie, run.clip, &terms).unwrap_err();
        assert!(e.to_string().contains("this client's terms"), "{e}");
    }
    // A server that claims twice the participants may thin each share to match, but the
    // floor doubles with them: a sum the client helps unmask still carries the run's noise.
    server.abort_round();
    let inflated = server.open_round(1, 2 * B).unwrap();
    let floor = check_broadcast(&inflated, run.clip, &terms).unwrap();
    assert_eq!(floor, 6);
    assert!(floor as f64 * inflated.noise_std.powi(2) >= run.noise_total * (1.0 - 1e-12));
}
