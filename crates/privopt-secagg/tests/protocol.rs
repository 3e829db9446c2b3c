//! SecAgg+ rounds end to end: exact sums under dropouts, aborts, and refused messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_secagg::simulation::{Dropouts, run_round};
use privopt_secagg::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn context(round: u64) -> Context {
    Context {
        session: SessionId([7; 16]),
        round,
    }
}

fn random_inputs(n: usize, d: usize, rng: &mut impl Rng) -> Vec<Vec<u32>> {
    (0..n)
        .map(|_| (0..d).map(|_| rng.random()).collect())
        .collect()
}

fn refs(inputs: &[Vec<u32>]) -> Vec<&[u32]> {
    inputs.iter().map(Vec::as_slice).collect()
}

fn expected_sum(inputs: &[Vec<u32>], contributors: &[ClientId]) -> Vec<u32> {
    let mut sum = vec![0u32; inputs[0].len()];
    for &c in contributors {
        for (s, x) in sum.iter_mut().zip(&inputs[c as usize]) {
            *s = s.wrapping_add(*x);
        }
    }
    sum
}

/// Each client independently drops at a uniformly chosen stage with probability `rate`.
fn random_dropouts(n: usize, rate: f64, rng: &mut impl Rng) -> Dropouts {
    let stages = [
        Stage::AdvertiseKeys,
        Stage::ShareKeys,
        Stage::MaskedInput,
        Stage::Unmask,
    ];
    (0..n)
        .map(|_| {
            rng.random_bool(rate)
                .then(|| stages[rng.random_range(0..4)])
        })
        .collect()
}

fn survivors_through(dropouts: &Dropouts, stage: Stage) -> Vec<ClientId> {
    (0..dropouts.len() as ClientId)
        .filter(|&c| dropouts[c as usize].is_none_or(|s| s > stage))
        .collect()
}

#[test]
fn the_sum_is_exact_under_random_dropouts_at_every_stage() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let mut stages_hit = std::collections::BTreeSet::new();
    for trial in 0..12u64 {
        // Alternate the complete graph (SecAgg) and a sparse Harary graph (SecAgg+).
        let (graph, threshold) = if trial % 2 == 0 {
            (Graph::complete(12).unwrap(), 6)
        } else {
            (Graph::harary(40, 12, [trial as u8; 32]).unwrap(), 7)
        };
        let n = graph.len();
        let inputs = random_inputs(n, 1000, &mut rng);
        let dropouts = random_dropouts(n, 0.2, &mut rng);
        stages_hit.extend(dropouts.iter().flatten().copied());
        let (aggregate, _) = run_round(
            context(trial),
            &graph,
            threshold,
            &refs(&inputs),
            &dropouts,
            trial,
        )
        .unwrap();
        // Contributors are exactly the clients that sent masked inputs, including those that
        // dropped afterwards during unmasking.
        let expected = survivors_through(&dropouts, Stage::MaskedInput);
        assert_eq!(aggregate.contributors, expected, "trial {trial}");
        assert_eq!(
            aggregate.sum,
            expected_sum(&inputs, &expected),
            "trial {trial}"
        );
    }
    assert_eq!(stages_hit.len(), 4, "every stage saw a dropout");
}

#[test]
fn a_mask_left_in_changes_the_sum() {
    // Guard against a test that cannot fail: the same round without dropouts is exact, and the
    // sum differs from the plain sum if any single client's input is left out.
    let graph = Graph::complete(5).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let inputs = random_inputs(5, 64, &mut rng);
    let none: Dropouts = vec![None; 5];
    let (aggregate, _) = run_round(context(0), &graph, 3, &refs(&inputs), &none, 0).unwrap();
    assert_eq!(aggregate.sum, expected_sum(&inputs, &[0, 1, 2, 3, 4]));
    assert_ne!(aggregate.sum, expected_sum(&inputs, &[0, 1, 2, 3]));
}

