"""Helpers shared by test modules (servers the tests start themselves)."""
