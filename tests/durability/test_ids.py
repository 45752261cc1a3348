"""Record ids: uuid4's form, random, and never repeated by a forked child."""

from __future__ import annotations

import os
import uuid

import pytest

from durability.ids import new_id

pytestmark = pytest.mark.unit


def test_an_id_is_a_version_4_uuid_in_hex():
    value = new_id()
    parsed = uuid.UUID(value)
    assert parsed.hex == value
    assert parsed.version == 4
    assert parsed.variant == uuid.RFC_4122


def test_ids_do_not_repeat_across_many_pools():
    ids = {new_id() for _ in range(5000)}  # ~20 reads of the kernel's random bytes
    assert len(ids) == 5000


def test_a_forked_child_draws_its_own_ids():
    new_id()  # the parent holds a pool with unused bytes
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        os.write(write, "".join(new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pipe.read().decode()
    os.waitpid(pid, 0)
    parent = "".join(new_id() for _ in range(3))
    assert len(child) == 96
    assert child != parent
