"""chat.json export/import (compatibility format; the journal stays the authority).

``parse_chat`` checks one exported chat completely before anything is made: every shape it
does not accept is a ``400 bad_request`` whose ``index`` names the chat in the request and
whose ``field`` names the place (``log.items[3].kvps``, ``agents[0].history.current``).
Missing parts are tolerated (no log, no history, an item without a type), wrong types are
not. What it returns is ready to make the chat from (python/durable/new_chats.py).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from agent import AgentContext
from durability.records import MAX_INT
from python.durable.new_chats import ChatSpec
from python.helpers import secrets
from python.helpers.history import Bulk, History, Message, Topic
from python.helpers.log import Log
from python.server.api import MAX_JSON_DEPTH, ApiError, bad_request

MAX_ID_LENGTH = 200  # what the journal takes as a chat id
_LOG_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")  # python/helpers/log.py's item types
_CONTROL = re.compile(r"[\x00-\x1f]")


def export_chat(ctx: AgentContext) -> dict[str, Any]:
    """The chat in upstream's chat.json shape (Agent Zero loads it with chat_load): agents
    with their history as JSON text of ``_cls``-tagged objects, the log as ``logs``."""
    streaming = ctx.streaming_agent
    return {
        "id": ctx.id,
        "name": ctx.name,
        "created_at": ctx.created_at.isoformat(),
        "type": "task" if ctx.type.value == "task" else "user",
        "last_message": ctx.last_message.isoformat(),
        "agents": [
            {
                "number": a.number,
                "data": {},
                "history": json.dumps(_upstream_history(a.history), ensure_ascii=False),
            }
            for a in ctx.agents()
        ],
        "streaming_agent": streaming.number if streaming is not None else 0,
        "log": {
            "guid": ctx.log.guid,
            "logs": [_upstream_log_item(item) for item in ctx.log.output(start=0)],
            "progress": ctx.log.progress,
            "progress_no": ctx.log.progress_no,
        },
        "data": {},
        "output_data": {},
    }


def _upstream_message(message: Message) -> dict[str, Any]:
    return {
        "_cls": "Message",
        "ai": message.ai,
        "content": message.content,
        "summary": "",
        "tokens": message.tokens(),
    }


def _upstream_topic(topic: Topic) -> dict[str, Any]:
    messages = [_upstream_message(m) for m in topic.messages]
    return {"_cls": "Topic", "summary": topic.summary, "messages": messages}


def _upstream_history(history: History) -> dict[str, Any]:
    # a bulk here counts the topics it stands for; upstream lists them: empty stand-ins
    empty = {"_cls": "Topic", "summary": "", "messages": []}
    bulks = [
        {"_cls": "Bulk", "summary": b.summary, "records": [dict(empty) for _ in range(b.topics)]}
        for b in history.bulks
    ]
    return {
        "_cls": "History",
        "counter": history.counter,
        "bulks": bulks,
        "topics": [_upstream_topic(t) for t in history.topics],
        "current": _upstream_topic(history.current),
    }


def _upstream_log_item(item: dict[str, Any]) -> dict[str, Any]:
    keys = ("no", "id", "type", "heading", "content", "kvps", "timestamp", "agentno")
    return {**{key: item.get(key) for key in keys}, "temp": False}


def check_chat_id(value: str, field: str) -> str | None:
    """A chat id a client asks for (None for none): at most 200 characters, no control
    characters (what the journal takes)."""
    if not value.strip():
        return None
    if not _usable_id(value):
        raise bad_request(
            f"'{field}' must be at most {MAX_ID_LENGTH} characters, without control characters",
            field=field,
        )
    return value


class _Invalid(Exception):
    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}" if where else what)
        self.where = where
        self.what = what


def parse_chat(raw: Any, index: int) -> ChatSpec:
    """The chat at ``index`` of a chat_load request, checked whole (400 when anything is
    wrong, naming ``index`` and the ``field``)."""
    try:
        return _chat(raw)
    except _Invalid as exc:
        raise ApiError(
            "bad_request", f"chat {index}: {exc}", index=index, field=exc.where
        ) from None


def _chat(raw: Any) -> ChatSpec:
    if isinstance(raw, str):
        raw = _json_text(raw, "")
    if not isinstance(raw, dict):
        raise _Invalid("", "a chat must be a JSON object (or JSON text of one)")
    _check_value(raw, "")
    raw = secrets.mask(raw)  # an entry point too: the chat's memory and log hold no secret
    wanted = raw.get("id")
    usable = isinstance(wanted, str) and _usable_id(wanted)
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        raise _Invalid("name", "must be text or null")
    return ChatSpec(
        "loaded",
        id=wanted if usable else None,  # any other id: the chat gets a new one
        name=name or None,
        history=_agent0_history(raw.get("agents")),
        log=_log(raw.get("log")),
    )


def _usable_id(value: str) -> bool:
    return bool(value.strip()) and len(value) <= MAX_ID_LENGTH and not _CONTROL.search(value)


def _json_text(text: str, where: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):
        raise _Invalid(where, "is not valid JSON") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def _check_value(value: Any, where: str) -> None:
    """What a request body may hold, also inside JSON text: nesting up to MAX_JSON_DEPTH,
    integers the journal stores, text that is valid Unicode."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise _Invalid(where, "holds text that is not valid Unicode") from None
        elif isinstance(item, int) and not isinstance(item, bool):
            if abs(item) > MAX_INT:
                raise _Invalid(where, "holds an integer out of range")
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise _Invalid(where, f"is nested more than {MAX_JSON_DEPTH} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


# the log -----------------------------------------------------------------------------------
def _log(log: Any) -> Log:
    made = Log()
    if log is None:
        return made
    if not isinstance(log, dict):
        raise _Invalid("log", "must be an object {items: [...]}")
    key = "items" if log.get("items") is not None else "logs"
    items = log.get(key)
    if items is None:
        return made
    if not isinstance(items, list):
        raise _Invalid(f"log.{key}", "must be a list")
    for n, item in enumerate(items):
        made.log(**_log_item(item, f"log.{key}[{n}]"))
    return made


def _log_item(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise _Invalid(where, "must be an object")
    kind = item.get("type")
    if kind is None:
        kind = "info"
    if not isinstance(kind, str) or not _LOG_TYPE.fullmatch(kind):
        raise _Invalid(f"{where}.type", "must be a lowercase word such as 'user' or 'agent'")
    fields: dict[str, Any] = {"type": kind}
    for key in ("heading", "content"):
        value = item.get(key)
        if value is not None and not isinstance(value, str):
            raise _Invalid(f"{where}.{key}", "must be text or null")
        fields[key] = value or ""
    kvps = item.get("kvps")
    if kvps is not None and not isinstance(kvps, dict):
        raise _Invalid(f"{where}.kvps", "must be an object or null")
    fields["kvps"] = kvps or {}
    fields["agentno"] = _count(item.get("agentno"), f"{where}.agentno")
    item_id = item.get("id")
    if item_id is not None and (not isinstance(item_id, str) or len(item_id) > MAX_ID_LENGTH):
        raise _Invalid(f"{where}.id", f"must be text of at most {MAX_ID_LENGTH} characters")
    fields["id"] = item_id or None
    return fields


def _count(value: Any, where: str, default: int = 0) -> int:
    """A whole number >= 0, or ``default`` for null."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise _Invalid(where, "must be a whole number >= 0")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Invalid(where, "must be text or null")
    return value


# the history -------------------------------------------------------------------------------
def _agent0_history(agents: Any) -> History | None:
    """Agent 0's history (the first agent); the others must be objects, and are not kept."""
    if agents is None:
        return None
    if not isinstance(agents, list):
        raise _Invalid("agents", "must be a list")
    for n, agent in enumerate(agents):
        if not isinstance(agent, dict):
            raise _Invalid(f"agents[{n}]", "must be an object")
    if not agents:
        return None
    history = agents[0].get("history")
    where = "agents[0].history"
    if history is None:
        return None
    if isinstance(history, str):  # upstream stores it as JSON text
        history = _json_text(history, where)
        _check_value(history, where)
    if not isinstance(history, dict):
        raise _Invalid(where, "must be an object (or JSON text of one)")
    made = History()
    made.counter = _count(history.get("counter"), f"{where}.counter")
    made.bulks = [_bulk(b, f"{where}.bulks[{n}]") for n, b in _items(history, "bulks", where)]
    made.topics = [_topic(t, f"{where}.topics[{n}]") for n, t in _items(history, "topics", where)]
    current = history.get("current")
    made.current = Topic() if current is None else _topic(current, f"{where}.current")
    _number_messages(made)
    return made


def _number_messages(history: History) -> None:
    """Upstream's messages carry no id: number them in order when the ids are not distinct,
    and keep the counter past them."""
    messages = [m for t in [*history.topics, history.current] for m in t.messages]
    ids = [m.id for m in messages]
    if len(set(ids)) != len(ids) or 0 in ids:
        for n, message in enumerate(messages, 1):
            message.id = n
    history.counter = max([history.counter, *(m.id for m in messages)])


def _items(value: dict[str, Any], key: str, where: str) -> list[tuple[int, Any]]:
    items = value.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise _Invalid(f"{where}.{key}", "must be a list")
    return list(enumerate(items))


def _bulk(value: Any, where: str) -> Bulk:
    if not isinstance(value, dict):
        raise _Invalid(where, "must be an object")
    topics = value.get("topics")
    records = value.get("records")  # upstream: the topics or bulks it stands for
    if topics is None and isinstance(records, list):
        topics = max(len(records), 1)
    return Bulk(
        _text(value.get("summary"), f"{where}.summary"), _count(topics, f"{where}.topics", 1)
    )


def _topic(value: Any, where: str) -> Topic:
    if not isinstance(value, dict):
        raise _Invalid(where, "must be an object")
    messages = [_message(m, f"{where}.messages[{n}]") for n, m in _items(value, "messages", where)]
    return Topic(messages=messages, summary=_text(value.get("summary"), f"{where}.summary"))


def _message(value: Any, where: str) -> Message:
    if not isinstance(value, dict):
        raise _Invalid(where, "must be an object")
    ai = value.get("ai")
    if not isinstance(ai, bool):
        raise _Invalid(f"{where}.ai", "must be true or false")
    content = value.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str | list | dict):
        raise _Invalid(f"{where}.content", "must be text, a list or an object")
    return Message(ai=ai, content=content, id=_count(value.get("id"), f"{where}.id"))
