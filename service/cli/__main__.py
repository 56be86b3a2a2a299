"""`python -m service.cli`: what the `numtune` console script runs (the API process too)."""

from service.cli.main import main

main()
