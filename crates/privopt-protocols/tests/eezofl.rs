//! EEZOFL roles: the digital path and the over-the-air path give the same `M_k` whether their
//! messages cross as bytes or stay in memory, missing and foreign parties are typed errors,
//! and every decoder refuses damaged and forged bytes with a typed error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_channel::ota::superpose_exact;
use privopt_ckks::multiparty::CommonPoly;
use privopt_ckks::{CkksParams, CkksParamsBuilder};
use privopt_math::SeedTree;
use privopt_protocols::eezofl::{
    DigitalDevice, DigitalServer, ExactDevice, ExactSetup, KeyRelay, Phase, ServerRound,
    ShareUpload, SumBroadcast, Transmission, Upload, encode_scalar, key_share_from_bytes,
    key_share_to_bytes,
};
use privopt_protocols::wire::damage;
use privopt_protocols::{DecodeError, Misbehavior, ProtocolError};

const DEVICES: u32 = 4;

fn params() -> Arc<CkksParams> {
    CkksParamsBuilder::new(4096, &[37, 36, 36]).build().unwrap()
}

/// `n` devices keyed together by a fresh server, everything drawn from `seed`.
struct Keyed {
    params: Arc<CkksParams>,
    crs: CommonPoly,
    rng: privopt_math::StreamRng,
    devices: Vec<DigitalDevice>,
    server: DigitalServer,
    relay: KeyRelay,
}

fn keyed(seed: u64, n: u32) -> Keyed {
    let params = params();
    let seeds = SeedTree::new(seed);
    let crs = CommonPoly::from_seed(&params, seeds.key("crs", &[]));
    let mut rng = seeds.stream("keys", &[]);
    let mut devices: Vec<DigitalDevice> = (0..n)
        .map(|i| DigitalDevice::generate(i, &params, &crs, &mut rng))
        .collect();
    let shares = devices.iter().map(DigitalDevice::key_share).collect();
    let members: Vec<u32> = (0..n).collect();
    let (server, relay) = DigitalServer::setup(&params, &crs, &members, shares).unwrap();
    for d in &mut devices {
        d.set_key(&crs, &relay).unwrap();
    }
    Keyed {
        params,
        crs,
        rng,
        devices,
        server,
        relay,
    }
}

/// Runs setup and `rounds` digital rounds; with `bytes`, every message crosses as bytes.
fn digital(rounds: u64, bytes: bool) -> Vec<f64> {
    let params = params();
    let seeds = SeedTree::new(5);
    let crs = CommonPoly::from_seed(&params, seeds.key("crs", &[]));
    let mut rng = seeds.stream("keys", &[]);
    let mut devices: Vec<DigitalDevice> = (0..DEVICES)
        .map(|i| DigitalDevice::generate(i, &params, &crs, &mut rng))
        .collect();
    let shares = devices
        .iter()
        .map(|d| {
            let s = d.key_share();
            if bytes {
                key_share_from_bytes(&params, &key_share_to_bytes(&s, &params)).unwrap()
            } else {
                s
            }
        })
        .collect();
    let ids: Vec<u32> = (0..DEVICES).collect();
    let (mut server, mut relay) = DigitalServer::setup(&params, &crs, &ids, shares).unwrap();
    if bytes {
        relay = KeyRelay::from_bytes(&params, &relay.to_bytes(&params)).unwrap();
    }
    for d in &mut devices {
        d.set_key(&crs, &relay).unwrap();
    }
    // With `bytes`, every device also leaves its process between steps: saved and restored.
    let resume = |devices: &mut Vec<DigitalDevice>| {
        if bytes {
            for d in devices.iter_mut() {
                *d = DigitalDevice::restore(&params, &crs, &d.save()).unwrap();
            }
        }
    };
    resume(&mut devices);
    (0..rounds)
        .map(|k| {
            let mut rng = seeds.stream("crypto", &[k]);
            let uploads: Vec<Upload> = devices
                .iter_mut()
                .enumerate()
                .map(|(i, d)| {
                    let m =
                        encode_scalar(0.01 * (i as f64 + 1.0) * (k as f64 + 1.0), &params).unwrap();
                    let up = d.encrypt(k, m, &mut rng).unwrap();
                    if bytes {
                        Upload::from_bytes(&params, &up.to_bytes()).unwrap()
                    } else {
                        up
                    }
                })
                .collect();
            resume(&mut devices);
            let mut sum = server.sum(&uploads).unwrap();
            if bytes {
                sum = SumBroadcast::from_bytes(&params, &sum.to_bytes()).unwrap();
            }
            let shares: Vec<ShareUpload> = devices
                .iter_mut()
                .map(|d| {
                    let s = d.decryption_share(&sum, &mut rng).unwrap();
                    if bytes {
                        ShareUpload::from_bytes(&params, &s.to_bytes(&params)).unwrap()
                    } else {
                        s
                    }
                })
                .collect();
            server.fuse(&shares).unwrap()
        })
        .collect()
}

