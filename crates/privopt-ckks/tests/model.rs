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

type Setup = (
    CollectivePublicKey,
    Committee,
    Vec<ThresholdParty>,
    Vec<Party>,
);

fn setup(params: &Arc<CkksParams>) -> Setup {
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
    (key, committee, members, parties)
}

/// The largest error of `avg` against the mean of `updates`, over the mean's largest entry.
fn relative_error(avg: &[f64], updates: &[&Vec<f32>]) -> f64 {
    let k = updates.len() as f64;
    let want: Vec<f64> = (0..avg.len())
        .map(|i| updates.iter().map(|u| f64::from(u[i])).sum::<f64>() / k)
        .collect();
    let max = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let err = avg
        .iter()
        .zip(&want)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    err / max
}

/// Each listed member's shares of `batch` for `active`, through bytes.
fn shares_of(
    params: &Arc<CkksParams>,
    members: &mut [ThresholdParty],
    batch: &[privopt_ckks::multiparty::Ciphertext],
    active: &ActiveSet,
) -> Vec<Vec<privopt_ckks::multiparty::DecryptionShare>> {
    let mut rng = secret_rng(Some(11));
    active
        .members()
        .iter()
        .map(|&j| {
            let s = members[j as usize]
                .partial_decrypt_batch(batch, active, &mut rng)
                .unwrap();
            share_batch_from_bytes(params, &share_batch_to_bytes(params, &s)).unwrap()
        })
        .collect()
}

