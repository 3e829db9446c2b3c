"""The two sides of a run, whatever carries the messages: the server's driver and the
client's dispatcher."""

from __future__ import annotations

from .config import ConfigError, Settings
from .methods import MODULES
from .node import Node, State
from .results import Report, RunResult
from .transport import Federation, Payload


def serve(fed: Federation, s: Settings, report: Report) -> RunResult:
    """Runs the method to the end and returns its result (also written to the out-dir)."""
    # First contact installs the app on each SuperNode: allow the join timeout, not a stage's.
    joined = fed.refresh({"method": s.method}, s.join_timeout)
    if not joined:
        # Say why: a client that refused (e.g. a federation of another size) names its cause.
        causes = sorted(fed.refusals().values())
        why = f"; {len(causes)} refused, e.g. {causes[0]}" if causes else ""
        raise RuntimeError(f"no client joined within join-timeout = {s.join_timeout:g} s{why}")
    if len(joined) < s.clients:
        report.event(f"{len(joined)} of {s.clients} clients joined: {sorted(joined)}")
    return report.finish(MODULES[s.method].serve(fed, s, report))


def client_handle(request: Payload, state: State, node: Node, s: Settings) -> Payload:
    """A client's reply to one server request."""
    if node.parties != s.clients:
        raise ConfigError(
            f"node config num-partitions = {node.parties} but the run has clients = {s.clients} "
            f"(run with --run-config clients={node.parties}, or give the federation "
            f"{s.clients} SuperNodes)"
        )
    if not 0 <= node.party < node.parties:
        raise ConfigError(f"partition-id {node.party} is not below num-partitions {node.parties}")
    stage = request.get("stage")
    module = MODULES[s.method]
    if stage == "hello":
        return {"party": node.party, **module.hello(state, node, s)}
    if request.get("party") != node.party:
        raise ValueError(f"a request for party {request.get('party')} reached party {node.party}")
    reply: Payload = module.handle(str(stage), request, state, node, s)
    return reply
