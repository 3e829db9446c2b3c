//! The targets: every decoder of bytes that can come from outside a party, with valid seeds
//! made by the real encoders.

use std::path::Path;
use std::sync::Arc;

use privopt_ckks::eval::{EvalContext, SecretKey, encode};
use privopt_ckks::multiparty::{
    ActiveSet, Ciphertext as MkCiphertext, CollectivePublicKey, Committee, CommonPoly,
    DealingAnswer, DealingCheck, DecryptionShare, EncryptedModel, ModelCodec, Party,
    PublicKeyShare, SecretShare, ThresholdParty,
};
use privopt_ckks::params::CkksParamsBuilder;
use privopt_ckks::{CkksParams, eval};
use privopt_math::sample::secret_rng;
use privopt_protocols::Message;
use privopt_protocols::dome::{BasisChunk, RoundBroadcast};
use privopt_protocols::scalar_fl::{CatchUp, Reply, RoundPlan, RoundRecord, Update};
use privopt_secagg::{
    AdvertiseKeys, Client, ClientConfig, ClientSnapshot, Context, Graph, IncomingShares,
    MaskedInput, NeighbourKeys, Server, ServerConfig, SessionId, ShareKeys, UnmaskLedger,
    UnmaskRequest, UnmaskShares,
};
use rand_chacha::ChaCha20Rng;

use crate::Target;

type Fixture<T> = Result<T, String>;

/// Seed of the xMK-CKKS common polynomial of the fixtures.
const CRS_SEED: [u8; 32] = [3; 32];

fn target(name: &'static str, seeds: Vec<Vec<u8>>, run: impl Fn(&[u8]) + 'static) -> Target {
    Target {
        name,
        seeds,
        framed: false,
        run: Box::new(run),
    }
}

/// A target for a privopt-protocols message (checksummed framing).
fn message<M: Message + 'static>(name: &'static str, seeds: Vec<Vec<u8>>) -> Target {
    Target {
        name,
        seeds,
        framed: true,
        run: Box::new(|b| drop(M::from_bytes(b))),
    }
}

/// Every target, with its fixtures made (keys, a SecAgg+ round); an `Err` names a fixture
/// that could not be made.
pub fn all_targets() -> Result<Vec<Target>, String> {
    let mut out = Vec::new();
    out.extend(ckks_targets()?);
    out.extend(paillier_targets()?);
    out.extend(pdsgd_targets().map_err(|e| e.to_string())?);
    out.extend(secagg_targets()?);
    out.extend(protocol_targets());
    out.push(scalar_fl_server_target().map_err(|e| e.to_string())?);
    out.extend(file_targets());
    Ok(out)
}

