"""The HTTP API (app.py: `create_app` and its error table)."""
