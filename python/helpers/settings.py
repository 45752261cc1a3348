"""Settings: defaults, ``A0_SET_<name>`` defaults (usr/.env, then the environment), then
usr/settings.json, which wins, as in Agent Zero.

API keys never enter settings.json: they live in usr/.env as ``API_KEY_<PROVIDER>`` (the
Agent Zero convention), and so does the external API token (``MCP_SERVER_TOKEN``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import set_key

from durability.masking import read_env_file as read_dotenv
from durability.retention import DEFAULT_RETENTION_DAYS, DEFAULT_RETENTION_RUNS
from python.helpers import files

SETTINGS_FILE = "settings.json"
ENV_FILE = ".env"
ENV_PREFIX = "A0_SET_"
API_KEY_FIELD = "api_key_"  # save() input fields api_key_<provider>
MCP_TOKEN_ENV = "MCP_SERVER_TOKEN"
SSH_PASS_ENV = "CODE_EXEC_SSH_PASSWORD"
#: Settings kept only in usr/.env (never in settings.json), with their variable names.
SECRET_ENV = {"mcp_server_token": MCP_TOKEN_ENV, "code_exec_ssh_pass": SSH_PASS_ENV}
SECRET_SETTINGS = tuple(SECRET_ENV)

logger = logging.getLogger("a0.settings")


def _model_defaults(prefix: str, name: str) -> dict[str, Any]:
    return {
        f"{prefix}_provider": "openai",
        f"{prefix}_name": name,
        f"{prefix}_api_base": "",
        f"{prefix}_ctx_length": 128000,
        f"{prefix}_ctx_history": 0.7,
        f"{prefix}_kwargs": {},
        f"{prefix}_rl_requests": 0,
        f"{prefix}_rl_input": 0,
        f"{prefix}_rl_output": 0,
    }


def _utility_defaults() -> dict[str, Any]:
    found = _model_defaults("util_model", "gpt-4.1-nano")
    # upstream's name: the share of the utility model's window one input may fill
    found["util_model_ctx_input"] = found.pop("util_model_ctx_history")
    return found


DEFAULTS: dict[str, Any] = {
    **_model_defaults("chat_model", "gpt-4.1-mini"),
    # images go to the chat model (attachments, vision_load); upstream's default (#20)
    "chat_model_vision": True,
    **_utility_defaults(),
    # the embedding model (memory and knowledge; python/helpers/embeddings.py): upstream's
    # defaults, reached over an OpenAI-compatible /embeddings endpoint
    "embed_model_provider": "huggingface",
    "embed_model_name": "sentence-transformers/all-MiniLM-L6-v2",
    "embed_model_api_base": "",
    "embed_model_kwargs": {},
    "embed_model_rl_requests": 0,
    "embed_model_rl_input": 0,
    # knowledge: usr/knowledge/<agent_knowledge_subdir>/ and usr/knowledge/default/
    "agent_knowledge_subdir": "custom",
    # memory (docs/memory.md): upstream's keys; the defaults are v1.7's (query preparation
    # and post-filtering through the utility model are off there)
    "agent_memory_subdir": "default",
    "memory_recall_enabled": True,
    "memory_recall_delayed": False,
    "memory_recall_interval": 3,
    "memory_recall_history_len": 10000,
    "memory_recall_memories_max_search": 12,
    "memory_recall_solutions_max_search": 8,
    "memory_recall_memories_max_result": 5,
    "memory_recall_solutions_max_result": 3,
    "memory_recall_similarity_threshold": 0.7,
    "memory_recall_query_prep": False,
    "memory_recall_post_filter": False,
    "memory_memorize_enabled": True,
    "memory_memorize_consolidation": True,
    "memory_memorize_replace_threshold": 0.9,
    "agent_profile": "agent0",
    # the utility model names a chat after its first exchange (upstream always does; #23)
    "chat_rename": True,
    "mcp_server_token": "",
    "code_exec_first_output_timeout": 30,
    "code_exec_between_output_timeout": 15,
    "code_exec_max_timeout": 180,
    # commands on another host over SSH (upstream's names and defaults; the key file is ours)
    "code_exec_ssh_enabled": False,
    "code_exec_ssh_addr": "localhost",
    "code_exec_ssh_port": 55022,
    "code_exec_ssh_user": "root",
    "code_exec_ssh_pass": "",
    "code_exec_ssh_key_file": "",
    # seconds between two checks of held runs whose receipt may now prove the outcome
    "recovery_recheck_seconds": 30,
    "retention_runs": DEFAULT_RETENTION_RUNS,
    "retention_days": DEFAULT_RETENTION_DAYS,
    "searxng_url": "http://127.0.0.1:55510",
    "mcp_servers": '{"mcpServers": {}}',
    "mcp_client_init_timeout": 10,
    "mcp_client_tool_timeout": 120,
    # document_query (docs/documents.md): URL fetches reach public addresses only unless
    # this is on; size and time limits of one document
    "document_query_allow_private_addresses": False,
    "document_query_max_bytes": 20 * 1024 * 1024,
    "document_query_timeout": 30,
    # browser_agent (docs/browser.md): its model (empty name: the chat model), its limits
    "browser_model_provider": "openai",
    "browser_model_name": "",
    "browser_model_api_base": "",
    "browser_model_ctx_length": 128000,
    "browser_model_kwargs": {},
    "browser_model_vision": True,
    "browser_allow_private_addresses": False,
    "browser_action_timeout": 30,
    "browser_task_timeout": 300,
    "browser_max_steps": 50,
    "browser_executable": "/usr/bin/chromium",
}

# Lower bound per numeric setting (inclusive unless listed in _POSITIVE); ctx_history is a share.
_POSITIVE = {
    "chat_model_ctx_length",
    "util_model_ctx_length",
    "code_exec_first_output_timeout",
    "code_exec_between_output_timeout",
    "code_exec_max_timeout",
    "code_exec_ssh_port",
    "recovery_recheck_seconds",
    "mcp_client_init_timeout",
    "mcp_client_tool_timeout",
    "document_query_max_bytes",
    "document_query_timeout",
    "browser_model_ctx_length",
    "browser_action_timeout",
    "browser_task_timeout",
    "browser_max_steps",
    "memory_recall_interval",
}
_SHARES = {"chat_model_ctx_history", "util_model_ctx_input"}
#: Settings renamed since they were first stored: the old name (settings.json, A0_SET_*,
#: a save) is read as the new one, and settings.json is written with the new name.
RENAMED = {"util_model_ctx_history": "util_model_ctx_input"}


def _renamed(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with every old name replaced by its new one (a value under the new name
    wins over one under the old)."""
    out = {RENAMED.get(k, k): v for k, v in values.items() if k in RENAMED}
    out.update({k: v for k, v in values.items() if k not in RENAMED})
    return out