fn ckks_targets() -> Fixture<Vec<Target>> {
    let e = |e: privopt_ckks::CkksError| e.to_string();
    // xMK-CKKS at the paper's n = 4096 set.
    let params = CkksParams::paper_n4096().map_err(e)?;
    let mut rng = secret_rng(Some(1));
    let crs = CommonPoly::from_seed(&params, CRS_SEED);
    let parties: Vec<Party> = (0..3)
        .map(|i| Party::generate(i, &params, &crs, &mut rng))
        .collect();
    // The session EEZOFL's key setup uses, so the server handler can aggregate these shares.
    let session = privopt_protocols::eezofl::KEY_SESSION;
    let key_shares: Vec<PublicKeyShare> = parties
        .iter()
        .map(|p| p.public_key_share(session))
        .collect();
    let key = CollectivePublicKey::aggregate(&params, &crs, &[0, 1, 2], session, &key_shares)
        .map_err(e)?;
    let ct = key.encrypt_scalar(0.5, &mut rng).map_err(e)?;
    let share = parties[0].partial_decrypt(&ct, &mut rng).map_err(e)?;
    // Threshold (2 of the 3): one dealt secret share and the active set of `ct`.
    let committee = Committee::new(2, &[0, 1, 2]).map_err(e)?;
    let dealt = parties[0].deal(&committee, session, &mut rng).map_err(e)?;
    let secret_share = dealt[1].to_bytes(&params).to_vec();
    let active = ActiveSet::new(&committee, &ct, &[0, 2]).map_err(e)?;
    let active_bytes = active.to_bytes(&params);
    let inbox: Vec<SecretShare> = parties
        .iter()
        .map(|p| p.deal(&committee, session, &mut rng))
        .map(|d| d.map(|mut d| d.swap_remove(0)))
        .collect::<Result<_, _>>()
        .map_err(e)?;
    let member = ThresholdParty::from_shares(&parties[0], &committee, session, &inbox)
        .map_err(e)?
        .to_bytes()
        .to_vec();
    // The setup round's messages: a sealing key and a sealed share.
    let (sealing, sealed) = {
        use privopt_protocols::threshold::ThresholdSetup;
        let mut setups = parties
            .iter()
            .map(|p| ThresholdSetup::new(p, &committee, session, &mut rng))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let keys: Vec<_> = setups.iter().map(|s| s.sealing_key()).collect();
        let sealed = setups[0]
            .deal(&parties[0], &keys, &mut rng)
            .map_err(|e| e.to_string())?;
        (keys[0].to_bytes(), sealed[1].to_bytes())
    };
    // A whole model of two chunks, and one member's shares of it.
    let codec = ModelCodec::new(&params, params.n() + 3, 1.0, 8).map_err(e)?;
    let model = codec
        .encrypt(&key, &vec![0.25; params.n() + 3], &mut rng)
        .map_err(e)?;
    let model_bytes = model.to_bytes();
    let model_active = ActiveSet::for_batch(&committee, model.ciphertexts(), &[0, 2]).map_err(e)?;
    let mut member0 =
        ThresholdParty::from_shares(&parties[0], &committee, session, &inbox).map_err(e)?;
    let batch = member0
        .partial_decrypt_batch(model.ciphertexts(), &model_active, &mut rng)
        .map_err(e)?;
    let batch_bytes = privopt_ckks::wire::share_batch_to_bytes(&params, &batch);
    // The dealing check among the three, and member 0's answers to it.
    let check = DealingCheck::new(&committee, session, [2u8; 32], &[0, 1, 2]).map_err(e)?;
    let check_bytes = check.to_bytes(&params);
    let answer_bytes = member0
        .answer_dealing_check(&check, &crs, &mut rng)
        .map_err(e)?
        .to_bytes(&params);
    let (p1, p2, p3) = (params.clone(), params.clone(), params.clone());
    let (p4, p5, p6) = (params.clone(), params.clone(), params.clone());
    let (p7, p8) = (params.clone(), params.clone());
    let (p9, p10) = (params.clone(), params.clone());
    // The leveled engine at a small (insecure, decode-only) ring for speed.
    let leveled = CkksParamsBuilder::leveled(4096, 50, 40, 1, &[47])
        .insecure_for_testing(true)
        .build()
        .map_err(e)?;
    let ctx = EvalContext::new(&leveled).map_err(e)?;
    let sk = SecretKey::generate(&ctx, &mut rng);
    let pk = sk.public_key(&mut rng);
    let relin = sk.relin_key(&mut rng);
    let pt = encode(&ctx, &[0.25, -1.0, 3.0], ctx.max_level()).map_err(e)?;
    let lct = pk.encrypt(&pt, &mut rng).map_err(e)?;
    let (l1, l2, c1) = (leveled.clone(), leveled.clone(), ctx.clone());
    let mut eezofl = eezofl_targets(&params, &ct, &share, &key_shares);
    eezofl.extend(eezofl_device_targets(&params, &mut rng).map_err(|e| e.to_string())?);
    eezofl.push(
        eezofl_server_target(&params, &key, &key_shares, &mut rng).map_err(|e| e.to_string())?,
    );
    let dpfhe = dpfhe_targets(&ctx, &lct);
    Ok([
        eezofl,
        dpfhe,
        vec![
            target("ckks/mk-ciphertext", vec![ct.to_bytes()], move |b| {
                drop(MkCiphertext::from_bytes(&p1, b))
            }),
            target(
                "ckks/decryption-share",
                vec![share.to_bytes(&params)],
                move |b| drop(DecryptionShare::from_bytes(&p2, b)),
            ),
            target(
                "ckks/public-key-share",
                vec![key_shares[1].to_bytes(&params)],
                move |b| drop(PublicKeyShare::from_bytes(&p3, b)),
            ),
            target("ckks/secret-share", vec![secret_share], move |b| {
                drop(SecretShare::from_bytes(&p4, b))
            }),
            target("ckks/active-set", vec![active_bytes], move |b| {
                drop(ActiveSet::from_bytes(&p5, b))
            }),
            target("ckks/threshold-party", vec![member], move |b| {
                drop(ThresholdParty::from_bytes(&p6, b))
            }),
            target("ckks/encrypted-model", vec![model_bytes], move |b| {
                drop(EncryptedModel::from_bytes(&p7, b))
            }),
            target("ckks/share-batch", vec![batch_bytes], move |b| {
                drop(privopt_ckks::wire::share_batch_from_bytes(&p8, b))
            }),
            target("ckks/dealing-check", vec![check_bytes], move |b| {
                drop(DealingCheck::from_bytes(&p9, b))
            }),
            target("ckks/dealing-answer", vec![answer_bytes], move |b| {
                drop(DealingAnswer::from_bytes(&p10, b))
            }),
            framed("threshold/sealing-key", vec![sealing], |b| {
                drop(privopt_protocols::threshold::SealingKey::from_bytes(b))
            }),
            framed("threshold/sealed-share", vec![sealed], |b| {
                drop(privopt_protocols::threshold::SealedShare::from_bytes(b))
            }),
            target("ckks/ciphertext", vec![lct.to_bytes(&leveled)], move |b| {
                drop(eval::Ciphertext::from_bytes(&l1, b))
            }),
            target("ckks/public-key", vec![pk.to_bytes()], move |b| {
                drop(eval::PublicKey::from_bytes(&c1, b))
            }),
            target("ckks/relin-key", vec![relin.to_bytes(&leveled)], move |b| {
                drop(eval::RelinKey::from_bytes(&l2, b))
            }),
        ],
    ]
    .into_iter()
    .flatten()
    .collect())
}

