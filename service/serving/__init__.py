"""The serving application (Ray Serve): `deployment.py` the replica and its FastAPI
ingress, `api.py` request and response bodies, `limits.py` what one request may cost and
fair turns between owners, `deploy.py` building and deploying it, `loopback.py` keeping
a local replica off the network."""
