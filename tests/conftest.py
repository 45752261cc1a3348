"""Suite-wide fixtures. Feature fixtures live next to their tests or in tests/support/."""

from __future__ import annotations

import pytest
from hypothesis import settings

# Hypothesis keeps no example database in the working tree.
settings.register_profile("repo", database=None)
settings.load_profile("repo")


@pytest.fixture(autouse=True)
def _private_usr_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Keep every in-process test's user data out of the working tree."""
    usr = tmp_path_factory.mktemp("usr")
    monkeypatch.setenv("A0_USR_DIR", str(usr))
    return usr