/// A context-dependent message: framed, decoded with `decode`.
fn framed(name: &'static str, seeds: Vec<Vec<u8>>, run: impl Fn(&[u8]) + 'static) -> Target {
    Target {
        framed: true,
        ..target(name, seeds, run)
    }
}

/// EEZOFL's digital messages, made from the xMK-CKKS fixtures.
fn eezofl_targets(
    params: &Arc<CkksParams>,
    ct: &MkCiphertext,
    share: &DecryptionShare,
    key_shares: &[PublicKeyShare],
) -> Vec<Target> {
    use privopt_protocols::eezofl::{KeyRelay, ShareUpload, SumBroadcast, Upload};
    let upload = Upload {
        from: 1,
        round: 4,
        ct: ct.clone(),
    };
    let sum = SumBroadcast {
        round: 4,
        sum: ct.clone(),
    };
    let share = ShareUpload {
        round: 4,
        share: share.clone(),
    };
    let relay = KeyRelay {
        members: vec![0, 1, 2],
        shares: key_shares.to_vec(),
    };
    let (p1, p2, p3, p4) = (
        params.clone(),
        params.clone(),
        params.clone(),
        params.clone(),
    );
    vec![
        framed("eezofl/upload", vec![upload.to_bytes()], move |b| {
            drop(Upload::from_bytes(&p1, b))
        }),
        framed("eezofl/sum-broadcast", vec![sum.to_bytes()], move |b| {
            drop(SumBroadcast::from_bytes(&p2, b))
        }),
        framed(
            "eezofl/share-upload",
            vec![share.to_bytes(params)],
            move |b| drop(ShareUpload::from_bytes(&p3, b)),
        ),
        framed("eezofl/key-relay", vec![relay.to_bytes(params)], move |b| {
            drop(KeyRelay::from_bytes(&p4, b))
        }),
    ]
}

/// The EEZOFL server summing one hostile upload among the honest ones (a fresh server per
/// input, set up from the recorded key shares).
fn eezofl_server_target(
    params: &Arc<CkksParams>,
    key: &CollectivePublicKey,
    key_shares: &[PublicKeyShare],
    rng: &mut ChaCha20Rng,
) -> Result<Target, privopt_protocols::ProtocolError> {
    use privopt_protocols::eezofl::{DigitalServer, Upload};
    let uploads = (0..3)
        .map(|from| {
            Ok(Upload {
                from,
                round: 0,
                ct: key.encrypt_scalar(f64::from(from), rng)?,
            })
        })
        .collect::<Result<Vec<_>, privopt_ckks::CkksError>>()?;
    let seeds = uploads.iter().map(Upload::to_bytes).collect();
    let (params, shares) = (Arc::clone(params), key_shares.to_vec());
    let crs = CommonPoly::from_seed(&params, CRS_SEED);
    Ok(framed("eezofl/server-sum-handler", seeds, move |b| {
        let Ok(hostile) = Upload::from_bytes(&params, b) else {
            return;
        };
        let Ok((mut server, _)) = DigitalServer::setup(&params, &crs, &[0, 1, 2], shares.clone())
        else {
            return;
        };
        let from = hostile.from;
        let mut received: Vec<Upload> =
            uploads.iter().filter(|u| u.from != from).cloned().collect();
        received.push(hostile);
        drop(server.sum(&received));
    }))
}

