//! The scalar channel with client-level DP: clipped, noised scalars summed as SecAgg+ sums them
//! (wrapping `u32` addition) give the clear mean when the noise is off, carry the noise the
//! settings call for when it is on, and a private server takes nothing but such a sum.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use privopt_math::SeedTree;
use privopt_ml::zo::Difference;
use privopt_protocols::ProtocolError;
use privopt_protocols::scalar_fl::{
    Client, Invitation, ModelState, Privacy, Probe, ReplaySpec, Reply, Rule, Server,
};

const D: usize = 8;
const CLIENTS: usize = 6;

fn spec() -> ReplaySpec {
    ReplaySpec {
        lr: 0.05,
        local_steps: 2,
        perturbations: 2,
        weight_decay: 0.0,
        rule: Rule::Decomfl,
    }
}

fn loss(c: usize) -> impl Fn(usize, &[f64]) -> f64 + Sync {
    move |k, x| {
        x.iter()
            .enumerate()
            .map(|(j, v)| (v - (c + j + k) as f64 / 10.0).powi(2))
            .sum()
    }
}

fn invitation(reply: &Reply, participants: usize) -> Invitation {
    Invitation {
        session: reply.session,
        round: reply.round,
        ticket: reply.ticket,
        participants,
    }
}

/// What SecAgg+ reveals: the wrapping sum of the contributors' words.
fn secure_sum(words: &[Vec<u32>]) -> Vec<u32> {
    let mut sum = vec![0u32; words[0].len()];
    for w in words {
        sum.iter_mut()
            .zip(w)
            .for_each(|(s, x)| *s = s.wrapping_add(*x));
    }
    sum
}

/// One round on a clear server and on a private one drawn from the same stream: the clear
/// replies, and the private words of every participant but `drop`.
fn both_rounds(
    privacy: Privacy,
    drop: &[usize],
) -> (Server, Server, Vec<Reply>, Vec<Vec<u32>>, Vec<usize>) {
    let spec = spec();
    let initial = ModelState::initial(vec![0.5; D], spec.rule);
    let mut clear = Server::new(spec, initial.clone(), CLIENTS, None).unwrap();
    let mut private = Server::new(spec, initial.clone(), CLIENTS, None).unwrap();
    private.set_privacy(privacy).unwrap();
    let plan = clear
        .begin_round(4, &mut SeedTree::new(3).stream("plan", &[]))
        .unwrap();
    let plan_p = private
        .begin_round(4, &mut SeedTree::new(3).stream("plan", &[]))
        .unwrap();
    assert_eq!(
        (&plan.clients, &plan.seeds),
        (&plan_p.clients, &plan_p.seeds)
    );
    let mut rng = SeedTree::new(4).stream("noise", &[]);
    let (mut replies, mut words, mut contributors) = (Vec::new(), Vec::new(), Vec::new());
    for &c in &plan.clients {
        let mut client = Client::new(c, initial.clone());
        client.receive(clear.catch_up(c).unwrap(), &spec).unwrap();
        private.catch_up(c).unwrap();
        let probe = Probe {
            mu: 1e-3,
            difference: Difference::TwoPoint,
        };
        let reply = client.local_update(&plan, &spec, probe, &loss(c)).unwrap();
        if !drop.contains(&c) {
            let inv = invitation(&reply, plan.clients.len());
            words.push(privacy.privatize(&inv, &reply.scalars, &mut rng).unwrap());
            contributors.push(c);
            replies.push(reply);
        }
    }
    (clear, private, replies, words, contributors)
}

