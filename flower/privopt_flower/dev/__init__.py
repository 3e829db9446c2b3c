"""Tools for trying the app on one machine (not part of a deployment): :mod:`.localhost`
starts a SuperLink and SuperNodes as local processes and runs the app on them."""
