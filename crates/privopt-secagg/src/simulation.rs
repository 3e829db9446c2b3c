//! An in-process driver that runs one round with every client and the server in this process,
//! with dropouts at chosen stages. Tests, benchmarks and simulated federated training use it;
//! a deployment drives the same state machines over a transport instead.

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::messages::{Context, Stage};
use crate::{Aggregate, Client, ClientConfig, ClientId, Error, Graph, Server, ServerConfig};

/// Where each client stops answering: `None` = stays to the end, `Some(stage)` = sends nothing
/// from that stage on.
pub type Dropouts = Vec<Option<Stage>>;

/// Time spent by the parties of a simulated round.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoundTimings {
    /// Sum over clients of their own computation.
    pub clients_total: Duration,
    /// The server's computation.
    pub server: Duration,
    /// Bytes all clients sent to the server ([`crate::messages`] `wire_bytes`).
    pub clients_upload_bytes: u64,
}

fn stays(dropouts: &Dropouts, c: ClientId, stage: Stage) -> bool {
    dropouts
        .get(c as usize)
        .copied()
        .flatten()
        .is_none_or(|s| s > stage)
}

/// Runs one round over `graph` with `inputs[c]` for client `c` (clients may share one slice). Client randomness is drawn
/// from ChaCha20 seeded by `seed` and the client id (simulation only: a deployment draws
/// client secrets from the OS).
pub fn run_round(
    context: Context,
    graph: &Graph,
    threshold: usize,
    inputs: &[&[u32]],
    dropouts: &Dropouts,
    seed: u64,
) -> Result<(Aggregate, RoundTimings), Error> {
    let n = graph.len();
    if inputs.len() != n {
        return Err(Error::Parameters(format!(
            "{} inputs for {n} clients",
            inputs.len()
        )));
    }
    let vector_len = inputs.first().map_or(0, |v| v.len());
    let mut server = Server::new(ServerConfig {
        context,
        graph: graph.clone(),
        threshold,
        vector_len,
    })?;
    let mut timings = RoundTimings::default();
    let timed = |f: &mut dyn FnMut() -> Result<(), Error>, acc: &mut Duration| {
        let start = Instant::now();
        let r = f();
        *acc += start.elapsed();
        r
    };

    // Stage 1. Each client runs on its own thread of the pool; their times add up.
    type Started = (Client, ChaCha20Rng, Duration);
    let started: Vec<Result<(Started, crate::AdvertiseKeys), Error>> = (0..n as ClientId)
        .into_par_iter()
        .filter(|&c| stays(dropouts, c, Stage::AdvertiseKeys))
        .map(|c| {
            let start = Instant::now();
            let mut rng = ChaCha20Rng::seed_from_u64(seed ^ (u64::from(c) << 32));
            let config = ClientConfig {
                context,
                id: c,
                neighbours: graph.neighbours(c).to_vec(),
                threshold,
                vector_len,
            };
            let (client, advert) = Client::new(config, &mut rng)?;
            Ok(((client, rng, start.elapsed()), advert))
        })
        .collect();
    let mut clients: Vec<Started> = Vec::with_capacity(n);
    for s in started {
        let (client, advert) = s?;
        timings.clients_upload_bytes += advert.wire_bytes() as u64;
        timed(
            &mut || server.receive_keys(advert.clone()),
            &mut timings.server,
        )?;
        clients.push(client);
    }
    let mut relayed = Vec::new();
    timed(
        &mut || server.finish_advertising().map(|m| relayed = m),
        &mut timings.server,
    )?;

    // Stage 2.
    clients.retain(|(c, _, _)| stays(dropouts, c.id(), Stage::ShareKeys));
    let replies: Vec<Result<crate::ShareKeys, Error>> = clients
        .par_iter_mut()
        .map(|(client, rng, spent)| {
            let start = Instant::now();
            let msg = relayed
                .iter()
                .find(|m| m.recipient == client.id())
                .ok_or_else(|| Error::UnexpectedClient {
                    client: client.id(),
                    reason: "no keys relayed".into(),
                })?;
            let reply = client.share_keys(msg, rng);
            *spent += start.elapsed();
            reply
        })
        .collect();
    for reply in replies {
        let reply = reply?;
        timings.clients_upload_bytes += reply.wire_bytes() as u64;
        timed(
            &mut || server.receive_shares(reply.clone()),
            &mut timings.server,
        )?;
    }
    let mut routed = Vec::new();
    timed(
        &mut || server.finish_sharing().map(|m| routed = m),
        &mut timings.server,
    )?;

    // Stage 3: each masked input goes to the server as soon as it is made, so at most one
    // vector per thread is alive at a time.
    clients.retain(|(c, _, _)| stays(dropouts, c.id(), Stage::MaskedInput));
    let server_lock = std::sync::Mutex::new((&mut server, Duration::ZERO, 0u64));
    clients.par_iter_mut().try_for_each(|(client, _, spent)| {
        let start = Instant::now();
        let msg = routed
            .iter()
            .find(|m| m.recipient == client.id())
            .ok_or_else(|| Error::UnexpectedClient {
                client: client.id(),
                reason: "no shares routed".into(),
            })?;
        let masked = client.mask_input(msg, inputs[client.id() as usize])?;
        *spent += start.elapsed();
        let mut guard = server_lock.lock().map_err(|_| Error::Aborted)?;
        let start = Instant::now();
        guard.0.receive_masked(&masked)?;
        guard.1 += start.elapsed();
        guard.2 += masked.wire_bytes() as u64;
        Ok::<(), Error>(())
    })?;
    let (_, receive_time, masked_bytes) = server_lock.into_inner().map_err(|_| Error::Aborted)?;
    timings.server += receive_time;
    timings.clients_upload_bytes += masked_bytes;
    let mut requests = Vec::new();
    timed(
        &mut || server.finish_masking().map(|m| requests = m),
        &mut timings.server,
    )?;

    // Stage 4.
    clients.retain(|(c, _, _)| stays(dropouts, c.id(), Stage::Unmask));
    let replies: Vec<Result<crate::UnmaskShares, Error>> = clients
        .par_iter_mut()
        .map(|(client, _, spent)| {
            let start = Instant::now();
            let msg = requests
                .iter()
                .find(|m| m.recipient == client.id())
                .ok_or_else(|| Error::UnexpectedClient {
                    client: client.id(),
                    reason: "no unmask request".into(),
                })?;
            let reply = client.unmask(msg);
            *spent += start.elapsed();
            reply
        })
        .collect();
    for reply in replies {
        let reply = reply?;
        timings.clients_upload_bytes += reply.wire_bytes() as u64;
        timed(
            &mut || server.receive_unmask(reply.clone()),
            &mut timings.server,
        )?;
    }
    let mut aggregate = None;
    timed(
        &mut || server.finish().map(|a| aggregate = Some(a)),
        &mut timings.server,
    )?;
    timings.clients_total = clients.iter().map(|(_, _, spent)| *spent).sum();
    let aggregate = aggregate.ok_or(Error::Aborted)?;
    Ok((aggregate, timings))
}