#[test]
fn digital_rounds_through_bytes_and_saved_devices_equal_the_in_process_rounds() {
    let mem = digital(3, false);
    let wire = digital(3, true);
    assert_eq!(
        mem.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        wire.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    // M_k = Σ_i 0.01 (i + 1)(k + 1) = 0.1 (k + 1), within the smudging noise (~1e-6 here).
    for (k, v) in mem.iter().enumerate() {
        assert!((v - 0.1 * (k as f64 + 1.0)).abs() < 1e-4, "round {k}: {v}");
    }
}

#[test]
fn digital_server_refuses_missing_duplicate_and_stale_uploads() {
    let Keyed {
        params,
        mut rng,
        mut devices,
        mut server,
        ..
    } = keyed(6, 3);
    let ups: Vec<Upload> = devices
        .iter_mut()
        .map(|d| {
            let m = encode_scalar(0.5, &params).unwrap();
            d.encrypt(0, m, &mut rng).unwrap()
        })
        .collect();
    assert!(matches!(
        server.sum(&ups[..2]),
        Err(ProtocolError::Incomplete(_))
    ));
    let mut dup = ups.clone();
    dup[2] = ups[1].clone();
    assert!(matches!(
        server.sum(&dup),
        Err(ProtocolError::PeerMisbehaved {
            kind: Misbehavior::Duplicate,
            ..
        })
    ));
    let mut stale = ups.clone();
    stale[0].round = 9;
    assert!(matches!(
        server.sum(&stale),
        Err(ProtocolError::PeerMisbehaved {
            kind: Misbehavior::WrongRound,
            ..
        })
    ));
    let sum = server.sum(&ups).unwrap();
    // A device refuses to decrypt a sum of a round it did not encrypt for.
    let mut other = sum.clone();
    other.round = 1;
    assert!(matches!(
        devices[0].decryption_share(&other, &mut rng),
        Err(ProtocolError::PeerMisbehaved {
            kind: Misbehavior::Forbidden,
            ..
        })
    ));
    // Fusion needs every member's share; the round stays open until it has them.
    let shares: Vec<ShareUpload> = devices
        .iter_mut()
        .map(|d| d.decryption_share(&sum, &mut rng).unwrap())
        .collect();
    assert!(server.fuse(&shares[..2]).is_err());
    let v = server.fuse(&shares).unwrap();
    assert!((v - 1.5).abs() < 1e-4, "{v}");
    assert_eq!(server.round(), 1);
}

/// Finding 3 of the third adversarial pass: a server that relabels one device's upload as
/// "the sum" got every device's decryption share of it (and so that device's scalar), and a
/// device answered a second request in the same round. Now a device answers once per round,
/// only a sum of one encryption per member, also after being saved and restored, and encrypts
/// only for rounds after the last one it decrypted.
#[test]
fn a_device_decrypts_only_the_rounds_sum_and_only_once() {
    let Keyed {
        params,
        crs,
        mut rng,
        mut devices,
        mut server,
        relay,
    } = keyed(16, 3);
    let ups: Vec<Upload> = devices
        .iter_mut()
        .enumerate()
        .map(|(i, d)| {
            let m = encode_scalar(0.25 * (i as f64 + 1.0), &params).unwrap();
            d.encrypt(0, m, &mut rng).unwrap()
        })
        .collect();
    let sum = server.sum(&ups).unwrap();
    // The relabelled upload: device 1's ciphertext broadcast as round 0's sum.
    let relabelled = SumBroadcast {
        round: 0,
        sum: ups[1].ct.clone(),
    };
    for d in &mut devices {
        let refused = d.decryption_share(&relabelled, &mut rng).unwrap_err();
        assert!(
            refused.to_string().contains("a sum of 1 encryptions"),
            "{refused}"
        );
    }
    // The honest sum is answered once; a second request, even for the same bytes and from a
    // device restored from its save, is refused.
    let first: Vec<ShareUpload> = devices
        .iter_mut()
        .map(|d| d.decryption_share(&sum, &mut rng).unwrap())
        .collect();
    for d in &mut devices {
        assert!(matches!(
            d.decryption_share(&sum, &mut rng),
            Err(ProtocolError::PeerMisbehaved {
                kind: Misbehavior::Duplicate,
                ..
            })
        ));
        let mut restored = DigitalDevice::restore(&params, &crs, &d.save()).unwrap();
        assert!(matches!(
            restored.decryption_share(&sum, &mut rng),
            Err(ProtocolError::PeerMisbehaved {
                kind: Misbehavior::Duplicate,
                ..
            })
        ));
        // Re-encrypting for the decrypted round would open a second share of it.
        assert!(matches!(
            restored.encrypt(0, 1, &mut rng),
            Err(ProtocolError::PeerMisbehaved { .. })
        ));
        restored.encrypt(1, 1, &mut rng).unwrap();
    }
    let v = server.fuse(&first).unwrap();
    assert!((v - 1.5).abs() < 1e-4, "{v}");
    // A re-key restarts the rounds (as the server's do), but not the record of the last sum:
    // the server cannot re-key to have round 0's sum decrypted a second time.
    for d in &mut devices {
        d.set_key(&crs, &relay).unwrap();
        d.encrypt(0, 1, &mut rng).unwrap();
        let e = d.decryption_share(&sum, &mut rng).unwrap_err();
        assert!(e.to_string().contains("decrypted before"), "{e}");
    }
}

/// One over-the-air round with unit gains and no channel noise; with `bytes`, every
/// transmission and broadcast crosses as bytes. Returns `M_k`.
fn ota_round(bytes: bool) -> f64 {
    let params = params();
    let seeds = SeedTree::new(7);
    let setup = ExactSetup::new(params, DEVICES as usize, 1.0, 40, seeds.key("crs", &[])).unwrap();
    let mut rng = seeds.stream("keys", &[]);
    let devices: Vec<ExactDevice> = (0..DEVICES)
        .map(|i| ExactDevice::generate(&setup, i, &mut rng))
        .collect();
    let ids: Vec<u32> = (0..DEVICES).collect();
    let one = setup.grid.quantize(1.0).unwrap();
    let gains = vec![one; DEVICES as usize];
    let zero = vec![0i64; setup.params.n()];
    let cross = |t: Transmission| {
        if bytes {
            Transmission::from_bytes(&setup.ring, &t.to_bytes()).unwrap()
        } else {
            t
        }
    };
    // Each device's transmission is carried (as bytes or not) into the channel, which sums.
    let air = |phase: Phase,
               pick: &dyn Fn(&ExactDevice) -> Vec<privopt_channel::dyadic::Dyadic>,
               slot: usize| {
        let carried: Vec<Transmission> = devices
            .iter()
            .map(|d| {
                cross(Transmission {
                    round: 0,
                    phase,
                    values: pick(d),
                })
            })
            .collect();
        let xs: Vec<&privopt_channel::dyadic::Dyadic> =
            carried.iter().map(|t| &t.values[slot]).collect();
        superpose_exact(&setup.ring, setup.grid, &gains, &xs, &zero).unwrap()
    };
    let b_tilde = air(Phase::Keys, &|d| vec![d.key().clone()], 0);
    let (server, b_broadcast) = ServerRound::new(&ids).receive_keys(b_tilde, &ids).unwrap();
    let b_broadcast = cross(Transmission {
        round: 0,
        phase: Phase::Keys,
        values: vec![b_broadcast],
    })
    .values
    .remove(0);
    let mut crypto = seeds.stream("crypto", &[0]);
    let cts: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let m = encode_scalar(0.1 * (i as f64 + 1.0), &setup.params).unwrap();
            d.encrypt(&setup, &b_broadcast, m, &mut crypto)
        })
        .collect();
    let c0 = air(
        Phase::Ciphertexts,
        &|d| {
            vec![
                cts[d.id() as usize].0.clone(),
                cts[d.id() as usize].1.clone(),
            ]
        },
        0,
    );
    let c1 = air(
        Phase::Ciphertexts,
        &|d| {
            vec![
                cts[d.id() as usize].0.clone(),
                cts[d.id() as usize].1.clone(),
            ]
        },
        1,
    );
    let (server, c1_broadcast) = server.receive_ciphertexts(c0, c1, &ids).unwrap();
    let c1_broadcast = cross(Transmission {
        round: 0,
        phase: Phase::Ciphertexts,
        values: vec![c1_broadcast],
    })
    .values
    .remove(0);
    let shares: Vec<_> = devices
        .iter()
        .map(|d| {
            d.decryption_share(&setup, &c1_broadcast, &mut crypto)
                .unwrap()
        })
        .collect();
    let d_tilde = air(Phase::Shares, &|d| vec![shares[d.id() as usize].clone()], 0);
    server.recover(&setup, &d_tilde, &ids).unwrap().value
}