/// An EEZOFL device's side: its saved state restored, and a device that encrypted for round 0
/// (restored afresh for each input) asked for its decryption share of a hostile sum.
fn eezofl_device_targets(
    params: &Arc<CkksParams>,
    rng: &mut ChaCha20Rng,
) -> Result<Vec<Target>, privopt_protocols::ProtocolError> {
    use privopt_protocols::eezofl::{DigitalDevice, DigitalServer, SumBroadcast, encode_scalar};
    let crs = CommonPoly::from_seed(params, CRS_SEED);
    let mut devices: Vec<DigitalDevice> = (0..3)
        .map(|i| DigitalDevice::generate(i, params, &crs, rng))
        .collect();
    let shares = devices.iter().map(DigitalDevice::key_share).collect();
    let (mut server, relay) = DigitalServer::setup(params, &crs, &[0, 1, 2], shares)?;
    for d in &mut devices {
        d.set_key(&crs, &relay)?;
    }
    let uploads = devices
        .iter_mut()
        .map(|d| d.encrypt(0, encode_scalar(0.5, params)?, rng))
        .collect::<Result<Vec<_>, _>>()?;
    let sum = server.sum(&uploads)?;
    let saved = devices[0].save();
    let (p1, p2) = (Arc::clone(params), Arc::clone(params));
    let (crs1, crs2) = (crs.clone(), crs);
    let state = saved.clone();
    let share_rng = std::cell::RefCell::new(secret_rng(Some(9)));
    Ok(vec![
        framed("eezofl/device-state", vec![state], move |b| {
            drop(DigitalDevice::restore(&p1, &crs1, b))
        }),
        framed(
            "eezofl/device-share-handler",
            vec![sum.to_bytes()],
            move |b| {
                if let (Ok(sum), Ok(mut device)) = (
                    SumBroadcast::from_bytes(&p2, b),
                    DigitalDevice::restore(&p2, &crs2, &saved),
                ) {
                    drop(device.decryption_share(&sum, &mut *share_rng.borrow_mut()));
                }
            },
        ),
    ])
}

/// DP-under-FHE uploads and refreshes, made from the leveled fixtures.
fn dpfhe_targets(ctx: &Arc<EvalContext>, ct: &eval::Ciphertext) -> Vec<Target> {
    use privopt_protocols::dpfhe::{EncryptedStep, Refresh, Weights};
    let step = EncryptedStep {
        step: 2,
        x: ct.clone(),
        y: ct.clone(),
        noise: ct.clone(),
    };
    let refresh = Refresh {
        step: 2,
        ct: ct.clone(),
    };
    let weights = Weights {
        step: 2,
        w: ct.clone(),
    };
    let (c1, c2, c3) = (ctx.clone(), ctx.clone(), ctx.clone());
    vec![
        framed("dpfhe/encrypted-step", vec![step.to_bytes(ctx)], move |b| {
            drop(EncryptedStep::from_bytes(&c1, b))
        }),
        framed("dpfhe/refresh", vec![refresh.to_bytes(ctx)], move |b| {
            drop(Refresh::from_bytes(&c2, b))
        }),
        framed("dpfhe/weights", vec![weights.to_bytes(ctx)], move |b| {
            drop(Weights::from_bytes(&c3, b))
        }),
    ]
}

