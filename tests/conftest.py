"""Shared fixtures live in tests/support/ (services, scenario builders, harnesses)."""

pytest_plugins = ["tests.support.fixtures", "tests.support.cli", "tests.support.embed_server"]
