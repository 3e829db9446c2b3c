"""The ClientApp: privopt's client of the run's method, training `Net` on this client's data."""

from privopt_flower import client_app

from .task import Net, load_partition, load_test

app = client_app(model_fn=Net, data_fn=load_partition, test_fn=load_test)
