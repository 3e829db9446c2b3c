//! EEZOFL's digital path on a threshold key (issue 50): N = 10 devices, t = 7. A round whose
//! sum exists finishes with any 7 devices answering and gives the sum of all ten scalars; with
//! 6 it fails by name and the next round (a fresh encryption) goes on; a device answers for a
//! ciphertext once, whatever the active set or the server asking, also after a restore.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_ckks::multiparty::{
    ActiveSet, Ciphertext, Committee, CommonPoly, DealingAnswer, DealingCheck,
};
use privopt_ckks::{CkksParams, CkksParamsBuilder};
use privopt_math::SeedTree;
use privopt_protocols::eezofl::{
    DigitalDevice, DigitalServer, ShareUpload, SumBroadcast, Upload, default_threshold,
    encode_scalar,
};
use privopt_protocols::threshold::{SealedShare, SealingKey};
use privopt_protocols::wire::Message;
use privopt_protocols::{Misbehavior, ProtocolError};

const N: u32 = 10;
const T: usize = 7;

fn params() -> Arc<CkksParams> {
    CkksParamsBuilder::new(4096, &[37, 36, 36]).build().unwrap()
}

/// Ten devices on a 7-of-10 key, every setup message through bytes and every device saved and
/// restored between steps (as a Flower client is between messages).
struct Federation {
    params: Arc<CkksParams>,
    crs: CommonPoly,
    rng: privopt_math::StreamRng,
    devices: Vec<DigitalDevice>,
    server: DigitalServer,
}

impl Federation {
    fn new(seed: u64) -> Self {
        Self::with(params(), seed)
    }

    fn with(params: Arc<CkksParams>, seed: u64) -> Self {
        let seeds = SeedTree::new(seed);
        let crs = CommonPoly::from_seed(&params, seeds.key("crs", &[]));
        let mut rng = seeds.stream("keys", &[]);
        let mut devices: Vec<DigitalDevice> = (0..N)
            .map(|i| DigitalDevice::generate(i, &params, &crs, &mut rng))
            .collect();
        let shares = devices.iter().map(DigitalDevice::key_share).collect();
        let members: Vec<u32> = (0..N).collect();
        let (mut server, relay) = DigitalServer::setup(&params, &crs, &members, shares).unwrap();
        for d in &mut devices {
            d.set_key(&crs, &relay).unwrap();
        }
        server.use_threshold(T).unwrap();
        let mut fed = Self {
            params,
            crs,
            rng,
            devices,
            server,
        };
        fed.resume();
        let keys: Vec<SealingKey> = (0..N as usize)
            .map(|i| {
                let k = fed.devices[i].start_threshold(T, 1, &mut fed.rng).unwrap();
                SealingKey::from_bytes(&k.to_bytes()).unwrap()
            })
            .collect();
        fed.resume();
        let mut sealed: Vec<SealedShare> = Vec::new();
        for i in 0..N as usize {
            for s in fed.devices[i].deal_threshold(&keys, &mut fed.rng).unwrap() {
                sealed.push(SealedShare::from_bytes(&s.to_bytes()).unwrap());
            }
        }
        fed.resume();
        for d in &mut fed.devices {
            let mine: Vec<SealedShare> =
                sealed.iter().filter(|s| s.to == d.id()).cloned().collect();
            d.finish_threshold(&mine).unwrap();
            assert_eq!(d.threshold(), Some(T));
        }
        fed.resume();
        // The dealing check, through bytes, once every dealing is in: all are sound.
        let members: Vec<u32> = (0..N).collect();
        let check = fed.server.dealing_check(T, 1, [3u8; 32], &members).unwrap();
        let check = DealingCheck::from_bytes(&fed.params, &check.to_bytes(&fed.params)).unwrap();
        let answers: Vec<DealingAnswer> = fed
            .devices
            .iter_mut()
            .map(|d| {
                let a = d
                    .answer_dealing_check(&check, &fed.crs, &mut fed.rng)
                    .unwrap();
                DealingAnswer::from_bytes(&fed.params, &a.to_bytes(&fed.params)).unwrap()
            })
            .collect();
        let failed = fed.server.failed_dealers(T, &fed.crs, &check, &answers);
        assert_eq!(failed.unwrap(), Vec::<u32>::new());
        fed.resume();
        fed
    }