#[test]
fn without_noise_the_secure_mean_is_the_clear_mean_within_quantization() {
    let privacy = Privacy {
        clip: 1e3,
        noise_multiplier: 0.0,
        noise_floor: 0.5,
    };
    let (mut clear, mut private, replies, words, who) = both_rounds(privacy, &[]);
    let want = clear.finish_round(&replies).unwrap();
    let got = private
        .finish_round_secure(&secure_sum(&words), &who)
        .unwrap();
    let step = privacy
        .noise()
        .quantizer(1e3, 4)
        .unwrap()
        .sum_error_bound(4)
        / 4.0;
    for (a, b) in want.scalars.iter().zip(&got.scalars) {
        assert!(
            (a - b).abs() as f64 <= step + 1e-6,
            "{a} vs {b} (step {step})"
        );
    }
    assert!(want.scalars.iter().any(|s| s.abs() > 0.1));
    // The models moved the same way.
    let gap = (clear.state().x.iter().zip(&private.state().x))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(gap < 1e-5, "{gap}");
}

#[test]
fn a_client_counts_for_at_most_the_clip_and_dropouts_below_the_floor_release_nothing() {
    let privacy = Privacy {
        clip: 0.01,
        noise_multiplier: 0.0,
        noise_floor: 0.75,
    };
    // 4 participants, floor 0.75: 3 contributors needed. One dropped: released.
    let (_, mut private, replies, words, who) = both_rounds(privacy, &[who_first()]);
    assert_eq!(who.len(), 3);
    let record = private
        .finish_round_secure(&secure_sum(&words), &who)
        .unwrap();
    // Every reply's L2 norm is far above 0.01, so the mean's norm is at most the clip.
    assert!(replies.iter().all(|r| norm(&r.scalars) > 0.1));
    assert!(
        norm(&record.scalars) <= 0.01 * 1.001,
        "{}",
        norm(&record.scalars)
    );
    // Two dropped: refused, the round stays open and a complete sum then closes it.
    let (_, mut private, _, words, who) = both_rounds(privacy, &[who_first(), who_second()]);
    let x = private.state().x.clone();
    let err = private
        .finish_round_secure(&secure_sum(&words), &who)
        .unwrap_err();
    assert!(matches!(err, ProtocolError::Incomplete(_)), "{err}");
    assert_eq!(private.state().x, x);
    assert!(matches!(
        private.begin_round(2, &mut SeedTree::new(1).stream("p", &[])),
        Err(ProtocolError::OutOfOrder(_))
    ));
    // Skipping closes it: the model stays, the round is recorded with zero scalars (so every
    // replay stays in step) and its participants fall back to the round they held.
    let record = private.skip_round().unwrap();
    assert!(record.scalars.iter().all(|&s| s == 0.0));
    assert_eq!(private.state().x, x);
    assert_eq!(private.state().round, 1);
    assert!(private.synced_rounds().iter().all(|&r| r == 0));
}

fn norm(v: &[f32]) -> f64 {
    v.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>().sqrt()
}

/// The first and second participant of `both_rounds`' plan.
fn who_first() -> usize {
    plan_clients()[0]
}
fn who_second() -> usize {
    plan_clients()[1]
}
fn plan_clients() -> Vec<usize> {
    let spec = spec();
    let mut s = Server::new(
        spec,
        ModelState::initial(vec![0.5; D], spec.rule),
        CLIENTS,
        None,
    )
    .unwrap();
    s.begin_round(4, &mut SeedTree::new(3).stream("plan", &[]))
        .unwrap()
        .clients
}

#[test]
fn each_share_carries_its_part_of_the_noise() {
    // σ = 2, C = 0.5, 4 participants, floor 0.5: 2 shares of variance (σC)²/2 = 0.5 each.
    let privacy = Privacy {
        clip: 0.5,
        noise_multiplier: 2.0,
        noise_floor: 0.5,
    };
    let inv = Invitation {
        session: 1,
        round: 0,
        ticket: [0; 16],
        participants: 4,
    };
    let quantizer = privacy.noise().quantizer(0.5, 4).unwrap();
    let mut rng = SeedTree::new(9).stream("noise", &[]);
    let n = 20_000;
    let (mut sum, mut sum2) = (0.0, 0.0);
    for _ in 0..n {
        let words = privacy.privatize(&inv, &[0.0], &mut rng).unwrap();
        let v = quantizer.decode_sum(&words)[0];
        sum += v;
        sum2 += v * v;
    }
    let var = sum2 / n as f64 - (sum / n as f64).powi(2);
    assert!(
        (var / 0.5 - 1.0).abs() < 0.05,
        "share variance {var}, want 0.5"
    );
    // Two contributors carry σ exactly; four carry σ·√2.
    assert!((privacy.effective_multiplier(4, 2) - 2.0).abs() < 1e-12);
    assert!((privacy.effective_multiplier(4, 4) - 2.0 * 2f64.sqrt()).abs() < 1e-12);
    let err = privacy.privatize(&inv, &[f32::NAN], &mut rng).unwrap_err();
    assert!(matches!(err, ProtocolError::Diverged { .. }), "{err}");
}