#[test]
fn four_of_five_decrypt_the_average_of_five_models_within_1e_6() {
    let params = params();
    let (key, committee, mut members, _) = setup(&params);
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
    let shares = shares_of(&params, &mut members, sum.ciphertexts(), &active);
    let plain = fuse_threshold_batch(sum.ciphertexts(), &active, &shares).unwrap();
    let avg = codec.average(&plain, sum.count()).unwrap();
    assert_eq!(avg.len(), len);
    let err = relative_error(&avg, &updates.iter().collect::<Vec<_>>());
    assert!(err < 1e-6, "max relative error {err:e}");
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
    let (key, _, _, _) = setup(&params);
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

#[test]
fn secret_key_uploads_are_half_the_bytes_and_any_four_decrypt_the_uploaders_sum_once() {
    let params = params();
    let (key, committee, mut members, parties) = setup(&params);
    let len = 2 * 4096 + 5;
    let codec = ModelCodec::new(&params, len, 8.0, 64).unwrap();
    let mut rng = secret_rng(Some(9));
    let updates: Vec<Vec<f32>> = (0..N)
        .map(|_| (0..len).map(|_| rng.random_range(-0.1f32..0.1)).collect())
        .collect();
    let upload = |i: usize, rng: &mut _| {
        let m = codec
            .encrypt_secret(&parties[i], &committee, 1, &updates[i], rng)
            .unwrap();
        EncryptedModel::from_bytes(&params, &m.to_bytes()).unwrap()
    };
    let uploads: Vec<EncryptedModel> = (0..N as usize).map(|i| upload(i, &mut rng)).collect();
    // Half the bytes of a public-key upload, but for a header and the contributor's id.
    let public = codec
        .encrypt(&key, &updates[0], &mut rng)
        .unwrap()
        .to_bytes()
        .len();
    let secret = uploads[0].to_bytes().len();
    assert!(
        secret * 2 < public + 200 && secret * 2 > public - 200,
        "{secret} vs {public}"
    );
    assert_eq!(uploads[0].contributors(), Some(&[0u32][..]));

    // Member 2 uploaded nothing; the other four's sum is decrypted by a set with 2 in it (it
    // holds a share of every member's secret).
    let four: Vec<&EncryptedModel> = [0usize, 1, 3, 4].iter().map(|&i| &uploads[i]).collect();
    let sum = EncryptedModel::sum(&four).unwrap();
    let sum = EncryptedModel::from_bytes(&params, &sum.to_bytes()).unwrap();
    assert_eq!(sum.contributors(), Some(&[0u32, 1, 3, 4][..]));
    assert_eq!(sum.count(), 4);
    let active = ActiveSet::for_batch(&committee, sum.ciphertexts(), &[0, 2, 3, 4]).unwrap();
    let shares = shares_of(&params, &mut members, sum.ciphertexts(), &active);
    let plain = fuse_threshold_batch(sum.ciphertexts(), &active, &shares).unwrap();
    let avg = codec.average(&plain, sum.count()).unwrap();
    let uploaders: Vec<&Vec<f32>> = [0usize, 1, 3, 4].iter().map(|&i| &updates[i]).collect();
    let err = relative_error(&avg, &uploaders);
    assert!(err < 1e-6, "max relative error {err:e}");

    // The sum of all five shares its chunks' `a` with the four's: already answered, so the
    // difference (member 2's update) is never decrypted.
    let five = EncryptedModel::sum(&uploads.iter().collect::<Vec<_>>()).unwrap();
    let again = ActiveSet::for_batch(&committee, five.ciphertexts(), &[0, 2, 3, 4]).unwrap();
    assert!(matches!(
        members[0].partial_decrypt_batch(five.ciphertexts(), &again, &mut rng),
        Err(CkksError::AlreadyAnswered { party: 0 })
    ));
    // One member's shares for another contributor set do not fuse into this one.
    assert_ne!(again.digest(), active.digest());

    // Fewer contributors than the threshold: no set is made, and a member refuses a forged
    // one (the server would learn a sum of three updates, down to one).
    let three: Vec<&EncryptedModel> = [0usize, 1, 3].iter().map(|&i| &uploads[i]).collect();
    let small = EncryptedModel::sum(&three).unwrap();
    let e = ActiveSet::for_batch(&committee, small.ciphertexts(), &[0, 1, 3, 4]).unwrap_err();
    assert!(
        e.to_string().contains("a sum of 3 members' encryptions"),
        "{e}"
    );
    let mut forged = active.to_bytes(&params);
    let (_, digest) = privopt_ckks::multiparty::batch_digest(small.ciphertexts()).unwrap();
    forged[48..80].copy_from_slice(&digest);
    let forged = ActiveSet::from_bytes(&params, &forged).unwrap();
    let e = members[3]
        .partial_decrypt_batch(small.ciphertexts(), &forged, &mut rng)
        .unwrap_err();
    assert!(
        e.to_string().contains("a sum of 3 members' encryptions"),
        "{e}"
    );

    // An upload that is no encryption under its sender's secret (here party 0's c0 sent as
    // party 3's, as a client that lies about its id would) decrypts to garbage: the average
    // refuses it by index rather than returning it.
    // (The members above have answered for every chunk of session 1: a new round, session 2.)
    let header = uploads[0].to_bytes().len() - 3 * 4096 * 8;
    let (_, committee, mut fresh, parties) = setup(&params);
    let honest: Vec<EncryptedModel> = (0..3)
        .map(|i| {
            codec
                .encrypt_secret(&parties[i], &committee, 2, &updates[i], &mut rng)
                .unwrap()
        })
        .collect();
    let mut liar = codec
        .encrypt_secret(&parties[0], &committee, 2, &updates[3], &mut rng)
        .unwrap()
        .to_bytes();
    let claimed = codec
        .encrypt_secret(&parties[3], &committee, 2, &updates[3], &mut rng)
        .unwrap()
        .to_bytes();
    liar[..header].copy_from_slice(&claimed[..header]);
    let liar = EncryptedModel::from_bytes(&params, &liar).unwrap();
    let spoiled = EncryptedModel::sum(&[&honest[0], &honest[1], &honest[2], &liar]).unwrap();
    let set = ActiveSet::for_batch(&committee, spoiled.ciphertexts(), &[0, 1, 2, 4]).unwrap();
    let shares = shares_of(&params, &mut fresh, spoiled.ciphertexts(), &set);
    let plain = fuse_threshold_batch(spoiled.ciphertexts(), &set, &shares).unwrap();
    let e = codec.average(&plain, spoiled.count()).unwrap_err();
    assert!(
        e.to_string().contains("the decrypted sum at index 0"),
        "{e}"
    );

    // One upload counted twice, or summed with a public-key one, is refused by name; the
    // N-of-N path refuses a secret-key sum (its secret is the contributors', not all).
    let e = EncryptedModel::sum(&[&uploads[0], &uploads[1], &uploads[0]]).unwrap_err();
    assert!(
        e.to_string()
            .contains("party 0's encryption is in both sums"),
        "{e}"
    );
    let public = codec.encrypt(&key, &updates[0], &mut rng).unwrap();
    assert!(EncryptedModel::sum(&[&uploads[1], &public]).is_err());
    assert!(
        parties[0]
            .partial_decrypt(&five.ciphertexts()[0], &mut rng)
            .is_err()
    );
    // A party outside the committee cannot encrypt for it.
    let crs = CommonPoly::from_seed(&params, [4u8; 32]);
    let stranger = Party::generate(9, &params, &crs, &mut rng);
    assert!(matches!(
        codec.encrypt_secret(&stranger, &committee, 1, &updates[0], &mut rng),
        Err(CkksError::UnknownParty { party: 9 })
    ));
}

/// Smudging sized for 2^−40 over the whole decrypted batch, from one honest member's noise
/// (σ* ≈ 2^52 here): the fused noise has the variance the formula gives, `|A|·σ*²` per
/// coefficient, and the lift keeps the average within 1e-6 of its largest entry.
#[test]
fn smudging_sized_for_two_to_the_minus_forty_floods_as_stated_and_keeps_the_average() {
    use privopt_ckks::multiparty::model_smudging_for_distance;
    let len = 3 * 4096 + 17;
    let bits = || CkksParamsBuilder::new(4096, &[60, 45]).scale_log2(46);
    let bound = model_smudging_for_distance(&bits().build().unwrap(), len, 5, 4, 40.0);
    // 4 chunks = 2^14 coefficients, error sd 3.2·√5: 2^(7 + 2.84 + 3.70 + 40 − 1.33).
    assert!(
        (bound.smudging_log2 - 52.21).abs() < 0.01,
        "{}",
        bound.smudging_log2
    );
    // One bit more per bit of distance, half a bit per doubling of the batch.
    let further = model_smudging_for_distance(&bits().build().unwrap(), len, 5, 4, 41.0);
    assert!((further.smudging_log2 - bound.smudging_log2 - 1.0).abs() < 1e-9);
    let twice = model_smudging_for_distance(&bits().build().unwrap(), 2 * 4 * 4096, 5, 4, 40.0);
    assert!((twice.smudging_log2 - bound.smudging_log2 - 0.5).abs() < 1e-9);

    let params = bits().smudging_log2(bound.smudging_log2).build().unwrap();
    let (_, committee, mut members, parties) = setup(&params);
    let codec = ModelCodec::new(&params, len, 8.0, N).unwrap();
    // ⌈52.21 − 20⌉: the precision of the default smudging.
    assert_eq!(codec.lift_log2(), 33);
    let mut rng = secret_rng(Some(12));
    let updates: Vec<Vec<f32>> = (0..N)
        .map(|_| (0..len).map(|_| rng.random_range(-0.1f32..0.1)).collect())
        .collect();
    let uploads: Vec<EncryptedModel> = (0..N as usize)
        .map(|i| {
            codec
                .encrypt_secret(&parties[i], &committee, 1, &updates[i], &mut rng)
                .unwrap()
        })
        .collect();
    let sum = EncryptedModel::sum(&uploads.iter().collect::<Vec<_>>()).unwrap();
    let active = ActiveSet::for_batch(&committee, sum.ciphertexts(), &[0, 1, 3, 4]).unwrap();
    let shares = shares_of(&params, &mut members, sum.ciphertexts(), &active);
    let plain = fuse_threshold_batch(sum.ciphertexts(), &active, &shares).unwrap();
    let avg = codec.average(&plain, N).unwrap();
    let err = relative_error(&avg, &updates.iter().collect::<Vec<_>>());
    assert!(err < 1e-6, "max relative error {err:e}");

    // The noise: fused coefficients less the lifted sum of the encoded updates.
    let scale = params.scale();
    let mut noise = Vec::new();
    for (k, p) in plain.iter().enumerate() {
        for (j, c) in p.integer_coefficients().unwrap().into_iter().enumerate() {
            let i = k * 4096 + j;
            let m: i128 = updates
                .iter()
                .map(|u| {
                    u.get(i)
                        .map_or(0, |&x| (f64::from(x) * scale).round() as i128)
                })
                .sum();
            noise.push((c - (m << codec.lift_log2())) as f64);
        }
    }
    let count = noise.len() as f64;
    let variance = noise.iter().map(|x| x * x).sum::<f64>() / count;
    let want = 4.0 * 2f64.powf(2.0 * bound.smudging_log2);
    let se = want * (2.0 / count).sqrt();
    assert!(
        (variance - want).abs() < 5.0 * se,
        "fused noise variance {variance:e}, formula {want:e} (se {se:e})"
    );
}
