//! The SecAgg+ suite: whole rounds in simulation.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Context, Result};
use privopt_secagg::simulation::{Dropouts, run_round};
use privopt_secagg::{
    Context as SecAggContext, Graph, SessionId, Stage, ThreatModel, find_parameters,
};

use super::{Case, bench_weights};

/// One simulated SecAgg round per sample: `round` is its wall time with every client and the
/// server in this process (clients spread over the cores), `client` one client's mean compute,
/// `server` the server's compute.
fn secagg_case(name: String, graph: Graph, threshold: usize, d: usize, drop_rate: f64) -> Case {
    let n = graph.len();
    let input: Vec<u32> = bench_weights(d, 1.0)
        .iter()
        .map(|x| (x * 1e6) as i32 as u32)
        .collect();
    // A fixed set of clients drops before sending masked inputs (the server then rebuilds
    // their masking keys and removes their pairwise masks).
    let dropped = (n as f64 * drop_rate).round() as usize;
    let dropouts: Dropouts = (0..n)
        .map(|c| (c < dropped).then_some(Stage::MaskedInput))
        .collect();
    let mut round = 0u64;
    Case::self_timed(name, move || {
        round += 1;
        let inputs = vec![input.as_slice(); n];
        let context = SecAggContext {
            session: SessionId([1; 16]),
            round,
        };
        let start = Instant::now();
        let (aggregate, timings) = run_round(context, &graph, threshold, &inputs, &dropouts, round)
            .context("a benchmarked SecAgg round failed")?;
        let wall = start.elapsed();
        black_box(aggregate);
        let finishers = (n - dropped).max(1) as u32;
        Ok(vec![
            ("round", wall),
            ("client", timings.clients_total / finishers),
            ("server", timings.server),
        ])
    })
}

pub(super) fn secagg_suite() -> Result<Vec<Case>> {
    let threat = ThreatModel {
        dropout_rate: 0.1,
        corrupt_rate: 0.05,
    };
    let mut cases = Vec::new();
    for d in [100_000usize, 1_000_000] {
        // Complete graph (original SecAgg): every pair masks; threshold ⌊n/2⌋ + 1.
        for n in [10usize, 50, 100] {
            let graph = Graph::complete(n)?;
            cases.push(secagg_case(
                format!("secagg/n{n}/d{d}"),
                graph,
                n / 2 + 1,
                d,
                0.0,
            ));
        }
        // Flower's SecAgg+ comparison point: 50 clients, 11 neighbours.
        let graph = Graph::harary(50, 11, [2; 32])?;
        cases.push(secagg_case(format!("secagg/n50k11/d{d}"), graph, 6, d, 0.0));
        // Degree and threshold from the parameter finder.
        for n in [100usize, 1000] {
            let p = find_parameters(n, threat)?;
            let graph = Graph::harary(n, p.degree, [3; 32])?;
            let k = p.degree;
            cases.push(secagg_case(
                format!("secagg/n{n}k{k}/d{d}"),
                graph.clone(),
                p.threshold,
                d,
                0.0,
            ));
            if n == 1000 {
                cases.push(secagg_case(
                    format!("secagg/n{n}k{k}drop10/d{d}"),
                    graph,
                    p.threshold,
                    d,
                    0.1,
                ));
            }
        }
    }
    Ok(cases)
}