    fn resume(&mut self) {
        for d in &mut self.devices {
            *d = DigitalDevice::restore(&self.params, &self.crs, &d.save()).unwrap();
        }
    }

    /// Device `i`'s scalar in round `k`.
    fn scalar(i: u32, k: u64) -> f64 {
        0.01 * (f64::from(i) + 1.0) * (k as f64 + 1.0)
    }

    /// Every device uploads round `k`'s scalar; the server sums (through bytes).
    fn upload_all(&mut self, k: u64) -> SumBroadcast {
        let round = self.server.round();
        let uploads: Vec<Upload> = self
            .devices
            .iter_mut()
            .map(|d| {
                let m = encode_scalar(Self::scalar(d.id(), k), &self.params).unwrap();
                let up = d.encrypt(round, m, &mut self.rng).unwrap();
                Upload::from_bytes(&self.params, &up.to_bytes()).unwrap()
            })
            .collect();
        let sum = self.server.sum(&uploads).unwrap();
        SumBroadcast::from_bytes(&self.params, &sum.to_bytes()).unwrap()
    }

    /// The shares of the devices in `active`, through bytes.
    fn shares(&mut self, sum: &SumBroadcast, active: &ActiveSet) -> Vec<ShareUpload> {
        let active = ActiveSet::from_bytes(&self.params, &active.to_bytes(&self.params)).unwrap();
        self.devices
            .iter_mut()
            .filter(|d| active.members().contains(&d.id()))
            .map(|d| {
                let s = d.threshold_share(sum, &active, &mut self.rng).unwrap();
                ShareUpload::from_bytes(&self.params, &s.to_bytes(&self.params)).unwrap()
            })
            .collect()
    }

    /// One round in which the devices in `gone` die once their ciphertext is in.
    fn round(&mut self, k: u64, gone: &[u32]) -> Result<f64, ProtocolError> {
        let sum = self.upload_all(k);
        let present: Vec<u32> = (0..N).filter(|i| !gone.contains(i)).collect();
        let active = match self.server.active_set(&present) {
            Ok(a) => a,
            Err(e) => {
                self.server.abandon();
                return Err(e);
            }
        };
        assert!(active.members().iter().all(|m| !gone.contains(m)));
        let shares = self.shares(&sum, &active);
        self.server.fuse(&shares)
    }
}

fn expected(k: u64) -> f64 {
    (0..N).map(|i| Federation::scalar(i, k)).sum()
}

#[test]
fn the_default_threshold_is_two_thirds_rounded_up() {
    assert_eq!(
        [2, 3, 4, 9, 10, 100].map(default_threshold),
        [2, 2, 3, 6, 7, 67]
    );
}

#[test]
fn three_of_ten_gone_after_uploading_leave_the_same_sum_and_four_fail_the_round_by_name() {
    let mut fed = Federation::new(3);
    // Round 0 with everyone; round 1 with devices 2, 5, 9 gone after uploading (they are back
    // for round 2 from their saves, with no re-key); round 2 with four gone; round 3 goes on.
    let v0 = fed.round(0, &[]).unwrap();
    let v1 = fed.round(1, &[2, 5, 9]).unwrap();
    let e2 = fed.round(2, &[0, 1, 2, 3]).unwrap_err();
    let v3 = fed.round(3, &[7, 8, 9]).unwrap();
    for (k, v) in [(0, v0), (1, v1), (3, v3)] {
        // Σ_i 0.01 (i + 1)(k + 1) = 0.55 (k + 1), within the smudging noise.
        assert!(
            (v - expected(k)).abs() < 1e-4,
            "round {k}: {v} vs {}",
            expected(k)
        );
    }
    assert!(matches!(e2, ProtocolError::Incomplete(_)), "{e2}");
    assert!(
        e2.to_string()
            .contains("6 of 10 devices present to decrypt round 2, the threshold is 7"),
        "{e2}"
    );
    assert_eq!(fed.server.round(), 4);
}

