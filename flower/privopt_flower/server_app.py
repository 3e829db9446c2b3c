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
    s = config.parse(context.run_config)
    fed = FlowerFederation(grid)
    fed.wait_for(s.clients, s.join_timeout)
    roles.serve(fed, s, Report(s, mode="flower"))
