"""Settings: defaults, settings.json, A0_SET_* overrides, keys in usr/.env."""

from __future__ import annotations

import json
import os
import stat

import pytest

from python.helpers import settings
from python.helpers.settings import SettingsError

pytestmark = pytest.mark.unit


def test_defaults_when_nothing_is_configured(tmp_path):
    assert settings.load(tmp_path, environ={}) == settings.DEFAULTS
    assert settings.DEFAULTS["code_exec_first_output_timeout"] == 30
    assert settings.DEFAULTS["retention_runs"] == 100


def test_contract_names_exist():
    for prefix in ("chat_model", "util_model"):
        for suffix in [
            "provider",
            "name",
            "api_base",
            "ctx_length",
            "ctx_history",
            "kwargs",
            "rl_requests",
            "rl_input",
            "rl_output",
        ]:
            if (prefix, suffix) == ("util_model", "ctx_history"):
                suffix = "ctx_input"  # upstream's name for the utility model's share
            assert f"{prefix}_{suffix}" in settings.DEFAULTS
    for name in ("agent_profile", "mcp_server_token", "code_exec_max_timeout", "retention_days"):
        assert name in settings.DEFAULTS


def test_env_values_are_defaults_and_settings_file_wins(tmp_path):
    """Upstream: A0_SET_<name> only sets the default; a value saved in settings.json wins."""
    (tmp_path / "settings.json").write_text(
        json.dumps({"chat_model_name": "from-file", "retention_days": 7, "unknown": 1})
    )
    env = {
        "A0_SET_retention_days": "9",
        "A0_SET_chat_model_name": "from-env",
        "A0_SET_CHAT_MODEL_CTX_HISTORY": "0.5",
        "A0_SET_chat_model_kwargs": '{"temperature": 0}',
        "A0_SET_not_a_setting": "x",
    }
    loaded = settings.load(tmp_path, environ=env)
    assert loaded["chat_model_name"] == "from-file"
    assert loaded["retention_days"] == 7
    assert loaded["chat_model_ctx_history"] == 0.5
    assert loaded["chat_model_kwargs"] == {"temperature": 0}
    assert "unknown" not in loaded and "not_a_setting" not in loaded


def test_env_defaults_are_read_from_usr_dotenv_too(tmp_path):
    (tmp_path / ".env").write_text(
        "A0_SET_chat_model_name=dotenv-model\nA0_SET_retention_runs=5\nA0_SET_util_model_name=u1\n"
    )
    loaded = settings.load(tmp_path, environ={"A0_SET_retention_runs": "6"})
    assert loaded["chat_model_name"] == "dotenv-model"
    assert loaded["util_model_name"] == "u1"
    assert loaded["retention_runs"] == 6  # the process environment wins over usr/.env
    (tmp_path / "settings.json").write_text(json.dumps({"chat_model_name": "saved"}))
    assert settings.load(tmp_path, environ={})["chat_model_name"] == "saved"


def test_web_ui_address_is_read_from_usr_dotenv(tmp_path, monkeypatch):
    from run_ui import parse_args

    monkeypatch.delenv("WEB_UI_PORT", raising=False)
    monkeypatch.delenv("WEB_UI_HOST", raising=False)
    (tmp_path / ".env").write_text("WEB_UI_PORT=6123\nWEB_UI_HOST=0.0.0.0\n")
    args, _ = parse_args([], usr=tmp_path)
    assert (args.host, args.port) == ("0.0.0.0", 6123)
    monkeypatch.setenv("WEB_UI_PORT", "6200")
    args, _ = parse_args([], usr=tmp_path)
    assert args.port == 6200  # the environment wins
    args, _ = parse_args(["--port", "7000"], usr=tmp_path)
    assert args.port == 7000  # and the flag wins over both


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("retention_days", "many"),
        ("retention_days", "1.5"),
        ("chat_model_ctx_history", "lots"),
        ("chat_model_ctx_history", "2"),
        ("chat_model_kwargs", "[1, 2]"),
        ("chat_model_kwargs", "{bad json"),
        ("code_exec_max_timeout", "0"),
        ("retention_runs", "-1"),
    ],
)
def test_invalid_env_value_is_ignored_with_a_warning(tmp_path, caplog, name, raw):
    """As upstream: a default that does not fit is ignored, and the log names it."""
    with caplog.at_level("WARNING", logger="a0.settings"):
        loaded = settings.load(tmp_path, environ={f"A0_SET_{name}": raw})
    assert loaded[name] == settings.DEFAULTS[name]
    assert f"A0_SET_{name}" in caplog.text and name in caplog.text


