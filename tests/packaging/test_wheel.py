"""What a user gets from `pip install reckon` (not editable): the wheel is built from a copy
of the source, installed with its dependencies into a fresh virtual environment (no system
site packages; pip uses the machine's package index and its own cache), and its `reckon`
runs in an empty directory with nothing of this checkout on the path.

The first install downloads the dependencies (about 350 MB installed); later runs install
from pip's cache in about half a minute."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the build reads: the package and the metadata that names it.
SOURCE_ITEMS = ("service", "migrations", "pyproject.toml", "README.md")
BUILD_SECONDS = 300
INSTALL_SECONDS = 900
COMMAND_SECONDS = 120
ESTIMATE = (
    "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb", "--gpus", "8",
    "--precision", "bf16", "--recompute", "full", "--utilization", "0.4",
)  # fmt: skip


def run(
    command: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout
    )


def checked(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (
        f"{' '.join(done.args)} exited {done.returncode}:\n{done.stdout[-2000:]}"
        f"\n{done.stderr[-4000:]}"
    )
    return done.stdout


@dataclass(frozen=True)
class Installed:
    """A fresh virtual environment holding the built wheel, and the environment variables
    that run its console script as a user would (none of this checkout's settings)."""

    wheel: Path
    bin: Path
    env: Mapping[str, str]
    build_output: str = ""  # what `pip wheel` printed while building it

    def reckon(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return run(
            [str(self.bin / "reckon"), *args], cwd=cwd, env=self.env, timeout=COMMAND_SECONDS
        )


def user_environment(bin_dir: Path) -> dict[str, str]:
    """The caller's environment less what points at this checkout or its settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSAFEPATH")
        and not key.startswith(("RECKON_", "MLFLOW_"))
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONNOUSERSITE"] = "1"  # nothing from ~/.local either
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Built and installed once for this module; removed afterwards (the environment is a few
    hundred MB)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for item in SOURCE_ITEMS:
        origin = ROOT / item
        if origin.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(origin, source / item, ignore=ignore)
        else:
            shutil.copy2(origin, source / item)
    dist = work / "dist"
    build_env = user_environment(Path(sys.executable).parent)
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        cwd=work,
        env=build_env,
        timeout=BUILD_SECONDS,
    )
    checked(built)
    (wheel,) = dist.glob("reckon-*.whl")
    environment = work / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(environment)
    bin_dir = environment / "bin"
    env = user_environment(bin_dir)
    checked(
        run(
            # no byte-compiling of ~350 MB of dependencies: only what runs gets compiled
            [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-compile", str(wheel)],
            cwd=work,
            env=env,
            timeout=INSTALL_SECONDS,
        )
    )
    yield Installed(wheel, bin_dir, env, built.stdout + built.stderr)
    shutil.rmtree(work, ignore_errors=True)


def test_building_the_wheel_raises_no_license_deprecation(installed: Installed) -> None:
    """setuptools >= 77 deprecates `project.license` as a table (it printed a 20-line warning
    on every install); the SPDX string is what it asks for."""
    assert "project.license" not in installed.build_output


def test_the_installed_package_is_the_wheel_not_this_checkout(
    installed: Installed, tmp_path: Path
) -> None:
    probe = "import service; print(service.__file__)"
    out = checked(
        run(
            [str(installed.bin / "python"), "-c", probe],
            cwd=tmp_path,
            env=installed.env,
            timeout=COMMAND_SECONDS,
        )
    )

    location = Path(out.splitlines()[0]).resolve()
    assert location.is_relative_to(installed.bin.parent.resolve())
    assert not location.is_relative_to(ROOT)


def test_the_wheel_carries_the_migrations_inside_the_package_only(installed: Installed) -> None:
    import zipfile

    names = zipfile.ZipFile(installed.wheel).namelist()

    assert "service/migrations/env.py" in names
    assert "service/migrations/script.py.mako" in names
    assert any(n.startswith("service/migrations/versions/") for n in names)
    assert not [n for n in names if n.startswith("migrations/")]


def test_a_wheel_install_migrates_saves_and_reads_in_an_empty_directory(
    installed: Installed, tmp_path: Path
) -> None:
    upgraded = installed.reckon("db", "upgrade", cwd=tmp_path)
    saved = installed.reckon("estimate", *ESTIMATE, "--save", "--json", cwd=tmp_path)
    history = installed.reckon("history", "--json", cwd=tmp_path)
    shown = installed.reckon("estimates", "show", json.loads(checked(saved))["id"], cwd=tmp_path)

    assert "is at revision" in checked(upgraded)
    assert (tmp_path / "reckon.db").is_file()
    listed = json.loads(checked(history))
    assert listed["history"] == [] and listed["total"] == 0
    assert "649 days" in checked(shown)


def test_a_wheel_install_creates_its_database_on_the_first_save(
    installed: Installed, tmp_path: Path
) -> None:
    saved = installed.reckon("estimate", *ESTIMATE, "--save", "--json", cwd=tmp_path)

    estimate = json.loads(checked(saved))
    assert estimate["id"]
    assert (tmp_path / "reckon.db").is_file()
    assert checked(installed.reckon("db", "current", cwd=tmp_path)).rstrip().endswith("up to date")


def test_looking_at_the_schema_of_a_missing_database_creates_nothing(
    installed: Installed, tmp_path: Path
) -> None:
    shown = installed.reckon("db", "current", "--json", cwd=tmp_path)

    # No database is not the newest schema: exit 1, with the status on stdout.
    assert shown.returncode == 1, shown.stderr
    assert json.loads(shown.stdout)["current"] is None
    assert list(tmp_path.iterdir()) == []


def test_a_read_in_an_empty_directory_says_there_is_no_database_yet(
    installed: Installed, tmp_path: Path
) -> None:
    done = installed.reckon("history", cwd=tmp_path)

    assert done.returncode == 3 and done.stdout == ""
    assert "no database yet" in done.stderr and done.stderr.strip().count("\n") == 0
    assert list(tmp_path.iterdir()) == []
