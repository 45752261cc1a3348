"""Shared-mode settings from the environment: defaults, refusals, and no secret in sight."""

from __future__ import annotations

import logging
import pickle
import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from durability import ConfigurationError
from durability.config import (
    DSN,
    HEARTBEAT_SECONDS,
    LEASE_SECONDS,
    NAMESPACE,
    RESOURCE_KEY,
    RESOURCE_MAX_BYTES,
    WORKER_ID,
    Secret,
    shared_config,
)
from durability.crypto import generate_key
from durability.dsn import PostgresDsn

pytestmark = pytest.mark.unit

PASSWORD = "s3cr3t-Pa55word"
KEY = generate_key()


def env(**extra: str) -> dict[str, str]:
    base = {
        DSN: f"postgresql://agent:{PASSWORD}@db.internal:5432/agents",
        RESOURCE_KEY: KEY,
    }
    base.update(extra)
    return base


def test_no_dsn_means_single_process_mode():
    assert shared_config({}) is None
    assert shared_config({DSN: "   ", RESOURCE_KEY: KEY}) is None


def test_defaults():
    config = shared_config(env())
    assert config is not None
    assert config.namespace == "agent_zero"
    assert config.lease_seconds == 30.0
    assert config.heartbeat_seconds == 10.0
    assert config.resource_max_bytes == 64 * 1024 * 1024
    assert re.fullmatch(r".+-[0-9a-f]{8}", config.worker_id)
    assert shared_config(env()).worker_id != config.worker_id  # random suffix per process


def test_explicit_values():
    config = shared_config(
        env(
            **{
                NAMESPACE: "team_a",
                WORKER_ID: "host-1",
                LEASE_SECONDS: "12",
                HEARTBEAT_SECONDS: "3",
                RESOURCE_MAX_BYTES: "1000",
            }
        )
    )
    assert config is not None
    assert (config.namespace, config.worker_id) == ("team_a", "host-1")
    assert (config.lease_seconds, config.heartbeat_seconds) == (12.0, 3.0)
    assert config.resource_max_bytes == 1000


def test_shared_mode_without_a_resource_key_refuses_clearly():
    with pytest.raises(ConfigurationError) as info:
        shared_config({DSN: "host=db user=a password=x"})
    assert info.value.code == "invalid_configuration"
    assert info.value.setting == RESOURCE_KEY
    assert RESOURCE_KEY in info.value.message and "Fernet" in info.value.message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (RESOURCE_KEY, "not-a-key"),
        (RESOURCE_KEY, "a" * 44),
        (NAMESPACE, "Bad-Name"),
        (NAMESPACE, "pg_catalog"),
        (NAMESPACE, "x" * 64),
        (WORKER_ID, "has space"),
        (LEASE_SECONDS, "soon"),
        (LEASE_SECONDS, "0"),
        (HEARTBEAT_SECONDS, "20"),  # more than half of the default 30 s lease
        (RESOURCE_MAX_BYTES, "-1"),
    ],
)
def test_bad_values_are_refused_naming_the_variable(name, value):
    with pytest.raises(ConfigurationError) as info:
        shared_config(env(**{name: value}))
    assert info.value.setting == name
    assert PASSWORD not in str(info.value.to_dict())


def test_an_unparseable_dsn_is_refused_without_echoing_it():
    with pytest.raises(ConfigurationError) as info:
        shared_config(env(**{DSN: f"host=db password={PASSWORD} nonsense"}))
    assert info.value.setting == DSN
    assert PASSWORD not in str(info.value.to_dict())


def test_secrets_never_print(caplog):
    config = shared_config(env())
    assert config is not None
    text = repr(config) + str(config) + repr(config.dsn) + str(config.dsn)
    assert PASSWORD not in text and KEY not in text
    assert "agent:***@db.internal" in text
    assert config.dsn.conninfo.endswith("@db.internal:5432/agents")
    assert config.resource_key.reveal() == KEY
    logging.getLogger("test").warning("config %s %r", config, config)
    assert PASSWORD not in caplog.text and KEY not in caplog.text
    for secret in (config.dsn, config.resource_key):
        with pytest.raises(TypeError):
            pickle.dumps(secret)


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://agent:{PASSWORD}@h/db",
        f"postgres://agent:{PASSWORD.replace('-', '%2D')}@h:5432/db?sslmode=require",
        f"host=h user=agent password={PASSWORD} dbname=db",
        f"host=h password='{PASSWORD}' user=agent",
        f"host=h password = {PASSWORD}",
    ],
)
def test_every_dsn_form_is_masked(dsn):
    parsed = PostgresDsn(dsn)
    assert PASSWORD not in parsed.masked
    assert PASSWORD.replace("-", "%2D") not in parsed.masked
    assert parsed.mask(f"FATAL: password {PASSWORD} for {dsn}").count(PASSWORD) == 0


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=4))
def test_any_password_is_masked_in_any_message(password):
    assume(password not in "host=h user=u password=*** error near !")  # over-masking is fine
    quoted = password.replace("\\", "\\\\").replace("'", "\\'")
    dsn = PostgresDsn(f"host=h user=u password='{quoted}'")
    assert dsn.masked == "host=h user=u password=***"
    assert dsn.mask(f"error near {password}!") == "error near ***!"


def test_secret_wrapper():
    secret = Secret("value")
    assert "value" not in repr(secret) + str(secret)
    assert secret.reveal() == "value"