#[test]
fn a_round_needs_uploads_from_the_threshold_and_sums_only_what_came() {
    let mut fed = Federation::new(4);
    let round = fed.server.round();
    let mut uploads: Vec<Upload> = fed
        .devices
        .iter_mut()
        .map(|d| {
            let m = encode_scalar(Federation::scalar(d.id(), 0), &fed.params).unwrap();
            d.encrypt(round, m, &mut fed.rng).unwrap()
        })
        .collect();
    let six = fed.server.sum(&uploads[..6]).unwrap_err();
    assert!(
        six.to_string()
            .contains("devices 6, 7, 8, 9 sent no ciphertext")
            && six.to_string().contains("7 needed"),
        "{six}"
    );
    // Seven uploads make a sum of seven; the devices that did not upload can still decrypt.
    uploads.truncate(7);
    let sum = fed.server.sum(&uploads).unwrap();
    assert_eq!(fed.server.contributors().unwrap(), &[0, 1, 2, 3, 4, 5, 6]);
    let active = fed.server.active_set(&[3, 4, 5, 6, 7, 8, 9]).unwrap();
    let shares = fed.shares(&sum, &active);
    let v = fed.server.fuse(&shares).unwrap();
    let want: f64 = (0..7).map(|i| Federation::scalar(i, 0)).sum();
    assert!((v - want).abs() < 1e-4, "{v} vs {want}");
}

#[test]
fn a_device_answers_once_per_ciphertext_whatever_the_set_or_the_server() {
    let mut fed = Federation::new(5);
    let sum = fed.upload_all(0);
    let first = fed.server.active_set(&(0..7).collect::<Vec<_>>()).unwrap();
    // The server cannot fix a second set for the same round.
    assert!(matches!(
        fed.server.active_set(&(3..10).collect::<Vec<_>>()),
        Err(ProtocolError::OutOfOrder(_))
    ));
    let shares = fed.shares(&sum, &first);
    // Another "server session" with the same key and bytes asks device 3 again with another
    // set: refused, also from the device restored from its save.
    let committee = Committee::new(T, &(0..N).collect::<Vec<_>>()).unwrap();
    let second = ActiveSet::new(&committee, &sum.sum, &[3, 4, 5, 6, 7, 8, 9]).unwrap();
    {
        let d = &mut fed.devices[3];
        let e = d.threshold_share(&sum, &second, &mut fed.rng).unwrap_err();
        assert!(
            matches!(
                e,
                ProtocolError::PeerMisbehaved {
                    kind: Misbehavior::Duplicate,
                    ..
                }
            ),
            "{e}"
        );
        let mut restored = DigitalDevice::restore(&fed.params, &fed.crs, &d.save()).unwrap();
        assert!(
            restored
                .threshold_share(&sum, &second, &mut fed.rng)
                .is_err()
        );
        assert!(
            restored
                .threshold_share(&sum, &first, &mut fed.rng)
                .is_err()
        );
    }
    // Device 8 was not in the first set: its own ledger is clear, but the N-of-N request is
    // refused on a threshold key.
    assert!(matches!(
        fed.devices[8].decryption_share(&sum, &mut fed.rng),
        Err(ProtocolError::OutOfOrder(_))
    ));
    let v = fed.server.fuse(&shares).unwrap();
    assert!((v - expected(0)).abs() < 1e-4);
    // A retry after a failed round is a fresh encryption: the next round's sum of the same
    // scalars has another digest, and the devices answer it.
    let again = fed.upload_all(0);
    assert_ne!(again.sum.digest(), sum.sum.digest());
    let active = fed.server.active_set(&(3..10).collect::<Vec<_>>()).unwrap();
    let shares = fed.shares(&again, &active);
    let v = fed.server.fuse(&shares).unwrap();
    assert!((v - expected(0)).abs() < 1e-4);
}