def test_invalid_saved_value_is_a_clear_error(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps({"retention_days": "soon"}))
    with pytest.raises(SettingsError) as info:
        settings.load(tmp_path, environ={})
    assert info.value.code == "invalid_setting"
    assert info.value.to_dict()["name"] == "retention_days"


def test_corrupt_settings_file_is_a_clear_error(tmp_path):
    (tmp_path / "settings.json").write_text("{not json")
    with pytest.raises(SettingsError, match=r"settings\.json") as info:
        settings.load(tmp_path, environ={})
    assert info.value.code == "invalid_setting"


def test_save_writes_settings_atomically_and_keys_to_env(tmp_path, monkeypatch):
    for name in list(os.environ):
        if "OPENAI" in name or "ANTHROPIC" in name:
            monkeypatch.delenv(name)
    saved = settings.save(
        {
            "chat_model_name": "m1",
            "retention_days": "12",
            "chat_model_ctx_length": 64000,
            "chat_model_ctx_history": 1,
            "api_key_openai": "sk-openai-secret",
            "api_keys": {"anthropic": "sk-ant-secret", "groq": ""},
            "mcp_server_token": "tok-secret-1",
        },
        tmp_path,
    )
    assert saved["chat_model_name"] == "m1"
    assert saved["retention_days"] == 12
    assert saved["chat_model_ctx_history"] == 1.0
    assert saved["mcp_server_token"] == "tok-secret-1"
    settings_text = (tmp_path / "settings.json").read_text()
    assert "secret" not in settings_text
    assert json.loads(settings_text)["chat_model_name"] == "m1"
    env_file = tmp_path / ".env"
    env_text = env_file.read_text()
    assert "API_KEY_OPENAI" in env_text and "API_KEY_ANTHROPIC" in env_text
    assert "GROQ" not in env_text
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "settings.json").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env", "settings.json"]
    assert settings.get_api_key("openai", tmp_path, environ={}) == "sk-openai-secret"
    assert settings.get_api_key("anthropic", tmp_path, environ={}) == "sk-ant-secret"
    # an empty key later means "unchanged"
    settings.save({"api_key_openai": ""}, tmp_path)
    assert settings.get_api_key("openai", tmp_path, environ={}) == "sk-openai-secret"
    assert settings.load(tmp_path, environ={})["chat_model_name"] == "m1"


def test_save_refuses_bad_values_and_writes_nothing(tmp_path):
    with pytest.raises(SettingsError) as info:
        settings.save({"retention_days": "soon"}, tmp_path)
    assert info.value.code == "invalid_setting"
    with pytest.raises(SettingsError, match="unknown setting"):
        settings.save({"no_such": 1}, tmp_path)
    with pytest.raises(SettingsError):
        settings.save({"chat_model_kwargs": "[]"}, tmp_path)
    with pytest.raises(SettingsError):
        settings.save({"api_keys": "sk-x"}, tmp_path)
    with pytest.raises(SettingsError, match="at most"):  # would break every new chat
        settings.save({"chat_model_ctx_length": 10**400}, tmp_path)
    assert not (tmp_path / "settings.json").exists()


def test_get_api_key_prefers_process_environment(tmp_path):
    settings.save({"api_key_openrouter": "from-dotenv"}, tmp_path)
    env = {"OPENROUTER_API_KEY": "from-env"}
    assert settings.get_api_key("openrouter", tmp_path, environ=env) == "from-env"
    assert settings.get_api_key("openrouter", tmp_path, environ={}) == "from-dotenv"
    token_env = {"MISTRAL_API_TOKEN": "tok"}
    assert settings.get_api_key("mistral", tmp_path, environ=token_env) == "tok"
    assert settings.get_api_key("deepseek", tmp_path, environ={}) is None
    assert settings.get_api_key("ollama", tmp_path, environ={"API_KEY_OLLAMA": "None"}) is None


def test_get_api_key_defaults_to_usr_dir(_private_usr_dir, monkeypatch):
    monkeypatch.delenv("API_KEY_LMSTUDIO", raising=False)
    settings.save({"api_key_lmstudio": "lm-key"})
    assert (_private_usr_dir / ".env").is_file()
    assert settings.get_api_key("lmstudio") == "lm-key"