#[test]
fn a_private_server_takes_only_a_checked_secure_sum() {
    let privacy = Privacy {
        clip: 1.0,
        noise_multiplier: 1.0,
        noise_floor: 0.5,
    };
    let (_, mut private, replies, words, who) = both_rounds(privacy, &[]);
    let err = private.finish_round(&replies).unwrap_err();
    assert!(
        err.to_string().contains("never with clear replies"),
        "{err}"
    );
    let err = private.check_reply(&replies[0], &[]).unwrap_err();
    assert!(
        err.to_string().contains("clear scalars to a private run"),
        "{err}"
    );
    let sum = secure_sum(&words);
    assert!(private.finish_round_secure(&sum[1..], &who).is_err());
    let outsider = (0..CLIENTS).find(|c| !who.contains(c)).unwrap();
    let mut wrong = who.clone();
    wrong[0] = outsider;
    wrong.sort_unstable();
    assert!(private.finish_round_secure(&sum, &wrong).is_err());
    let reversed: Vec<usize> = who.iter().rev().copied().collect();
    assert!(private.finish_round_secure(&sum, &reversed).is_err());
    private.finish_round_secure(&sum, &who).unwrap();
    // A clear server refuses a secure sum; bad settings are refused.
    let (mut clear, _, _, _, _) = both_rounds(privacy, &[]);
    assert!(clear.finish_round_secure(&sum, &who).is_err());
    for bad in [
        Privacy {
            clip: 0.0,
            ..privacy
        },
        Privacy {
            noise_multiplier: -1.0,
            ..privacy
        },
        Privacy {
            noise_floor: 1.5,
            ..privacy
        },
        Privacy {
            clip: f64::INFINITY,
            ..privacy
        },
    ] {
        assert!(clear.set_privacy(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn sampling_among_eligible_clients_keeps_the_full_draw_and_skips_the_rest() {
    let spec = spec();
    let initial = ModelState::initial(vec![0.5; D], spec.rule);
    let mut a = Server::new(spec, initial.clone(), CLIENTS, None).unwrap();
    let mut b = Server::new(spec, initial.clone(), CLIENTS, None).unwrap();
    let all: Vec<usize> = (0..CLIENTS).collect();
    let pa = a
        .begin_round(3, &mut SeedTree::new(5).stream("p", &[]))
        .unwrap();
    let pb = b
        .begin_round_among(3, Some(&all), &mut SeedTree::new(5).stream("p", &[]))
        .unwrap();
    assert_eq!((pa.clients, pa.seeds), (pb.clients, pb.seeds));
    let mut c = Server::new(spec, initial, CLIENTS, None).unwrap();
    let mut rng = SeedTree::new(6).stream("p", &[]);
    for _ in 0..20 {
        let plan = c.begin_round_among(2, Some(&[1, 3, 4]), &mut rng).unwrap();
        assert!(plan.clients.iter().all(|x| [1, 3, 4].contains(x)));
        c.finish_round(&[]).unwrap();
    }
    for (bad, per_round) in [(&[3, 1][..], 1), (&[1, 1], 1), (&[1, 6], 1), (&[1, 2], 3)] {
        assert!(
            c.begin_round_among(per_round, Some(bad), &mut rng).is_err(),
            "{bad:?}"
        );
    }
}
