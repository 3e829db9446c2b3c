//! An in-process driver that runs one round with every client and the server in this process,
//! with dropouts at chosen stages. Tests, benchmarks and simulated federated training use it;
//! a deployment drives the same state machines over a transport instead.

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::messages::{Context, Stage};
use crate::{Aggregate, Client, ClientConfig, ClientId, Graph, SecAggError, Server, ServerConfig};

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
    /// Bytes the server sent to all clients (the relayed keys, the routed shares and the
    /// unmask requests).
    pub clients_download_bytes: u64,
}

fn stays(dropouts: &Dropouts, c: ClientId, stage: Stage) -> bool {
    dropouts
        .get(c as usize)
        .copied()
        .flatten()
        .is_none_or(|s| s > stage)
}

/// A server message addressed to one client.
trait Addressed {
    fn recipient(&self) -> ClientId;
}

macro_rules! addressed {
    ($($t:ty),*) => {$(
        impl Addressed for $t {
            fn recipient(&self) -> ClientId {
                self.recipient
            }
        }
    )*};
}
addressed!(
    crate::NeighbourKeys,
    crate::IncomingShares,
    crate::UnmaskRequest
);

/// The message for `client` among `messages`.
fn message_for<M: Addressed>(messages: &[M], client: ClientId) -> Result<&M, SecAggError> {
    messages
        .iter()
        .find(|m| m.recipient() == client)
        .ok_or_else(|| SecAggError::UnexpectedClient {
            client,
            reason: "the server sent this client nothing".into(),
        })
}

/// Runs `f` and adds its wall time to `acc`.
fn timed<T>(
    acc: &mut Duration,
    f: impl FnOnce() -> Result<T, SecAggError>,
) -> Result<T, SecAggError> {
    let start = Instant::now();
    let r = f();
    *acc += start.elapsed();
    r
}

/// A client with its randomness and the time it has spent.
type Running = (Client, ChaCha20Rng, Duration);

/// Runs one client step for every client in parallel, timing each client.
fn client_step<R: Send>(
    clients: &mut [Running],
    step: impl Fn(&mut Client, &mut ChaCha20Rng) -> Result<R, SecAggError> + Sync,
) -> Vec<Result<R, SecAggError>> {
    clients
        .par_iter_mut()
        .map(|(client, rng, spent)| timed(spent, || step(client, rng)))
        .collect()
}

/// Runs one round over `graph` with `inputs[c]` for client `c` (clients may share one slice).
/// Client randomness is drawn from ChaCha20 seeded by `seed` and the client id (simulation
/// only: a deployment draws client secrets from the OS).
pub fn run_round(
    context: Context,
    graph: &Graph,
    threshold: usize,
    inputs: &[&[u32]],
    dropouts: &Dropouts,
    seed: u64,
) -> Result<(Aggregate, RoundTimings), SecAggError> {
    let n = graph.len();
    if inputs.len() != n {
        return Err(SecAggError::Parameters(format!(
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

    // Stage 1.
    let mut clients: Vec<Running> = Vec::with_capacity(n);
    let started: Vec<Result<(Running, crate::AdvertiseKeys), SecAggError>> = (0..n as ClientId)
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
    for s in started {
        let (client, advert) = s?;
        timings.clients_upload_bytes += advert.wire_bytes() as u64;
        timed(&mut timings.server, || server.receive_keys(advert))?;
        clients.push(client);
    }
    let relayed = timed(&mut timings.server, || server.finish_advertising())?;
    timings.clients_download_bytes += relayed.iter().map(|m| m.wire_bytes() as u64).sum::<u64>();

    // Stage 2.
    clients.retain(|(c, _, _)| stays(dropouts, c.id(), Stage::ShareKeys));
    let replies = client_step(&mut clients, |client, rng| {
        client.share_keys(message_for(&relayed, client.id())?, rng)
    });
    for reply in replies {
        let reply = reply?;
        timings.clients_upload_bytes += reply.wire_bytes() as u64;
        timed(&mut timings.server, || server.receive_shares(reply))?;
    }
    let routed = timed(&mut timings.server, || server.finish_sharing())?;
    timings.clients_download_bytes += routed.iter().map(|m| m.wire_bytes() as u64).sum::<u64>();

    // Stage 3: each masked input goes to the server as soon as it is made, so at most one
    // vector per thread is alive at a time.
    clients.retain(|(c, _, _)| stays(dropouts, c.id(), Stage::MaskedInput));
    let server_lock = std::sync::Mutex::new((&mut server, Duration::ZERO, 0u64));
    // The client's time excludes the server's receipt (and waiting for the lock).
    let sent: Vec<Result<(), SecAggError>> = clients
        .par_iter_mut()
        .map(|(client, _, spent)| {
            let masked = timed(spent, || {
                client.mask_input(
                    message_for(&routed, client.id())?,
                    inputs[client.id() as usize],
                )
            })?;
            let mut guard = server_lock.lock().map_err(|_| SecAggError::Aborted)?;
            let (server, time, bytes) = &mut *guard;
            *bytes += masked.wire_bytes() as u64;
            timed(time, || server.receive_masked(&masked))
        })
        .collect();
    sent.into_iter().collect::<Result<Vec<()>, SecAggError>>()?;
    let (_, receive_time, masked_bytes) =
        server_lock.into_inner().map_err(|_| SecAggError::Aborted)?;
    timings.server += receive_time;
    timings.clients_upload_bytes += masked_bytes;
    let requests = timed(&mut timings.server, || server.finish_masking())?;
    timings.clients_download_bytes += requests.iter().map(|m| m.wire_bytes() as u64).sum::<u64>();

    // Stage 4.
    clients.retain(|(c, _, _)| stays(dropouts, c.id(), Stage::Unmask));
    let replies = client_step(&mut clients, |client, _| {
        client.unmask(message_for(&requests, client.id())?)
    });
    for reply in replies {
        let reply = reply?;
        timings.clients_upload_bytes += reply.wire_bytes() as u64;
        timed(&mut timings.server, || server.receive_unmask(reply))?;
    }
    let aggregate = timed(&mut timings.server, || server.finish())?;
    timings.clients_total = clients.iter().map(|(_, _, spent)| *spent).sum();
    Ok((aggregate, timings))
}