#[test]
fn too_few_survivors_abort_the_round_with_a_clear_error() {
    let graph = Graph::complete(6).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let inputs = random_inputs(6, 16, &mut rng);
    for stage in [
        Stage::AdvertiseKeys,
        Stage::ShareKeys,
        Stage::MaskedInput,
        Stage::Unmask,
    ] {
        // Three of six drop, leaving each survivor two live neighbours: below t = 4.
        let dropouts: Dropouts = (0..6).map(|c| (c < 3).then_some(stage)).collect();
        let err = run_round(context(1), &graph, 4, &refs(&inputs), &dropouts, 1).unwrap_err();
        match err {
            SecAggError::BelowThreshold {
                threshold: 4, live, ..
            } => assert!(live < 4, "{err}"),
            other => panic!("expected BelowThreshold at {stage:?}, got {other}"),
        }
        assert!(err.to_string().contains("threshold 4"), "{err}");
    }
}

/// Runs stages 1–2 by hand on the complete graph with vectors of length `d` and returns the
/// server, clients and routed shares.
fn through_sharing(
    n: usize,
    t: usize,
    ctx: Context,
    seed: u64,
) -> (Server, Vec<Client>, Vec<IncomingShares>) {
    through_sharing_len(n, t, ctx, seed, 8)
}

fn through_sharing_len(
    n: usize,
    t: usize,
    ctx: Context,
    seed: u64,
    d: usize,
) -> (Server, Vec<Client>, Vec<IncomingShares>) {
    let graph = Graph::complete(n).unwrap();
    let mut server = Server::new(ServerConfig {
        context: ctx,
        graph: graph.clone(),
        threshold: t,
        vector_len: d,
    })
    .unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut clients = Vec::new();
    for c in 0..n as ClientId {
        let config = ClientConfig {
            context: ctx,
            id: c,
            neighbours: graph.neighbours(c).to_vec(),
            threshold: t,
            vector_len: d,
        };
        let (client, advert) = Client::new(config, &mut rng).unwrap();
        server.receive_keys(advert).unwrap();
        clients.push(client);
    }
    let relayed = server.finish_advertising().unwrap();
    for (client, msg) in clients.iter_mut().zip(&relayed) {
        let reply = client.share_keys(msg, &mut rng).unwrap();
        server.receive_shares(reply).unwrap();
    }
    let routed = server.finish_sharing().unwrap();
    (server, clients, routed)
}

#[test]
fn tampered_shares_are_rejected_and_change_nothing() {
    let (_, mut clients, routed) = through_sharing(4, 2, context(3), 9);
    let mut tampered = routed[0].clone();
    tampered.shares[1].ciphertext[5] ^= 0x01;
    let from = tampered.shares[1].peer;
    let err = clients[0].mask_input(&tampered, &[1; 8]).unwrap_err();
    assert_eq!(err, SecAggError::Authentication { from });
    // A share re-labelled as coming from another client fails too.
    let mut relabelled = routed[0].clone();
    relabelled.shares.swap(0, 1);
    let (a, b) = (relabelled.shares[0].peer, relabelled.shares[1].peer);
    relabelled.shares[0].peer = b;
    relabelled.shares[1].peer = a;
    assert!(matches!(
        clients[0].mask_input(&relabelled, &[1; 8]),
        Err(SecAggError::Authentication { .. })
    ));
    // The client is still in the sharing stage and accepts the genuine message.
    assert_eq!(clients[0].stage(), Stage::ShareKeys);
    clients[0].mask_input(&routed[0], &[1; 8]).unwrap();
}

#[test]
fn shares_replayed_from_another_round_fail_authentication() {
    // Same keys would be a disaster; here even a byte-identical ciphertext moved from round 3 to
    // round 4 of the same session must not open.
    let (_, _, old) = through_sharing(4, 2, context(3), 9);
    let (_, mut clients, fresh) = through_sharing(4, 2, context(4), 9);
    let mut replay = fresh[0].clone();
    replay.shares[0].ciphertext = old[0].shares[0].ciphertext.clone();
    assert!(matches!(
        clients[0].mask_input(&replay, &[0; 8]),
        Err(SecAggError::Authentication { .. })
    ));
    // A whole message from the old round is refused before any decryption.
    assert_eq!(
        clients[0].mask_input(&old[0], &[0; 8]).unwrap_err(),
        SecAggError::WrongRound {
            expected: 4,
            got: 3
        }
    );
}