def test_public_view_never_shows_key_values(tmp_path):
    settings.save({"api_key_openai": "sk-very-secret", "mcp_server_token": "tok-123456"}, tmp_path)
    loaded = settings.load(tmp_path, environ={})
    view = settings.public_view(loaded, tmp_path, providers=["openai", "groq"], environ={})
    text = json.dumps(view)
    assert "sk-very-secret" not in text and "tok-123456" not in text
    assert view["api_keys"] == {"openai": True, "groq": False}
    assert view["secrets"] == {"mcp_server_token": True, "code_exec_ssh_pass": False}
    assert view["settings"]["chat_model_name"] == settings.DEFAULTS["chat_model_name"]


def test_saved_token_wins_over_env_default(tmp_path):
    loaded = settings.load(tmp_path, environ={"A0_SET_mcp_server_token": "env-token"})
    assert loaded["mcp_server_token"] == "env-token"
    settings.save({"mcp_server_token": "saved-token"}, tmp_path)
    loaded = settings.load(tmp_path, environ={"A0_SET_mcp_server_token": "env-token"})
    assert loaded["mcp_server_token"] == "saved-token"
    loaded = settings.load(tmp_path, environ={"MCP_SERVER_TOKEN": "named-env"})
    assert loaded["mcp_server_token"] == "named-env"


# secrets masking (python/helpers/secrets.py) -----------------------------------------------
def test_masker_hides_keys_from_env_dotenv_and_secrets_file(tmp_path):
    from python.helpers import secrets

    settings.save({"api_key_openai": "sk-dotenv-value"}, tmp_path)
    (tmp_path / "secrets.env").write_text("DB_PASS=hunter2-db\n")
    masker = secrets.masker_for(tmp_path, environ={"GROQ_API_KEY": "gsk-env-value", "HOME": "/x"})
    text = "keys sk-dotenv-value gsk-env-value hunter2-db /x"
    assert masker.mask(text) == (
        "keys §§secret(API_KEY_OPENAI) §§secret(GROQ_API_KEY) §§secret(DB_PASS) /x"
    )
    assert "sk-dotenv-value" not in repr(masker)


def test_masker_sees_a_new_secret_without_restart(tmp_path, monkeypatch):
    from python.helpers import secrets

    monkeypatch.setenv("A0_USR_DIR", str(tmp_path))
    assert secrets.mask("value new-secret-1") == "value new-secret-1"
    (tmp_path / "secrets.env").write_text("NEW=new-secret-1\n")
    assert secrets.mask({"a": ["new-secret-1"]}) == {"a": ["§§secret(NEW)"]}


def test_every_setting_is_documented():
    from python.helpers.files import BASE_DIR

    text = (BASE_DIR / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [name for name in settings.DEFAULTS if f"`{name}`" not in text]
    assert missing == []


@pytest.mark.parametrize(
    ("name", "raw", "words"),
    [
        ("code_exec_max_timeout", "soon", "code_exec_max_timeout must be a whole number"),
        ("code_exec_max_timeout", "1.5", "(no decimals)"),
        ("chat_model_ctx_history", "2", "must be a share above 0 and at most 1"),
        ("chat_model_ctx_history", "abc", "must be a number, for example 0.7"),
        ("util_model_kwargs", "[1]", "must be a JSON object"),
        ("util_model_kwargs", "{x", "not valid JSON at line 1, column 2"),
        ("retention_days", "-1", "cannot be negative"),
    ],
)
def test_setting_errors_are_in_plain_words(name, raw, words):
    with pytest.raises(SettingsError) as caught:
        settings.coerce(name, raw)
    assert words in caught.value.message and caught.value.name == name
    assert "invalid literal" not in caught.value.message and "needs a" not in caught.value.message


def test_the_old_name_util_model_ctx_history_is_read_as_util_model_ctx_input(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps({"util_model_ctx_history": 0.4}))
    assert "util_model_ctx_history" not in settings.DEFAULTS
    assert settings.load(tmp_path, environ={})["util_model_ctx_input"] == 0.4
    env = {"A0_SET_util_model_ctx_history": "0.3"}
    (tmp_path / "settings.json").unlink()
    assert settings.load(tmp_path, environ=env)["util_model_ctx_input"] == 0.3
    saved = settings.save({"util_model_ctx_history": 0.6}, tmp_path)
    assert saved["util_model_ctx_input"] == 0.6
    stored = json.loads((tmp_path / "settings.json").read_text())
    assert stored == {"util_model_ctx_input": 0.6}
