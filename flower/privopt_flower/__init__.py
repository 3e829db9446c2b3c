"""privopt on Flower: the ServerApp and ClientApp that run privopt's protocol roles across
processes and machines, with privopt's messages carried as bytes in Flower messages.

The method logic lives in :mod:`privopt_flower.methods` and talks to a
:class:`~privopt_flower.transport.Federation`: Flower's Grid in deployment and simulation, or an
in-process loopback (:mod:`privopt_flower.inprocess`) that runs the very same client code
without Flower, for tests and for the in-process reference time.
"""