#: Relevance thresholds: from 0 to 1, both included.
_UNIT = {"memory_recall_similarity_threshold", "memory_memorize_replace_threshold"}


class SettingsError(ValueError):
    """A setting that cannot be used; ``code`` is stable, the message names the setting."""

    code = "invalid_setting"

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.name = name

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "name": self.name}


# parsing and validation -------------------------------------------------------------------
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
MAX_NUMBER = 2**53  # above this a number setting is a mistake (and no longer exact as float)


#: What each kind of value looks like, in words a person reads next to the field.
_KIND_WORDS = {
    bool: "must be true or false",
    int: "must be a whole number, for example 30",
    float: "must be a number, for example 0.7",
    dict: 'must be a JSON object, for example {"temperature": 0}',
    str: "must be text",
}


def _kind_error(name: str, default: Any, why: str = "") -> SettingsError:
    words = _KIND_WORDS.get(type(default), "has the wrong type")
    return SettingsError(f"{name} {words}{f' ({why})' if why else ''}.", name)


def parse_value(name: str, raw: str) -> Any:
    """Parse text (an environment value, a form field) to the type of ``name``'s default."""
    default = DEFAULTS[name]
    text = raw.strip()
    if isinstance(default, bool):
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise _kind_error(name, default)
    if isinstance(default, int | float):
        try:
            return int(text) if isinstance(default, int) else float(text)
        except ValueError:
            why = "it is empty" if not text else ""
            if isinstance(default, int) and _is_number(text):
                why = "no decimals"
            raise _kind_error(name, default, why) from None
    if isinstance(default, dict):
        try:
            value = json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            raise _kind_error(name, default, f"this is not valid JSON at {where}") from None
        if not isinstance(value, dict):
            raise _kind_error(name, default, "a list or a single value is not an object")
        return value
    return raw


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def coerce(name: str, value: Any) -> Any:
    """``value`` as a valid value of setting ``name``, or SettingsError."""
    if name not in DEFAULTS:
        raise SettingsError(f"There is no setting called '{name}' (unknown setting).", name)
    default = DEFAULTS[name]
    if isinstance(value, str) and not isinstance(default, str):
        value = parse_value(name, value)
    ok = (
        isinstance(value, bool)
        if isinstance(default, bool)
        else isinstance(value, type(default)) and not isinstance(value, bool)
    )
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise _kind_error(name, default)
    _check_range(name, value)
    return value


