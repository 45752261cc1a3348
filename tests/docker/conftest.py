"""The container tests' session: one private engine, one base image, one project image.

They run in a pytest session of their own (scripts/test.sh), one process: the image is
built once for all of them. The shared profile's images (the project with the `postgres`
extra, and a PostgreSQL server) are built on first use and kept for the session too.
Without root, dockerd or debootstrap they skip, except under CI=true, where a missing
prerequisite fails.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker._agent import METRICS, DockerSetup, SharedImages
from tests.docker._engine import Engine, missing_prerequisites

IMAGE = "agent-zero-durable:test"
SHARED_IMAGE = "agent-zero-durable:postgres-test"
POSTGRES_IMAGE = "a0-test-postgres:15"
POSTGRES_CONTEXT = Path(__file__).parent / "postgres"


def _timed(timings: dict[str, float], name: str, fn, *args) -> None:
    start = time.monotonic()
    fn(*args)
    timings[name] = time.monotonic() - start
    METRICS[name] = f"{timings[name]:.1f} s"


@pytest.fixture(scope="session")
def docker_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerSetup]:
    missing = missing_prerequisites()
    if missing:
        message = "container tests need: " + "; ".join(missing) + " (bash scripts/test.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("dk", numbered=True)
    engine = Engine(root / "engine")
    setup = DockerSetup(engine, IMAGE)
    try:
        _timed(setup.timings, "dockerd start", engine.start)
        driver = engine.docker("info", "-f", "{{.Driver}}").stdout.strip()
        METRICS["storage"] = f"{driver} on {'tmpfs' if engine.on_tmpfs else 'disk'}"
        work = engine.root / "work"  # on the engine's tmpfs when it has one
        work.mkdir()
        _timed(setup.timings, "debootstrap + import", engine.import_base_image, work)
        _timed(setup.timings, "image build", engine.build_project_image, IMAGE, work)
        setup.image_bytes = int(engine.docker("image", "inspect", "-f", "{{.Size}}", IMAGE).stdout)
        METRICS["image size"] = f"{setup.image_bytes / 1e6:.0f} MB"
        yield setup
    finally:
        start = time.monotonic()
        engine.stop()
        laps = ", ".join(f"{k} {v:.1f} s" for k, v in engine.stop_timings.items())
        METRICS["clean-up"] = f"{time.monotonic() - start:.1f} s ({laps})"


@pytest.fixture(scope="session")
def shared_images(docker_setup: DockerSetup) -> SharedImages:
    engine = docker_setup.engine
    work = engine.root / "work"
    build_args = {"A0_EXTRAS": "postgres"}
    _timed(
        docker_setup.timings,
        "image build (postgres extra)",
        engine.build_project_image,
        SHARED_IMAGE,
        work,
        build_args,
    )
    worker_bytes = engine.image_bytes(SHARED_IMAGE)
    METRICS["image size (postgres extra)"] = f"{worker_bytes / 1e6:.0f} MB"
    _timed(
        docker_setup.timings,
        "postgres image build",
        engine.build_image,
        POSTGRES_IMAGE,
        POSTGRES_CONTEXT,
    )
    METRICS["postgres image size"] = f"{engine.image_bytes(POSTGRES_IMAGE) / 1e6:.0f} MB"
    return SharedImages(SHARED_IMAGE, POSTGRES_IMAGE, worker_bytes)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if METRICS:
        terminalreporter.section("docker")
        for name, value in METRICS.items():
            terminalreporter.write_line(f"{name}: {value}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and "tests/docker/" in report.nodeid:
        METRICS[f"{report.nodeid.split('::')[-1]}"] = f"{report.duration:.1f} s ({report.outcome})"