#[test]
fn the_server_refuses_wrong_round_session_stage_duplicates_and_strangers() {
    let (mut server, mut clients, routed) = through_sharing(5, 3, context(8), 1);
    let masked = clients[0].mask_input(&routed[0], &[5; 8]).unwrap();
    let mut wrong_round = masked.clone();
    wrong_round.context.round = 7;
    assert_eq!(
        server.receive_masked(&wrong_round),
        Err(SecAggError::WrongRound {
            expected: 8,
            got: 7
        })
    );
    let mut wrong_session = masked.clone();
    wrong_session.context.session = SessionId([0; 16]);
    assert_eq!(
        server.receive_masked(&wrong_session),
        Err(SecAggError::WrongSession)
    );
    let mut short = masked.clone();
    short.masked.pop();
    assert!(matches!(
        server.receive_masked(&short),
        Err(SecAggError::Malformed(_))
    ));
    let mut stranger = masked.clone();
    stranger.sender = 99;
    assert!(matches!(
        server.receive_masked(&stranger),
        Err(SecAggError::UnexpectedClient { .. })
    ));
    server.receive_masked(&masked).unwrap();
    assert_eq!(
        server.receive_masked(&masked),
        Err(SecAggError::Duplicate(0))
    );
    // A stage-1 message now is out of order.
    let advert = AdvertiseKeys {
        context: context(8),
        sender: 1,
        keys: PublicKeys {
            encryption: [9; 32],
            masking: [9; 32],
        },
    };
    assert!(matches!(
        server.receive_keys(advert),
        Err(SecAggError::OutOfOrder { .. })
    ));
    // None of the refusals changed the sum: finish the round and check it.
    let mut inputs = vec![[5u32; 8]];
    for (i, client) in clients.iter_mut().enumerate().skip(1) {
        let x = [i as u32 * 1000; 8];
        server
            .receive_masked(&client.mask_input(&routed[i], &x).unwrap())
            .unwrap();
        inputs.push(x);
    }
    let requests = server.finish_masking().unwrap();
    for (client, req) in clients.iter_mut().zip(&requests) {
        server.receive_unmask(client.unmask(req).unwrap()).unwrap();
    }
    let aggregate = server.finish().unwrap();
    let expect: u32 = inputs.iter().map(|x| x[0]).fold(0, u32::wrapping_add);
    assert_eq!(aggregate.sum, vec![expect; 8]);
}

#[test]
fn a_client_reveals_one_kind_of_share_per_neighbour() {
    let (mut server, mut clients, routed) = through_sharing(5, 3, context(2), 4);
    // Client 4 drops before masking.
    for (i, client) in clients.iter_mut().enumerate().take(4) {
        server
            .receive_masked(&client.mask_input(&routed[i], &[1; 8]).unwrap())
            .unwrap();
    }
    let requests = server.finish_masking().unwrap();
    let reply = clients[0].unmask(&requests[0]).unwrap();
    let seeds: Vec<ClientId> = reply.self_seed_shares.iter().map(|(o, _)| *o).collect();
    let keys: Vec<ClientId> = reply.mask_key_shares.iter().map(|(o, _)| *o).collect();
    assert_eq!(seeds, vec![1, 2, 3]);
    assert_eq!(keys, vec![4]);
    // A reply that reveals the dropped client's seed instead is refused.
    let mut greedy = reply.clone();
    greedy
        .self_seed_shares
        .push(greedy.mask_key_shares.remove(0));
    assert!(matches!(
        server.receive_unmask(greedy),
        Err(SecAggError::Malformed(_))
    ));
    server.receive_unmask(reply.clone()).unwrap();
    // Asked again for the same list, client 0 repeats its answer (a lost reply can be resent);
    // a list claiming that client 4 survived is a second view and is refused.
    assert_eq!(clients[0].unmask(&requests[0]).unwrap(), reply);
    let mut other = requests[0].clone();
    other.survivors.push(4);
    assert!(matches!(
        clients[0].unmask(&other),
        Err(SecAggError::Equivocation { client: 0 })
    ));
}