def _check_range(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    if value != value or value in (float("inf"), float("-inf")):
        raise SettingsError(f"{name} must be an ordinary number.", name)
    if name in _SHARES and not 0 < value <= 1:
        raise SettingsError(f"{name} must be a share above 0 and at most 1, e.g. 0.7.", name)
    if name in _UNIT and not 0 <= value <= 1:
        raise SettingsError(f"{name} must be a number from 0 to 1, e.g. 0.7.", name)
    if name in _POSITIVE and value <= 0:
        raise SettingsError(f"{name} must be more than 0.", name)
    if value < 0:
        raise SettingsError(f"{name} cannot be negative.", name)
    if value > MAX_NUMBER:
        raise SettingsError(f"{name} is too large: at most {MAX_NUMBER}.", name)


# loading ------------------------------------------------------------------------------
def _usr(usr: Path | None) -> Path:
    return Path(usr) if usr is not None else files.usr_dir()


def _read_settings_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SettingsError(f"{path.name} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path.name} must hold a JSON object")
    return _renamed(data)


def read_env_file(usr: Path) -> dict[str, str]:
    """The variables of ``usr/.env`` (empty when there is none)."""
    return _read_env_file(usr)


def _read_env_file(usr: Path) -> dict[str, str]:
    return read_dotenv(usr / ENV_FILE)  # literally: ``${VAR}`` is never expanded


def env_defaults(source: Mapping[str, str]) -> dict[str, Any]:
    """The ``A0_SET_<name>`` values in ``source`` (name matched without regard to case).

    As upstream, an unknown name is ignored and a value that does not fit the setting is
    ignored with a warning that names it (the setting keeps its other value)."""
    by_lower = {name.lower(): name for name in DEFAULTS}
    by_lower.update({old.lower(): new for old, new in RENAMED.items()})
    found: dict[str, Any] = {}
    for key, raw in source.items():
        if key[: len(ENV_PREFIX)].upper() != ENV_PREFIX or not isinstance(raw, str):
            continue
        name = by_lower.get(key[len(ENV_PREFIX) :].lower())
        if name is None:
            continue
        try:
            found[name] = coerce(name, parse_value(name, raw))
        except SettingsError as exc:
            logger.warning("%s ignored: %s", key, exc.message)
    return found


def load(usr: Path | None = None, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Defaults, then ``A0_SET_*`` from usr/.env and the environment (the environment wins
    over the file), then usr/settings.json, then the secrets kept in usr/.env
    (``MCP_SERVER_TOKEN``, ``CODE_EXEC_SSH_PASSWORD``)."""
    folder = _usr(usr)
    env = os.environ if environ is None else environ
    dotenv = _read_env_file(folder)
    result = dict(DEFAULTS)
    result.update(env_defaults(dotenv))
    result.update(env_defaults(env))
    for name, value in _read_settings_file(folder / SETTINGS_FILE).items():
        if name in DEFAULTS and name not in SECRET_SETTINGS:
            result[name] = coerce(name, value)
    for name, variable in SECRET_ENV.items():
        secret = env.get(variable) or dotenv.get(variable)
        if secret:
            result[name] = secret
    return result


def env_value(name: str, usr: Path | None = None, environ: Mapping[str, str] | None = None) -> str:
    """A plain variable (``WEB_UI_PORT``, ...): the process environment, then usr/.env."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    if value:
        return value
    return _read_env_file(_usr(usr)).get(name) or ""


# saving -------------------------------------------------------------------------------
def mcp_servers_text(value: Any) -> str:
    """The ``mcp_servers`` value to store: JSON text (an object or list is turned into text)
    whose every server entry is usable; else SettingsError naming the problem."""
    from python.helpers import mcp_config

    if isinstance(value, dict | list):
        value = json.dumps(value, indent=2)
    if not isinstance(value, str):
        raise SettingsError("setting 'mcp_servers' needs JSON text", "mcp_servers")
    try:
        mcp_config.validate(value)
    except mcp_config.McpConfigError as exc:
        raise SettingsError(exc.message, "mcp_servers") from None
    return value


def _env_name(provider: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in provider.strip()).upper()


def api_key_env_name(provider: str) -> str:
    """The usr/.env name of a provider's key: ``API_KEY_<PROVIDER>``."""
    return f"API_KEY_{_env_name(provider)}"


def _write_env(usr: Path, values: Mapping[str, str]) -> None:
    path = usr / ENV_FILE
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)
    for key, value in values.items():
        set_key(path, key, value, quote_mode="always")
    os.chmod(path, 0o600)


def save(values: Mapping[str, Any], usr: Path | None = None) -> dict[str, Any]:
    """Validate and store ``values``; returns the settings as ``load`` now sees them.

    ``api_key_<provider>`` fields and an ``api_keys`` dict ({provider: key}) go to usr/.env
    only, as do ``mcp_server_token`` and ``code_exec_ssh_pass``. An empty or None secret
    means "unchanged".
    """
    folder = _usr(usr)
    folder.mkdir(parents=True, exist_ok=True)
    stored = {
        k: v
        for k, v in _read_settings_file(folder / SETTINGS_FILE).items()
        if k in DEFAULTS and k not in SECRET_SETTINGS
    }
    env_updates: dict[str, str] = {}

    def add_key(provider: str, key: Any) -> None:
        if key is None or key == "":
            return
        if not isinstance(key, str) or not provider.strip():
            field = f"{API_KEY_FIELD}{provider}"
            raise SettingsError(f"the API key for '{provider}' must be text", field)
        env_updates[api_key_env_name(provider)] = key.strip()

    for name, value in _renamed(values).items():
        if name == "api_keys":
            if not isinstance(value, Mapping):
                raise SettingsError("api_keys must map provider to key", name)
            for provider, key in value.items():
                add_key(str(provider), key)
        elif name.startswith(API_KEY_FIELD):
            add_key(name[len(API_KEY_FIELD) :], value)
        elif name in SECRET_SETTINGS:
            if value not in (None, ""):
                env_updates[SECRET_ENV[name]] = str(coerce(name, value))
        elif name == "mcp_servers":
            stored[name] = mcp_servers_text(value)
        else:
            stored[name] = coerce(name, value)

    text = json.dumps(stored, indent=2, sort_keys=True) + "\n"
    files.write_atomic(folder / SETTINGS_FILE, text, mode=0o600)
    if env_updates:
        _write_env(folder, env_updates)
    return load(folder)


# keys -----------------------------------------------------------------------------------
def get_api_key(
    provider: str, usr: Path | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """``API_KEY_<P>``, ``<P>_API_KEY``, ``<P>_API_TOKEN``: process environment, then usr/.env.

    An upstream spelling of a provider id (``lm_studio``) also finds the key stored under
    our id (``API_KEY_LMSTUDIO``)."""
    from python.helpers.models import resolve_provider

    spellings = dict.fromkeys([_env_name(provider), _env_name(resolve_provider(provider)[0])])
    names = tuple(
        name
        for upper in spellings
        for name in (f"API_KEY_{upper}", f"{upper}_API_KEY", f"{upper}_API_TOKEN")
    )
    env = os.environ if environ is None else environ
    for source in (env, None):
        values = _read_env_file(_usr(usr)) if source is None else source
        for name in names:
            value = (values.get(name) or "").strip()
            if value and value.lower() != "none":
                return value
    return None


def public_view(
    settings: Mapping[str, Any],
    usr: Path | None = None,
    providers: list[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """What a UI may see: settings without secret values; for keys only whether they are set."""
    if providers is None:
        from python.helpers.models import load_providers

        providers = sorted(load_providers())
    return {
        "settings": {
            k: v
            for k, v in settings.items()
            if k not in SECRET_SETTINGS and not k.startswith(API_KEY_FIELD)
        },
        "secrets": {name: bool(settings.get(name)) for name in SECRET_SETTINGS},
        "api_keys": {p: get_api_key(p, usr, environ) is not None for p in providers},
    }