#[test]
fn threshold_setup_refuses_out_of_order_steps_and_a_second_deal() {
    let mut fed = Federation::new(6);
    let d = &mut fed.devices[0];
    assert!(matches!(
        d.deal_threshold(&[], &mut fed.rng),
        Err(ProtocolError::OutOfOrder(_))
    ));
    assert!(d.start_threshold(11, 2, &mut fed.rng).is_err()); // more than the members
    assert!(d.start_threshold(1, 2, &mut fed.rng).is_err()); // one member alone
    // A sum of fewer encryptions than the threshold is refused by every device.
    let round = fed.server.round();
    let ups: Vec<Ciphertext> = fed.devices[1..4]
        .iter_mut()
        .map(|d| d.encrypt(round, 1, &mut fed.rng).unwrap().ct)
        .collect();
    let small = SumBroadcast {
        round,
        sum: Ciphertext::sum(&ups).unwrap(),
    };
    let committee = Committee::new(T, &(0..N).collect::<Vec<_>>()).unwrap();
    let active = ActiveSet::new(&committee, &small.sum, &[1, 2, 3, 4, 5, 6, 7]).unwrap();
    let e = fed.devices[1]
        .threshold_share(&small, &active, &mut fed.rng)
        .unwrap_err();
    assert!(e.to_string().contains("needs at least 7"), "{e}");
    // A fresh setup: a device deals once; asked again (also after a restore) it refuses.
    let keys: Vec<SealingKey> = fed
        .devices
        .iter_mut()
        .map(|d| d.start_threshold(T, 2, &mut fed.rng).unwrap())
        .collect();
    fed.devices[0].deal_threshold(&keys, &mut fed.rng).unwrap();
    let mut restored =
        DigitalDevice::restore(&fed.params, &fed.crs, &fed.devices[0].save()).unwrap();
    for d in [&mut fed.devices[0], &mut restored] {
        let e = d.deal_threshold(&keys, &mut fed.rng).unwrap_err();
        assert!(e.to_string().contains("deal twice"), "{e}");
    }
}

#[test]
fn the_dealing_check_is_answered_once_and_missing_answers_blame_no_dealer() {
    let mut fed = Federation::new(8);
    let members: Vec<u32> = (0..N).collect();
    // Saved and restored (in `new`), a device still refuses a second check, whatever the seed.
    let check = fed.server.dealing_check(T, 1, [4u8; 32], &members).unwrap();
    let e = fed.devices[0]
        .answer_dealing_check(&check, &fed.crs, &mut fed.rng)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("already answered this setup's dealing check"),
        "{e}"
    );
    // Answers missing: refused by the first absent member, no dealer blamed.
    let e = fed
        .server
        .failed_dealers(T, &fed.crs, &check, &[])
        .unwrap_err();
    assert!(e.to_string().contains("missing share from party 0"), "{e}");
}

/// Smudging sized for 2^−40 from one honest member's share (σ* ≈ 2^59.7 at n = 4096 for ten
/// parties' sum): the scalars are lifted above it, and a round with three devices gone still
/// gives the sum of all ten within 1e-4, as at the default smudging.
#[test]
fn smudging_sized_for_two_to_the_minus_forty_keeps_the_sum() {
    use privopt_ckks::multiparty::{lift_log2, smudging_for_distance};
    let bound = smudging_for_distance(&params(), N as usize, N as usize, T, 40.0);
    assert!((59.6..59.8).contains(&bound.smudging_log2), "{bound:?}");
    let params = CkksParamsBuilder::new(4096, &[37, 36, 36])
        .smudging_log2(bound.smudging_log2)
        .build()
        .unwrap();
    // ⌈59.7 − 20⌉: the precision of the default smudging.
    assert_eq!(lift_log2(&params), 40);
    let mut fed = Federation::with(params, 11);
    for (k, gone) in [(0, vec![]), (1, vec![2, 5, 9])] {
        let v = fed.round(k, &gone).unwrap();
        assert!(
            (v - expected(k)).abs() < 1e-4,
            "round {k}: {v} vs {}",
            expected(k)
        );
    }
    // A scalar whose lifted sum would wrap Q is refused by the device, not sent: at smudging
    // 2^65 (lift 2^45) a scalar near the encoder's 2^62 needs 2^111 of the 2^109.
    let wide = CkksParamsBuilder::new(4096, &[37, 36, 36])
        .smudging_log2(65.0)
        .build()
        .unwrap();
    let mut fed = Federation::with(wide, 12);
    let round = fed.server.round();
    let huge = encode_scalar(4e6, &fed.params).unwrap();
    let e = fed.devices[0]
        .encrypt(round, huge, &mut fed.rng)
        .unwrap_err();
    assert!(e.to_string().contains("of the modulus"), "{e}");
}
