"""The floor for bench_api: an empty FastAPI route served the same way (uvicorn)."""

from __future__ import annotations

from fastapi import FastAPI

app = FastAPI()


@app.get("/empty")
def empty() -> dict[str, str]:
    return {}