fn paillier_targets() -> Fixture<Vec<Target>> {
    use privopt_paillier::{BigInt, Ciphertext, KeyPair, PublicKey};
    let mut rng = secret_rng(Some(2));
    let kp = KeyPair::generate(2048, &mut rng).map_err(|e| e.to_string())?;
    let ct = kp
        .public
        .encrypt(&BigInt::from(-12345), &mut rng)
        .map_err(|e| e.to_string())?;
    let (pk1, pk2) = (kp.public.clone(), kp.public.clone());
    use privopt_protocols::pdsgd::{KeyAnnouncement, Paillier};
    let announcement = KeyAnnouncement {
        agent: 3,
        key: kp.public.clone(),
    };
    Ok(vec![
        framed(
            "pdsgd/key-announcement",
            vec![announcement.to_bytes::<Paillier>()],
            |b| drop(KeyAnnouncement::from_bytes::<Paillier>(b)),
        ),
        target("paillier/ciphertext", vec![ct.to_bytes(&pk1)], move |b| {
            drop(Ciphertext::from_bytes(&pk2, b))
        }),
        target("paillier/public-key", vec![kp.public.to_bytes()], |b| {
            drop(PublicKey::from_bytes(b))
        }),
        target("paillier/key-pair", vec![kp.to_bytes()], |b| {
            drop(KeyPair::from_bytes(b))
        }),
    ])
}

/// Paillier D-SGD's exchange, decoded and handled: agent 1 answers a fuzzed request with its
/// state; agent 0 (restored afresh for each input) finishes a fuzzed response.
fn pdsgd_targets() -> Result<Vec<Target>, privopt_protocols::ProtocolError> {
    use std::cell::RefCell;

    use privopt_paillier::KeyPair;
    use privopt_protocols::pdsgd::{Agent, Paillier};
    let mut rng = secret_rng(Some(6));
    let mut agents = Vec::new();
    for id in 0..2 {
        let kp = KeyPair::generate(2048, &mut rng)?;
        agents.push(Agent::<Paillier>::new(id, kp.public.clone(), kp));
    }
    let announcements: Vec<_> = agents.iter().map(Agent::announcement).collect();
    agents[0].add_neighbour(announcements[1].clone(), 3)?;
    agents[1].add_neighbour(announcements[0].clone(), 5)?;
    let request = agents[0].initiate(1, 1, &[4, -7], &mut rng)?;
    let request_bytes = agents[0].encode_request(&request);
    let response = agents[1].respond(&request, &[2, 9], &mut rng)?;
    let response_bytes = agents[1].encode_response(&response)?;
    let saved = agents[0].save();
    let responder = agents.swap_remove(1);
    let rng = RefCell::new(rng);
    let state = saved.clone();
    Ok(vec![
        // The agent's own storage (not a peer's message), restored.
        framed("pdsgd/agent-state", vec![state], |b| {
            drop(Agent::<Paillier>::restore(b))
        }),
        framed("pdsgd/request-handler", vec![request_bytes], move |b| {
            if let Ok(req) = responder.decode_request(b) {
                drop(responder.respond(&req, &[2, 9], &mut *rng.borrow_mut()));
            }
        }),
        framed("pdsgd/response-handler", vec![response_bytes], move |b| {
            if let Ok(mut initiator) = Agent::<Paillier>::restore(&saved)
                && let Ok(resp) = initiator.decode_response(b)
            {
                drop(initiator.finish(&resp, 0.01));
            }
        }),
    ])
}

