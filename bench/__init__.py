"""Benchmarks and their kept results: scripts run from the checkout as `python -m bench.<name>`.

bench may import the product (jobs, service) and tests/support; the product never imports
bench (.importlinter). Each script writes its figures to bench/results/.
"""