/// Finding 1 of the third adversarial pass: a server that gets every client's masked-input
/// snapshot restored twice asks once with the victim alive and once with it dropped. Each
/// neighbour then reveals both the victim's self-seed share and its masking-key share, and the
/// two sums differ by exactly the victim's input. An [`UnmaskLedger`] (one per host process, as
/// the Python binding keeps) refuses the second survivor list, so the second sum never exists.
#[test]
fn a_client_restored_twice_from_one_snapshot_answers_one_survivor_list() {
    let n = 5;
    let victim: ClientId = 4;
    let (mut with_victim, mut clients, routed) = through_sharing(n, 3, context(9), 11);
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let inputs = random_inputs(n, 8, &mut rng);
    for (i, client) in clients.iter_mut().enumerate().take(4) {
        with_victim
            .receive_masked(&client.mask_input(&routed[i], &inputs[i]).unwrap())
            .unwrap();
    }
    // The server forks its state before the victim's masked input: one fork saw it, the other
    // claims the victim dropped.
    let mut without_victim = with_victim.clone();
    with_victim
        .receive_masked(&clients[4].mask_input(&routed[4], &inputs[4]).unwrap())
        .unwrap();
    let snapshots: Vec<ClientSnapshot> = clients.iter().map(Client::snapshot).collect();
    let alive = with_victim.finish_masking().unwrap();
    let dropped = without_victim.finish_masking().unwrap();
    assert!(dropped[0].survivors.iter().all(|&c| c != victim));

    // Without a ledger the attack works: this is what the ledger is for.
    let attack = |ledger: Option<&mut UnmaskLedger>| -> Option<Vec<u32>> {
        let mut a = with_victim.clone();
        let mut b = without_victim.clone();
        let mut ledger = ledger;
        for (i, snap) in snapshots.iter().enumerate() {
            let mut first = Client::restore(snap.clone()).unwrap();
            let mut second = Client::restore(snap.clone()).unwrap();
            let mut answer = |c: &mut Client, req: &UnmaskRequest| match ledger.as_deref_mut() {
                Some(l) => l.unmask(c, req),
                None => c.unmask(req),
            };
            a.receive_unmask(answer(&mut first, &alive[i]).unwrap())
                .unwrap();
            if let Some(req) = dropped.iter().find(|r| r.recipient == i as ClientId) {
                match answer(&mut second, req) {
                    Ok(reply) => b.receive_unmask(reply).unwrap(),
                    Err(e) => assert_eq!(
                        e,
                        SecAggError::Equivocation {
                            client: i as ClientId
                        }
                    ),
                }
            }
        }
        let sum_all = a.finish().unwrap().sum;
        assert_eq!(sum_all, expected_sum(&inputs, &[0, 1, 2, 3, 4]));
        let sum_rest = b.finish().ok()?.sum;
        Some(
            sum_all
                .iter()
                .zip(&sum_rest)
                .map(|(x, y)| x.wrapping_sub(*y))
                .collect(),
        )
    };
    assert_eq!(
        attack(None),
        Some(inputs[4].clone()),
        "the attack needs no ledger to work"
    );
    let mut ledger = UnmaskLedger::new();
    let recovered = attack(Some(&mut ledger));
    assert_ne!(recovered, Some(inputs[4].clone()));
    assert_eq!(ledger.len(), 5);

    // A snapshot taken after the answer carries it: restored, the client repeats the answer and
    // refuses the other list without any ledger.
    let mut answered = Client::restore(snapshots[0].clone()).unwrap();
    let reply = answered.unmask(&alive[0]).unwrap();
    let mut again = Client::restore(answered.snapshot()).unwrap();
    assert_eq!(again.unmask(&alive[0]).unwrap(), reply);
    assert_eq!(
        again.unmask(&dropped[0]),
        Err(SecAggError::Equivocation { client: 0 })
    );
}

/// Pearson χ² of `words`' byte at `shift` over 256 bins.
fn chi_square_byte(words: &[u32], shift: u32) -> f64 {
    let mut counts = [0u64; 256];
    for w in words {
        counts[((w >> shift) & 0xff) as usize] += 1;
    }
    let expected = words.len() as f64 / 256.0;
    counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum()
}

/// Upper 10⁻⁶ quantile of χ² with `k` degrees of freedom (Wilson–Hilferty).
fn chi_square_critical(k: f64) -> f64 {
    let z = 4.753; // standard normal upper 1e-6 quantile
    let a = 2.0 / (9.0 * k);
    k * (1.0 - a + z * a.sqrt()).powi(3)
}

