"""The Flower ServerApp: reads the run config, waits for the clients, runs the method."""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from . import config, roles
from .results import Report
from .transport import FlowerFederation

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    run(grid, config.parse(context.run_config))


def run(grid: Grid, s: config.Settings) -> None:
    """Waits for the run's clients and runs its method to the end."""
    fed = FlowerFederation(grid, timing=bool(s.debug.get("stage-timing", False)))
    fed.wait_for(s.clients, s.join_timeout)
    roles.serve(fed, s, Report(s, mode="flower"))
