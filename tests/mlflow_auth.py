"""MLflow's basic-auth app as a platform team runs it: the admin, and accounts with MLflow's
default READ permission that an admin grants more (its REST API, as its UI does)."""

from __future__ import annotations

import uuid

import requests

from demo.mlflow_server import MlflowServer

# An unencoded `@` in it, as users write them in MLFLOW_TRACKING_URI (MLflow takes it).
ADMIN_PASSWORD = "Pl4nted@Secret-9"


def create_user(server: MlflowServer, password: str = "R3ader-passw0rd") -> tuple[str, str]:
    """A new account with the default (READ) permission: (its URI, its name)."""
    name = f"reader-{uuid.uuid4().hex[:8]}"
    _admin(server, "/api/2.0/mlflow/users/create", {"username": name, "password": password})
    return server.uri_as(name, password), name


def grant(server: MlflowServer, user: str, experiment_id: str, permission: str) -> None:
    _admin(
        server,
        "/api/3.0/mlflow/users/permissions/grant",
        {
            "username": user,
            "resource_type": "experiment",
            "resource_id": experiment_id,
            "permission": permission,
        },
    )


def _admin(server: MlflowServer, path: str, body: dict[str, str]) -> None:
    answer = requests.post(
        f"{server.uri}{path}", json=body, auth=("admin", ADMIN_PASSWORD), timeout=30
    )
    answer.raise_for_status()