#[test]
fn one_masked_vector_looks_uniform_to_the_server() {
    // A highly structured input: small fixed-point gradients (mostly tiny, all top bytes 0x00
    // or 0xff). The server's view of it must pass χ² uniformity tests on every byte, and on the
    // pairs of consecutive words' top nibbles; the raw input must fail them all (the test has
    // power).
    let d = 1 << 17;
    let q = Quantizer::new(1.0, 10).unwrap();
    let values: Vec<f64> = (0..d).map(|i| ((i % 97) as f64 - 48.0) / 4800.0).collect();
    let input = q.encode(&values).unwrap();
    let (_, mut clients, routed) = through_sharing_len(3, 2, context(0), 77, d);
    let masked = clients[0].mask_input(&routed[0], &input).unwrap().masked;
    let critical = chi_square_critical(255.0);
    for shift in [0, 8, 16, 24] {
        let view = chi_square_byte(&masked, shift);
        assert!(
            view < critical,
            "byte at bit {shift}: χ² = {view:.0} ≥ {critical:.0}"
        );
        let raw = chi_square_byte(&input, shift);
        assert!(
            raw > critical,
            "raw input byte at bit {shift} should fail: χ² = {raw:.0}"
        );
    }
    let pairs: Vec<u32> = masked
        .windows(2)
        .step_by(2)
        .map(|w| (w[0] >> 28) << 4 | (w[1] >> 28))
        .collect();
    assert!(chi_square_byte(&pairs, 0) < critical);
    // Correlation between input and view is at noise level (|r| < 5/√d).
    let mean = |v: &[u32]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
    let (mi, mm) = (mean(&input), mean(&masked));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (&x, &y) in input.iter().zip(&masked) {
        let (a, b) = (f64::from(x) - mi, f64::from(y) - mm);
        sxy += a * b;
        sxx += a * a;
        syy += b * b;
    }
    let r = sxy / (sxx * syy).sqrt();
    assert!(r.abs() < 5.0 / (d as f64).sqrt(), "correlation {r}");
}

#[test]
fn parameters_from_the_finder_run_a_thousand_client_round() {
    let threat = ThreatModel {
        dropout_rate: 0.1,
        corrupt_rate: 0.05,
    };
    let p = find_parameters(1000, threat).unwrap();
    let graph = Graph::harary(1000, p.degree, [3; 32]).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1000);
    let inputs = random_inputs(1000, 32, &mut rng);
    // 10% drop out, spread over the stages.
    let dropouts = random_dropouts(1000, 0.1, &mut rng);
    let (aggregate, _) = run_round(
        context(0),
        &graph,
        p.threshold,
        &refs(&inputs),
        &dropouts,
        5,
    )
    .unwrap();
    let expected = survivors_through(&dropouts, Stage::MaskedInput);
    assert_eq!(aggregate.sum, expected_sum(&inputs, &expected));
}

/// Thresholds of half the degree or less let a server that lies about who dropped rebuild a
/// client's masking key and self-mask seed both (shown at t = 2 on degree 4): the server, the
/// client and the parameter finder all refuse them, with the reason.
#[test]
fn thresholds_at_or_below_half_the_degree_are_refused() {
    let graph = Graph::complete(50).unwrap();
    let config = |t: usize, d: usize| ServerConfig {
        context: context(1),
        graph: graph.clone(),
        threshold: t,
        vector_len: d,
    };
    for t in [2, 24] {
        let err = Server::new(config(t, 8)).err().unwrap();
        assert!(
            matches!(&err, SecAggError::Parameters(m) if m.contains("degree/2")),
            "{err:?}"
        );
        let client = ClientConfig {
            context: context(1),
            id: 0,
            neighbours: graph.neighbours(0).to_vec(),
            threshold: t,
            vector_len: 8,
        };
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert!(matches!(
            Client::new(client, &mut rng),
            Err(SecAggError::Parameters(_))
        ));
    }
    Server::new(config(25, 8)).unwrap();
    // A vector too long to hold is refused, not an allocation abort.
    assert!(matches!(
        Server::new(config(25, 1 << 40)),
        Err(SecAggError::Parameters(_))
    ));
    for clients in [5, 10, 30, 100, 300] {
        for threat in [(0.0, 0.0), (0.1, 0.05), (0.2, 0.1), (0.3, 0.3)] {
            let threat = ThreatModel {
                dropout_rate: threat.0,
                corrupt_rate: threat.1,
            };
            if let Ok(p) = find_parameters(clients, threat) {
                assert!(2 * p.threshold > p.degree, "{p:?} for {threat:?}");
            }
        }
    }
}