/// One SecAgg+ round of three clients, its every message recorded.
fn secagg_targets() -> Fixture<Vec<Target>> {
    let e = |e: privopt_secagg::SecAggError| e.to_string();
    let context = Context {
        session: SessionId([4; 16]),
        round: 1,
    };
    let graph = Graph::complete(3).map_err(e)?;
    let (t, len) = (2, 16);
    let mut server = Server::new(ServerConfig {
        context,
        graph: graph.clone(),
        threshold: t,
        vector_len: len,
    })
    .map_err(e)?;
    let mut rng = <ChaCha20Rng as rand::SeedableRng>::seed_from_u64(5);
    let mut clients = Vec::new();
    let mut adverts = Vec::new();
    let mut adverts_sent = Vec::new();
    for c in 0..3 {
        let config = ClientConfig {
            context,
            id: c,
            neighbours: graph.neighbours(c).to_vec(),
            threshold: t,
            vector_len: len,
        };
        let (client, advert) = Client::new(config, &mut rng).map_err(e)?;
        server.receive_keys(advert.clone()).map_err(e)?;
        adverts.push(advert.to_bytes());
        adverts_sent.push(advert);
        clients.push(client);
    }
    let relayed = server.finish_advertising().map_err(e)?;
    let mut shared = Vec::new();
    let mut shares_sent = Vec::new();
    for (client, msg) in clients.iter_mut().zip(&relayed) {
        let reply = client.share_keys(msg, &mut rng).map_err(e)?;
        server.receive_shares(reply.clone()).map_err(e)?;
        shared.push(reply.to_bytes());
        shares_sent.push(reply);
    }
    let shared_snapshots: Vec<ClientSnapshot> = clients.iter().map(Client::snapshot).collect();
    let routed = server.finish_sharing().map_err(e)?;
    let mut masked = Vec::new();
    let mut masked_sent = Vec::new();
    for (i, client) in clients.iter_mut().enumerate() {
        let m = client.mask_input(&routed[i], &[7; 16]).map_err(e)?;
        server.receive_masked(&m).map_err(e)?;
        masked.push(m.to_bytes());
        masked_sent.push(m);
    }
    let masked_snapshot = clients[0].snapshot();
    let snapshots: Vec<Vec<u8>> = clients.iter().map(|c| c.snapshot().to_bytes()).collect();
    let requests = server.finish_masking().map_err(e)?;
    let mut unmask = Vec::new();
    let mut unmask_sent = Vec::new();
    for (client, req) in clients.iter_mut().zip(&requests) {
        let reply = client.unmask(req).map_err(e)?;
        unmask.push(reply.to_bytes());
        unmask_sent.push(reply);
    }
    // The server's last stage fed one hostile reply among the honest ones, then finished: a
    // fresh server replays the recorded round up to the unmasking for each input.
    let config = ServerConfig {
        context,
        graph,
        threshold: t,
        vector_len: len,
    };
    let handler_seeds = unmask.clone();
    let unmask_handler = move |b: &[u8]| {
        let replay = || -> Result<Server, privopt_secagg::SecAggError> {
            let mut s = Server::new(config.clone())?;
            adverts_sent
                .iter()
                .try_for_each(|a| s.receive_keys(a.clone()))?;
            s.finish_advertising()?;
            shares_sent
                .iter()
                .try_for_each(|r| s.receive_shares(r.clone()))?;
            s.finish_sharing()?;
            masked_sent.iter().try_for_each(|m| s.receive_masked(m))?;
            s.finish_masking()?;
            Ok(s)
        };
        let Ok(mut s) = replay() else { return };
        if let Ok(hostile) = UnmaskShares::from_bytes(b) {
            drop(s.receive_unmask(hostile));
        }
        for honest in &unmask_sent {
            drop(s.receive_unmask(honest.clone()));
        }
        drop(s.finish());
    };
    // The client side: client 0, restored from its own snapshot for each input, handles a
    // hostile server message of the masking and the unmasking stage (the latter through a
    // fresh unmask ledger, as the Python binding answers).
    let sharing_client = shared_snapshots[0].clone();
    let mask_handler = move |b: &[u8]| {
        if let (Ok(msg), Ok(mut client)) = (
            IncomingShares::from_bytes(b),
            Client::restore(sharing_client.clone()),
        ) {
            drop(client.mask_input(&msg, &[7; 16]));
        }
    };
    let unmask_client = move |b: &[u8]| {
        if let (Ok(msg), Ok(mut client)) = (
            UnmaskRequest::from_bytes(b),
            Client::restore(masked_snapshot.clone()),
        ) {
            drop(UnmaskLedger::new().unmask(&mut client, &msg));
        }
    };
    Ok(vec![
        framed("secagg/client-mask-handler", bytes(&routed), mask_handler),
        framed(
            "secagg/client-unmask-handler",
            bytes(&requests),
            unmask_client,
        ),
        message::<AdvertiseKeys>("secagg/advertise-keys", adverts),
        message::<NeighbourKeys>("secagg/neighbour-keys", bytes(&relayed)),
        message::<ShareKeys>("secagg/share-keys", shared),
        message::<IncomingShares>("secagg/incoming-shares", bytes(&routed)),
        message::<MaskedInput>("secagg/masked-input", masked),
        message::<UnmaskRequest>("secagg/unmask-request", bytes(&requests)),
        message::<UnmaskShares>("secagg/unmask-shares", unmask),
        message::<ClientSnapshot>("secagg/client-snapshot", snapshots),
        framed(
            "secagg/server-unmask-handler",
            handler_seeds,
            unmask_handler,
        ),
    ])
}

fn bytes<M: Message>(messages: &[M]) -> Vec<Vec<u8>> {
    messages.iter().map(Message::to_bytes).collect()
}

