"""Secret masking: the Masker, collect_secrets, and no secret on disk."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durability import CheckpointData, Journal, Masker, collect_secrets
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

SECRET = "sk-PLANTED-7f3a9c2e1b"


def test_mask_replaces_values_recursively():
    masker = Masker({"OPENAI_API_KEY": SECRET, "DB_PASSWORD": "hunter22"})
    value = {
        "cmd": f"curl -H 'Authorization: Bearer {SECRET}'",
        "nested": [{"pw": "hunter22"}, ("tuple", "x hunter22 y"), 3, None, True],
        SECRET: "key is a secret too",
    }
    masked = masker.mask(value)
    assert masked == {
        "cmd": "curl -H 'Authorization: Bearer §§secret(OPENAI_API_KEY)'",
        "nested": [
            {"pw": "§§secret(DB_PASSWORD)"},
            ["tuple", "x §§secret(DB_PASSWORD) y"],
            3,
            None,
            True,
        ],
        "§§secret(OPENAI_API_KEY)": "key is a secret too",
    }
    assert value["cmd"].endswith(f"{SECRET}'")  # the input is not modified


def test_longest_value_wins():
    masker = Masker({"SHORT": "abcd", "LONG": "abcdefgh"})
    assert masker.mask("xx abcdefgh abcd") == "xx §§secret(LONG) §§secret(SHORT)"


def test_short_values_are_ignored():
    masker = Masker({"PIN": "123", "EMPTY": ""})
    assert masker.mask("pin 123") == "pin 123"
    assert masker.names == []


def test_repr_never_shows_values():
    masker = Masker({"OPENAI_API_KEY": SECRET})
    assert SECRET not in repr(masker)
    assert "OPENAI_API_KEY" in repr(masker)


@settings(max_examples=200, deadline=None)
@given(
    secrets=st.dictionaries(
        st.text("ABCDEFGHIJ_", min_size=1, max_size=8),
        st.text("0123456789", min_size=4, max_size=10),
        max_size=5,
    ),
    text=st.text("0123456789abc ", max_size=80),
)
def test_no_secret_survives_masking(secrets, text):
    masked = Masker(secrets).mask(text + "".join(secrets.values()) + text)
    for value in secrets.values():
        assert value not in masked


def test_collect_secrets_from_environ_env_and_secrets_files(tmp_path):
    env = tmp_path / ".env"
    env.write_text(
        "API_KEY_OPENAI=sk-from-dotenv\nCHAT_MODEL_NAME=gpt-x\nAUTH_PASSWORD=letmein\n"
        "GITHUB_TOKEN=ghp_abc123\nMY_SECRET=s3cr3t-val\nWEB_UI_PORT=5000\n"
    )
    secrets_env = tmp_path / "secrets.env"
    secrets_env.write_text('BANK_PIN="98765"\nANYTHING=plain-value\n')
    environ = {
        "ANTHROPIC_API_KEY": "sk-ant-123456",
        "HF_API_TOKEN": "hf_abcdef",
        "SMTP_PASSWORD": "mailpass",
        "PATH": "/usr/bin",
        "HOME": "/root",
        "API_KEY_OPENAI": "sk-from-environ",
    }
    found = collect_secrets(environ, [env, tmp_path / "missing.env"], [secrets_env])
    assert found == {
        "API_KEY_OPENAI": "sk-from-environ",
        "AUTH_PASSWORD": "letmein",
        "GITHUB_TOKEN": "ghp_abc123",
        "MY_SECRET": "s3cr3t-val",
        "BANK_PIN": "98765",
        "ANYTHING": "plain-value",
        "ANTHROPIC_API_KEY": "sk-ant-123456",
        "HF_API_TOKEN": "hf_abcdef",
        "SMTP_PASSWORD": "mailpass",
    }


def _raw_bytes(path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm"):
        candidate = path.with_name(path.name + suffix)
        if candidate.exists():
            data += candidate.read_bytes()
    return data


def test_a_planted_secret_never_reaches_the_database_files(tmp_path):
    path = tmp_path / "durability" / "journal.sqlite"
    masker = Masker({"OPENAI_API_KEY": SECRET})
    journal = Journal.open_sqlite(path, masker=masker)
    s = f"token={SECRET}"
    run = journal.admit("chat", "in-1", sha(s), message={"text": s}).run
    journal.admit_intervention("chat", "in-2", sha("2"), message=s)
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="tool", name="code", args={"code": s, s: s}, policy="hold"
    )
    journal.commit_result(
        call.id,
        {"output": s},
        checkpoint=CheckpointData(state={"k": s}, histories={"0": [s, {"c": s}]}),
    )
    journal.write_checkpoint(run.id, CheckpointData(state={"k": s}, histories={"0": [s, s * 2]}))
    journal.replace_document(
        "chat",
        "plan",
        {"title": s, "items": [{"id": "a", "text": s}]},
        expected_revision=0,
        actor="agent",
    )
    try:
        journal.replace_document(
            "chat", "plan", {"title": s * 2, "items": []}, expected_revision=0, actor="ui"
        )
    except Exception as exc:
        assert SECRET not in str(exc.to_dict())
    journal.append_event("chat", "log", {"heading": s}, run_id=run.id)
    journal.put_blob(s.encode())
    call2 = journal.record_intent(
        run.id, agent_no=0, seq=2, kind="model", name="chat", args={"messages": [s]}, policy="hold"
    )
    held = journal.mark_needs_attention(run.id, "open_intent", {"hint": s})
    journal.decide(
        DecisionRequest(
            run.id,
            "confirmed_completed",
            version=held.version,
            actor="alice",
            note=f"verified with {SECRET}",
        ),
    )
    assert journal.get_call(call2.id).result["note"] == "verified with §§secret(OPENAI_API_KEY)"

    # everything readable back is masked, and the files hold no trace of the value
    assert SECRET not in repr(journal.read_run(run.id))
    assert SECRET not in repr(journal.latest_checkpoint(run.id))
    assert SECRET.encode() not in _raw_bytes(path)
    journal.close()
    assert SECRET.encode() not in _raw_bytes(path)
    assert b"OPENAI_API_KEY" in _raw_bytes(path)  # the placeholder is there


def test_mask_stream_holds_back_what_may_be_the_start_of_a_secret():
    masker = Masker({"KEY": SECRET})
    assert masker.mask_stream("token sk-PLAN") == "token "
    assert masker.mask_stream("token s") == "token "
    assert masker.mask_stream(f"token {SECRET}") == "token §§secret(KEY)"
    assert masker.mask_stream(f"token {SECRET} and sk-X") == "token §§secret(KEY) and sk-X"
    assert Masker({}).mask_stream("sk-PLAN") == "sk-PLAN"


def test_same_secrets_compares_names_and_values():
    assert Masker({"A": SECRET}).same_secrets(Masker({"A": SECRET}))
    assert not Masker({"A": SECRET}).same_secrets(Masker({"B": SECRET}))
    assert not Masker({"A": SECRET}).same_secrets(Masker({}))


def test_env_files_are_read_literally(tmp_path, monkeypatch):
    """A ``${VAR}`` in usr/.env or secrets.env is text, never another variable's value
    (issue #17, point 10)."""
    from durability.masking import read_env_file

    monkeypatch.setenv("AUTH_PASSWORD", "login-pw-0a1b2c")
    env = tmp_path / ".env"
    env.write_text("API_KEY_X='${AUTH_PASSWORD}'\nOTHER=${API_KEY_X}\n", encoding="utf-8")
    secrets_env = tmp_path / "secrets.env"
    secrets_env.write_text("MY_TOKEN=pre-${AUTH_PASSWORD}\n", encoding="utf-8")
    assert read_env_file(env) == {"API_KEY_X": "${AUTH_PASSWORD}", "OTHER": "${API_KEY_X}"}
    found = collect_secrets({}, env_files=[env], secrets_files=[secrets_env])
    assert found == {"API_KEY_X": "${AUTH_PASSWORD}", "MY_TOKEN": "pre-${AUTH_PASSWORD}"}
    assert read_env_file(tmp_path / "missing.env") == {}


def test_masking_masked_text_changes_nothing():
    """Entry masking and the journal's both mask the same text: a value that occurs inside a
    placeholder ("cret") must not break the placeholder on the second pass."""
    masker = Masker({"KEY": SECRET, "WORD": "cret"})
    once = masker.mask(f"{SECRET} and cret")
    assert once == "§§secret(KEY) and §§secret(WORD)"
    assert masker.mask(once) == once
    assert masker.mask_stream(once) == once