#[test]
fn an_over_the_air_round_through_bytes_equals_the_in_process_round() {
    let (mem, wire) = (ota_round(false), ota_round(true));
    assert_eq!(mem.to_bits(), wire.to_bits());
    // Σ 0.1 (i + 1) = 1 for 4 devices, within the RLWE and smudging noise.
    let want = 1.0;
    assert!((mem - want).abs() < 1e-4, "{mem} vs {want}");
}

#[test]
fn eezofl_decoders_refuse_damaged_and_forged_bytes() {
    let params = params();
    let seeds = SeedTree::new(9);
    let crs = CommonPoly::from_seed(&params, seeds.key("crs", &[]));
    let mut rng = seeds.stream("keys", &[]);
    let mut devices: Vec<DigitalDevice> = (0..2)
        .map(|i| DigitalDevice::generate(i, &params, &crs, &mut rng))
        .collect();
    let key_shares: Vec<_> = devices.iter().map(DigitalDevice::key_share).collect();
    let (mut server, relay) =
        DigitalServer::setup(&params, &crs, &[0, 1], key_shares.clone()).unwrap();
    for d in &mut devices {
        d.set_key(&crs, &relay).unwrap();
    }
    let ups: Vec<Upload> = devices
        .iter_mut()
        .map(|d| d.encrypt(0, 1, &mut rng).unwrap())
        .collect();
    let sum = server.sum(&ups).unwrap();
    let share = devices[0].decryption_share(&sum, &mut rng).unwrap();
    let setup = ExactSetup::new(params.clone(), 2, 1.0, 40, [3; 32]).unwrap();
    let dev = ExactDevice::generate(&setup, 0, &mut rng);
    let tx = Transmission {
        round: 2,
        phase: Phase::Shares,
        values: vec![dev.key().clone()],
    };
    let all: Vec<(&str, Vec<u8>)> = vec![
        ("key share", key_share_to_bytes(&key_shares[0], &params)),
        ("relay", relay.to_bytes(&params)),
        ("upload", ups[0].to_bytes()),
        ("sum", sum.to_bytes()),
        ("share", share.to_bytes(&params)),
        ("transmission", tx.to_bytes()),
    ];
    let decode_all = |b: &[u8]| -> Vec<Result<(), DecodeError>> {
        vec![
            key_share_from_bytes(&params, b).map(drop),
            KeyRelay::from_bytes(&params, b).map(drop),
            Upload::from_bytes(&params, b).map(drop),
            SumBroadcast::from_bytes(&params, b).map(drop),
            ShareUpload::from_bytes(&params, b).map(drop),
            Transmission::from_bytes(&setup.ring, b).map(drop),
        ]
    };
    for (name, bytes) in &all {
        // Each decoder reads only its own kind, and the right one reads it back.
        assert_eq!(
            decode_all(bytes).iter().filter(|r| r.is_ok()).count(),
            1,
            "{name}"
        );
        assert_eq!(
            damage::first_mishandled(bytes, 24, decode_all),
            None,
            "{name}"
        );
    }
    // Forged with a valid checksum: a residue at its prime, an unknown phase, other parameters.
    let residue = damage::forge(&all[5].1, |f| {
        let q = setup.ring.basis().moduli()[0];
        f[14..22].copy_from_slice(&q.to_le_bytes());
    });
    assert!(
        Transmission::from_bytes(&setup.ring, &residue)
            .unwrap_err()
            .to_string()
            .contains("not below its prime")
    );
    let phase = damage::forge(&all[5].1, |f| f[8] = 4);
    assert!(
        Transmission::from_bytes(&setup.ring, &phase)
            .unwrap_err()
            .to_string()
            .contains("phase")
    );
    let other = CkksParamsBuilder::new(8192, &[44, 44, 44, 43, 43])
        .build()
        .unwrap();
    assert!(Upload::from_bytes(&other, &all[2].1).is_err());
}