/// The scalar-only FL server finishing a round with one hostile reply among the honest ones
/// (a copy of one server per input, with the round open and every catch-up sent).
fn scalar_fl_server_target() -> Result<Target, privopt_protocols::ProtocolError> {
    use privopt_protocols::scalar_fl::{ModelState, ReplaySpec, Rule, Server};
    let server = || -> Result<(Server, RoundPlan), privopt_protocols::ProtocolError> {
        let spec = ReplaySpec {
            lr: 0.1,
            local_steps: 2,
            perturbations: 2,
            weight_decay: 0.0,
            rule: Rule::Decomfl,
        };
        let initial = ModelState {
            x: vec![0.5; 6],
            h: None,
            round: 0,
        };
        let mut s = Server::new(spec, initial, 3, None)?;
        let plan = s.begin_round(3, &mut <ChaCha20Rng as rand::SeedableRng>::seed_from_u64(8))?;
        Ok((s, plan))
    };
    // One server for every input (its session and ticket key are random), cloned per input.
    let (mut base, plan) = server()?;
    let replies: Vec<Reply> = plan
        .clients
        .iter()
        .map(|&client| {
            Ok(Reply {
                session: plan.session,
                client,
                ticket: base.catch_up(client)?.ticket,
                round: plan.round,
                scalars: vec![0.25, -0.5, 1.0, 0.0],
            })
        })
        .collect::<Result<_, privopt_protocols::ProtocolError>>()?;
    let seeds = bytes(&replies);
    Ok(framed("scalar_fl/server-reply-handler", seeds, move |b| {
        let Ok(hostile) = Reply::from_bytes(b) else {
            return;
        };
        let mut s = base.clone();
        let mut received: Vec<Reply> = replies
            .iter()
            .filter(|r| r.client != hostile.client)
            .cloned()
            .collect();
        received.push(hostile);
        drop(s.finish_round(&received));
    }))
}

fn protocol_targets() -> Vec<Target> {
    let plan = RoundPlan {
        session: 0x5eed,
        round: 3,
        seeds: vec![1, 2, 3, u64::MAX],
        clients: vec![0, 4, 9],
    };
    let reply = Reply {
        session: 0x5eed,
        client: 4,
        ticket: [7; 16],
        round: 3,
        scalars: vec![0.5, -1.25, f32::MIN_POSITIVE],
    };
    let broadcast = RoundBroadcast {
        round: 2,
        participants: 50,
        noise_std: 0.3,
        clip: 1.0,
        quantizer_bound: 8.0,
        m_hat: vec![0.1, -0.2, 0.3, 0.0],
    };
    let chunk = BasisChunk {
        round: 2,
        d: 6,
        k: 2,
        first: 0,
        values: (0..12).map(f64::from).collect(),
    };
    let addressed = |update| CatchUp {
        session: 0x5eed,
        client: 4,
        ticket: [7; 16],
        dim: 6,
        update,
    };
    let catch_up = [
        addressed(Update::UpToDate { round: 5 }),
        addressed(Update::Replay(vec![
            RoundRecord {
                round: 3,
                seeds: vec![9, 10],
                scalars: vec![0.25; 4],
            },
            RoundRecord {
                round: 4,
                seeds: vec![11, 12],
                scalars: vec![-1.5; 4],
            },
        ])),
    ];
    let handlers = vec![scalar_fl_client_target(), dome_client_target(&broadcast)];
    vec![
        message::<CatchUp>("scalar_fl/catch-up", bytes(&catch_up)),
        message::<RoundPlan>("scalar_fl/round-plan", vec![plan.to_bytes()]),
        message::<Reply>("scalar_fl/reply", vec![reply.to_bytes()]),
        message::<RoundBroadcast>("dome/round-broadcast", vec![broadcast.to_bytes()]),
        message::<BasisChunk>("dome/basis-chunk", vec![chunk.to_bytes()]),
    ]
    .into_iter()
    .chain(handlers)
    .collect()
}

