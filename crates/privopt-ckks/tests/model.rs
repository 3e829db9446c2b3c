//! Whole models under a threshold key: five updates of a model that spans several
//! ciphertexts, summed and decrypted by any four of the five members through bytes, give the
//! average within 10^-6 of its largest entry; a member answers each chunk once; bad updates
//! and undersized parameters are refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use privopt_ckks::multiparty::{
    ActiveSet, CollectivePublicKey, Committee, CommonPoly, EncryptedModel, ModelCodec, Party,
    ThresholdParty, fuse_threshold_batch,
};
use privopt_ckks::wire::{share_batch_from_bytes, share_batch_to_bytes};
use privopt_ckks::{CkksError, CkksParams, CkksParamsBuilder};
use privopt_math::sample::secret_rng;
use rand::Rng;

const N: u32 = 5;
const T: usize = 4;

/// n = 4096 with one 60-bit prime (log Q = 60, within the 128-bit table's 109) at Λ = 2^46.
fn params() -> Arc<CkksParams> {
    CkksParamsBuilder::new(4096, &[60])
        .scale_log2(46)
        .build()
        .unwrap()
}

fn setup(params: &Arc<CkksParams>) -> (CollectivePublicKey, Committee, Vec<ThresholdParty>) {
    let mut rng = secret_rng(Some(3));
    let crs = CommonPoly::from_seed(params, [4u8; 32]);
    let ids: Vec<u32> = (0..N).collect();
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party::generate(i, params, &crs, &mut rng))
        .collect();
    let pk: Vec<_> = parties.iter().map(|p| p.public_key_share(1)).collect();
    let key = CollectivePublicKey::aggregate(params, &crs, &ids, 1, &pk).unwrap();
    let committee = Committee::new(T, &ids).unwrap();
    let mut inbox: Vec<Vec<_>> = (0..N).map(|_| Vec::new()).collect();
    for p in &parties {
        for s in p.deal(&committee, 1, &mut rng).unwrap() {
            inbox[s.to() as usize].push(s);
        }
    }
    let members = parties
        .iter()
        .zip(&inbox)
        .map(|(p, s)| ThresholdParty::from_shares(p, &committee, 1, s).unwrap())
        .collect();
    (key, committee, members)
}

#[test]
fn four_of_five_decrypt_the_average_of_five_models_within_1e_6() {
    let params = params();
    let (key, committee, mut members) = setup(&params);
    let len = 3 * 4096 + 17; // four chunks, the last one mostly padding
    let codec = ModelCodec::new(&params, len, 8.0, 64).unwrap();
    assert_eq!(codec.chunks(), 4);
    let mut rng = secret_rng(Some(7));
    let updates: Vec<Vec<f32>> = (0..N)
        .map(|_| (0..len).map(|_| rng.random_range(-0.1f32..0.1)).collect())
        .collect();
    let uploads: Vec<EncryptedModel> = updates
        .iter()
        .map(|u| {
            let m = codec.encrypt(&key, u, &mut rng).unwrap();
            EncryptedModel::from_bytes(&params, &m.to_bytes()).unwrap()
        })
        .collect();
    let sum = EncryptedModel::sum(&uploads.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(sum.count(), N);
    // Member 2 is gone; the other four decrypt.
    let active = ActiveSet::for_batch(&committee, sum.ciphertexts(), &[0, 1, 3, 4]).unwrap();
    let active = ActiveSet::from_bytes(&params, &active.to_bytes(&params)).unwrap();
    let shares: Vec<_> = [0usize, 1, 3, 4]
        .iter()
        .map(|&j| {
            let s = members[j]
                .partial_decrypt_batch(sum.ciphertexts(), &active, &mut rng)
                .unwrap();
            share_batch_from_bytes(&params, &share_batch_to_bytes(&params, &s)).unwrap()
        })
        .collect();
    let plain = fuse_threshold_batch(sum.ciphertexts(), &active, &shares).unwrap();
    let avg = codec.average(&plain, sum.count()).unwrap();
    assert_eq!(avg.len(), len);
    let want: Vec<f64> = (0..len)
        .map(|i| updates.iter().map(|u| f64::from(u[i])).sum::<f64>() / f64::from(N))
        .collect();
    let max = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let err = avg
        .iter()
        .zip(&want)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        err / max < 1e-6,
        "max error {err:e} against max |avg| {max:e}"
    );
    // Each chunk is spent: asked again for one chunk alone, or the whole batch, a member
    // refuses.
    let one = ActiveSet::new(&committee, &sum.ciphertexts()[1], &[0, 1, 3, 4]).unwrap();
    assert!(matches!(
        members[0].partial_decrypt(&sum.ciphertexts()[1], &one, &mut rng),
        Err(CkksError::AlreadyAnswered { party: 0 })
    ));
    assert!(matches!(
        members[1].partial_decrypt_batch(sum.ciphertexts(), &active, &mut rng),
        Err(CkksError::AlreadyAnswered { party: 1 })
    ));
    // Shares out of their place in the batch, or one list short, are refused.
    let mut swapped = shares.clone();
    swapped[0].swap(0, 1);
    assert!(fuse_threshold_batch(sum.ciphertexts(), &active, &swapped).is_err());
    let mut short = shares;
    short[2].pop();
    assert!(fuse_threshold_batch(sum.ciphertexts(), &active, &short).is_err());
}

#[test]
fn bad_updates_and_undersized_parameters_are_refused_by_name() {
    let params = params();
    let (key, _, _) = setup(&params);
    let codec = ModelCodec::new(&params, 100, 1.0, 8).unwrap();
    let mut rng = secret_rng(Some(8));
    let mut v = vec![0.5f32; 100];
    v[42] = f32::NAN;
    let e = codec.encrypt(&key, &v, &mut rng).unwrap_err();
    assert!(e.to_string().contains("index 42"), "{e}");
    v[42] = 1.5;
    let e = codec.encrypt(&key, &v, &mut rng).unwrap_err();
    assert!(e.to_string().contains("index 42"), "{e}");
    assert!(codec.encrypt(&key, &v[..99], &mut rng).is_err());
    // 2^20 updates within ±2^10 at 2^46 need more than the 60-bit modulus.
    let e = ModelCodec::new(&params, 100, 1024.0, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("needs a modulus"), "{e}");
    // Damaged model bytes are refused.
    let m = codec.encrypt(&key, &[0.25; 100], &mut rng).unwrap();
    let mut bytes = m.to_bytes();
    bytes.truncate(bytes.len() - 1);
    assert!(EncryptedModel::from_bytes(&params, &bytes).is_err());
}
