"""The conformance suite runs, whole and unchanged, on every backend.

``backend`` here overrides tests/durability/conftest.py's (SQLite only, for the engine's
SQLite-specific tests): every conformance test runs once per entry of ALL_BACKENDS.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.durability.conftest import ALL_BACKENDS, Backend, make_backend


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request, tmp_path)