/// A scalar-only FL client (fresh for each input) handling a hostile catch-up, then training
/// the round's plan on a quadratic loss.
fn scalar_fl_client_target() -> Target {
    use privopt_ml::zo::Difference;
    use privopt_protocols::scalar_fl::{Client, ModelState, Probe, ReplaySpec, Rule};
    let spec = ReplaySpec {
        lr: 0.1,
        local_steps: 2,
        perturbations: 2,
        weight_decay: 0.0,
        rule: Rule::Hiso { nu: 0.1, eps: 1e-6 },
    };
    let initial = ModelState::initial(vec![0.5; 6], spec.rule);
    let record = |round| RoundRecord {
        round,
        seeds: vec![round + 1, round + 2],
        scalars: vec![0.25, -0.5, 1.0, 0.0],
    };
    let catch_ups = [
        Update::UpToDate { round: 0 },
        Update::Replay(vec![record(0), record(1)]),
        Update::Full(initial.clone()),
    ]
    .map(|update| CatchUp {
        session: 0x5eed,
        client: 0,
        ticket: [7; 16],
        dim: initial.x.len(),
        update,
    });
    let probe = Probe {
        mu: 1e-3,
        difference: Difference::TwoPoint,
    };
    framed(
        "scalar_fl/client-catch-up-handler",
        bytes(&catch_ups),
        move |b| {
            let Ok(msg) = CatchUp::from_bytes(b) else {
                return;
            };
            let mut client = Client::new(0, initial.clone());
            if client.receive(msg, &spec).is_ok() {
                let plan = RoundPlan {
                    session: 0x5eed,
                    round: client.state().round,
                    seeds: vec![3, 4],
                    clients: vec![0, 2],
                };
                let loss = |_: usize, x: &[f64]| x.iter().map(|v| v * v).sum::<f64>();
                drop(client.local_update(&plan, &spec, probe, &loss));
            }
        },
    )
}

/// A DOME client releasing its gradient under a hostile round broadcast.
fn dome_client_target(broadcast: &RoundBroadcast) -> Target {
    use privopt_protocols::dome::{Basis, quantizer, release};
    let rng = std::cell::RefCell::new(secret_rng(Some(11)));
    framed(
        "dome/client-release-handler",
        vec![broadcast.to_bytes()],
        move |b| {
            let Ok(round) = RoundBroadcast::from_bytes(b) else {
                return;
            };
            let d = round.m_hat.len();
            let mut grad = vec![0.5; d];
            if let Ok(out) = release(
                &mut grad,
                &round,
                Basis::Identity { d },
                &mut *rng.borrow_mut(),
            ) && let Ok(q) = quantizer(&round)
            {
                drop(q.encode(&out.vector));
            }
        },
    )
}

/// Data files and configs: IDX, CSV (parse, then fit the encoder), the experiment TOML.
fn file_targets() -> Vec<Target> {
    use privopt_data::idx::parse_idx;
    use privopt_data::tabular::{Column, CsvOptions, RawTable, TabularEncoder, TabularSchema};
    let mut idx = vec![0u8, 0, 8, 3];
    for d in [3u32, 4, 4] {
        idx.extend_from_slice(&d.to_be_bytes());
    }
    idx.extend((0..48).map(|i| i as u8));
    let csv = "age,job,hours,income\n39,clerk,40,<=50K\n50,manager,13,>50K\n38,?,40,<=50K\n";
    let schema = TabularSchema {
        features: vec![
            Column::Numeric("age".into()),
            Column::Categorical("job".into()),
            Column::Numeric("hours".into()),
        ],
        label: "income".into(),
        positive: vec![">50K".into()],
    };
    let configs = [
        include_str!("../../../configs/quickstart/sgd.toml"),
        include_str!("../../../configs/quickstart/pdsgd.toml"),
        include_str!("../../../configs/quickstart/dome.toml"),
        include_str!("../../../configs/quickstart/eezofl.toml"),
    ];
    vec![
        target("ml/idx", vec![idx], |b| {
            drop(parse_idx(b, Path::new("fuzz")))
        }),
        target("ml/csv", vec![csv.as_bytes().to_vec()], move |b| {
            let text = String::from_utf8_lossy(b);
            if let Ok(t) = RawTable::parse_csv(&text, &CsvOptions::default(), Path::new("fuzz")) {
                drop(TabularEncoder::fit(&schema, &t).and_then(|enc| enc.transform(&t)));
            }
        }),
        target(
            "config/toml",
            configs.iter().map(|c| c.as_bytes().to_vec()).collect(),
            |b| {
                let text = String::from_utf8_lossy(b);
                drop(privopt_experiments::config::ExperimentConfig::from_toml(
                    &text, "fuzz",
                ));
            },
        ),
    ]
}
