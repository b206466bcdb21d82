"""Shared test configuration. Fixtures for databases and MLflow live beside the tests that
need them; this file keeps only what every test relies on."""
