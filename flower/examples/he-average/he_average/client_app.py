"""The ClientApp: a Message-API train function behind privopt's encrypted-averaging mod. The
update never leaves the node in the clear: the mod encrypts it under the round's collective
key."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from privopt_flower.he import he_mod

from .task import update

app = ClientApp(mods=[he_mod])


@app.train()
def train(msg: Message, context: Context) -> Message:
    partition = int(context.node_config["partition-id"])
    length = int(context.run_config["values"])
    rnd = int(msg.metadata.group_id or 0)
    x = update(int(context.run_config["seed"]), partition, rnd, length,
               float(context.run_config["clip"]))  # fmt: skip
    metrics = MetricRecord({"num-examples": 1, "partition": partition})
    return Message(RecordDict({"arrays": ArrayRecord([x]), "metrics": metrics}), reply_to=msg)
