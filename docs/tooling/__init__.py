"""Pages of the documentation site generated at build time (`mkdocs.yml`'s hook).

`results` renders `bench/results/*.json` into the measured-results pages and `rest` the
control plane's OpenAPI schema into the REST reference, so neither is typed by hand.
"""