/// X25519 keys of low order (here 0, 1, p − 1, and p and p + 1 which reduce to 0 and 1) are
/// refused when advertised; they would fail every honest neighbour's agreement later.
#[test]
fn low_order_keys_are_refused_when_advertised() {
    let graph = Graph::complete(4).unwrap();
    let mut server = Server::new(ServerConfig {
        context: context(2),
        graph: graph.clone(),
        threshold: 2,
        vector_len: 8,
    })
    .unwrap();
    let p_plus = |k: u8| {
        let mut b = [0xff; 32];
        b[0] = 0xed + k;
        b[31] = 0x7f;
        b
    };
    let mut one = [0u8; 32];
    one[0] = 1;
    let mut p_minus_one = p_plus(0);
    p_minus_one[0] = 0xec;
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let config = ClientConfig {
        context: context(2),
        id: 0,
        neighbours: graph.neighbours(0).to_vec(),
        threshold: 2,
        vector_len: 8,
    };
    let (_, honest) = Client::new(config, &mut rng).unwrap();
    for bad in [[0u8; 32], one, p_minus_one, p_plus(0), p_plus(1)] {
        for which in 0..2 {
            let mut advert = honest.clone();
            if which == 0 {
                advert.keys.encryption = bad;
            } else {
                advert.keys.masking = bad;
            }
            assert_eq!(
                server.receive_keys(advert),
                Err(SecAggError::Malformed("a public key of low order".into()))
            );
        }
    }
    server.receive_keys(honest).unwrap();
}

/// An unmasking reply with a share limb outside GF(2^61 − 1) is refused, so its sender is left
/// out of the unmasking; it used to be accepted and abort the whole round. The round still
/// completes exactly with the other replies.
#[test]
fn an_out_of_field_share_excludes_its_sender_not_the_round() {
    let (mut server, mut clients, routed) = through_sharing(5, 3, context(6), 2);
    let mut inputs = Vec::new();
    for (i, client) in clients.iter_mut().enumerate() {
        let x = [i as u32 * 7 + 1; 8];
        server
            .receive_masked(&client.mask_input(&routed[i], &x).unwrap())
            .unwrap();
        inputs.push(x);
    }
    let requests = server.finish_masking().unwrap();
    for (i, (client, req)) in clients.iter_mut().zip(&requests).enumerate() {
        let mut reply = client.unmask(req).unwrap();
        if i == 0 {
            reply.self_seed_shares[0].1.limbs[3] = shamir::PRIME;
            assert!(matches!(
                server.receive_unmask(reply),
                Err(SecAggError::Malformed(m)) if m.contains("outside the field")
            ));
        } else {
            server.receive_unmask(reply).unwrap();
        }
    }
    let aggregate = server.finish().unwrap();
    let expect: u32 = inputs.iter().map(|x| x[0]).fold(0, u32::wrapping_add);
    assert_eq!(aggregate.sum, vec![expect; 8]);
}

/// A share prints without its limbs.
#[test]
fn shares_print_redacted() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let shares = shamir::split(&[0xab; 32], &[1, 2, 3], 2, &mut rng).unwrap();
    let text = format!("{:?}", shares[0]);
    assert!(text.contains("redacted"), "{text}");
    assert!(!text.contains(&shares[0].limbs[0].to_string()), "{text}");
}

#[test]
fn a_survivor_list_below_the_clients_floor_is_refused() {
    let request = UnmaskRequest {
        context: context(3),
        recipient: 1,
        survivors: vec![0, 1, 4],
    };
    assert_eq!(request.require_survivors(3), Ok(()));
    assert_eq!(
        request.require_survivors(4),
        Err(SecAggError::TooFewSurvivors {
            client: 1,
            survivors: 3,
            floor: 4
        })
    );
}
