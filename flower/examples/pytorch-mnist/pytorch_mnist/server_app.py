"""The ServerApp: privopt's server of the run's method, evaluating `Net` on the test set."""

from privopt_flower import server_app

from .task import Net, load_test

app = server_app(model_fn=Net, test_fn=load_test)
