"""Checkpoints of a chat: the masked projection the journal stores, and the rebuild.

A checkpoint holds two projections of the agent chain: ``current`` (the state after this
iteration; chats are rebuilt from it at start-up) and ``resume`` (the resume base: the
state at admission or at the end of agent 0's latest iteration; a resumed run continues
from it and replays forward). Each projection has, per agent, its number, profile,
history metadata, loop state and the JSON-safe ``data`` without ``_`` keys; plus the
per-agent sequence counters. The histories (one flat list per agent, and the log items)
go into the journal's content-addressed history chains, so bytes per step track the step.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from durability.canonical import canonical_json
from durability.checkpoints import FrozenMessage
from durability.errors import DurabilityError
from durability.records import CheckpointData
from python.durable.run import DurableRun, Projection
from python.helpers.history import Bulk, History, Message, Topic

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentConfig, AgentContext
    from durability.journal import Journal
    from python.helpers.log import Log

STATE_VERSION = 1
SKIP_DATA_KEYS = frozenset({"ctx_window"})  # the last prompt: large and rebuilt every turn
RESUME_PREFIX = "resume:"
LOG_KEY = "log"


def current_chains(key: str) -> bool:
    """The history chains that rebuild a chat as it is now (a run's resume base, under
    ``RESUME_PREFIX``, is read only to resume that run): about half of a checkpoint."""
    return not key.startswith(RESUME_PREFIX)


def flatten_history(history: History, journal: Journal | None = None) -> list[Any]:
    """Bulks, then each topic as a header entry followed by its messages (append-friendly).

    With a journal the entries are FrozenMessage objects, reused while their message is
    unchanged, so a checkpoint serialises only new or changed entries.
    """
    if journal is not None:
        return _Frozen.of(history).entries(history, journal)
    entries: list[Any] = [{"bulk": b.to_dict()} for b in history.bulks]
    for topic in history.topics:
        entries.append({"topic": topic.summary})
        entries.extend({"m": m.to_dict()} for m in topic.messages)
    entries.append({"current": history.current.summary})
    entries.extend({"m": m.to_dict()} for m in history.current.messages)
    return entries


@dataclass
class _Frozen:
    """Per History: the frozen entry of each message and header from the last flatten.

    A message's entry is reused only while it is the same Message object with the same
    ``id`` and ``ai`` and the very same (immutable) str ``content``; anything else
    (dict or list content, a replaced or edited message) is frozen again.
    """

    messages: dict[int, tuple[Message, Any, tuple[Any, ...], FrozenMessage]] = field(
        default_factory=dict
    )
    headers: dict[str, FrozenMessage] = field(default_factory=dict)

    @classmethod
    def of(cls, history: History) -> _Frozen:
        found = _FROZEN.get(history)
        if found is None:
            found = _FROZEN[history] = cls()
        return found

    def entries(self, history: History, journal: Journal) -> list[Any]:
        masker = journal.masker
        messages: dict[int, tuple[Message, Any, tuple[Any, ...], FrozenMessage]] = {}
        headers: dict[str, FrozenMessage] = {}

        def header(entry: dict[str, Any]) -> FrozenMessage:
            key = canonical_json(entry)
            frozen = self.headers.get(key)
            if frozen is None or frozen.masker is not masker:
                frozen = journal.freeze(entry)
            headers[key] = frozen
            return frozen

        def message(m: Message) -> FrozenMessage:
            content = m.content
            identity = (type(m.id), m.id, type(m.ai), m.ai)
            hit = self.messages.get(id(m))
            same = hit is not None and hit[0] is m and hit[1] is content and hit[2] == identity
            if hit is not None and same and isinstance(content, str) and hit[3].masker is masker:
                frozen = hit[3]
            else:
                frozen = journal.freeze({"m": m.to_dict()})
            messages[id(m)] = (m, content, identity, frozen)
            return frozen

        entries: list[Any] = [header({"bulk": b.to_dict()}) for b in history.bulks]
        for topic in history.topics:
            entries.append(header({"topic": topic.summary}))
            entries.extend(message(m) for m in topic.messages)
        entries.append(header({"current": history.current.summary}))
        entries.extend(message(m) for m in history.current.messages)
        self.messages, self.headers = messages, headers
        return entries


_FROZEN: weakref.WeakKeyDictionary[History, _Frozen] = weakref.WeakKeyDictionary()


def unflatten_history(entries: list[dict[str, Any]], meta: dict[str, Any]) -> History:
    history = History(max_tokens=int(meta.get("max_tokens", 0)))
    history.counter = int(meta.get("counter", 0))
    topic: Topic | None = None
    for entry in entries:
        if "bulk" in entry:
            history.bulks.append(Bulk.from_dict(entry["bulk"]))
        elif "topic" in entry or "current" in entry:
            if topic is not None:
                history.topics.append(topic)
            topic = Topic(summary=str(entry.get("topic", entry.get("current")) or ""))
        elif "m" in entry and topic is not None:
            topic.messages.append(Message.from_dict(entry["m"]))
    history.current = topic if topic is not None else Topic()
    return history


def _json_data(data: dict[str, Any]) -> dict[str, Any]:
    kept = {}
    for key, value in data.items():
        if not isinstance(key, str) or key.startswith("_") or key in SKIP_DATA_KEYS:
            continue
        try:
            canonical_json(value)
        except DurabilityError:
            continue
        kept[key] = value
    return kept


def _agent_state(agent: Agent) -> dict[str, Any]:
    history = agent.history
    loop = agent.loop_data
    return {
        "number": agent.number,
        "profile": agent.config.profile,
        "history": {"counter": history.counter, "max_tokens": history.max_tokens},
        "loop": {
            "iteration": loop.iteration,
            "last_response": loop.last_response,
            # recalled memories stay in the prompt after a resume (python/extensions/...)
            "extras_persistent": _json_data(loop.extras_persistent),
        },
        "data": _json_data(agent.data),
    }


def project(context: AgentContext, run: DurableRun, journal: Journal | None = None) -> Projection:
    """The chat's state (small dict) and its histories (lists), unmasked. With a journal the
    history entries are frozen (masked and serialised once, reused while unchanged)."""
    agents, histories = [], {}
    for agent in context.agents():
        agents.append(_agent_state(agent))
        histories[f"agent:{agent.number}"] = flatten_history(agent.history, journal)
    histories[LOG_KEY] = [item.output() for item in context.log.items]
    streaming = context.streaming_agent
    state = {
        "v": STATE_VERSION,
        "name": context.name,
        "agents": agents,
        "seq": {str(k): v for k, v in run.seq.items()},
        "start_agent": run.start_agent,
        "streaming_agent": streaming.number if streaming is not None else None,
    }
    return state, histories


def new_chat_projection(
    config: AgentConfig, name: str | None, history: History | None, log: Log | None
) -> Projection:
    """The projection of a chat made without a message (chat_create: empty; chat_load: the
    export's log and agent 0's history), as ``project`` would give for it: its first
    checkpoint, and (through ``restore_chain``) the live chat too."""
    history = history if history is not None else History()
    history.max_tokens = config.history_token_limit()
    agent = {
        "number": 0,
        "profile": config.profile,
        "history": {"counter": history.counter, "max_tokens": history.max_tokens},
        "loop": {"iteration": -1, "last_response": ""},
        "data": {},
    }
    state: dict[str, Any] = {
        "v": STATE_VERSION,
        "name": name,
        "agents": [agent],
        "seq": {},
        "start_agent": 0,
        "streaming_agent": None,
    }
    items = [item.output() for item in log.items] if log is not None else []
    return state, {"agent:0": flatten_history(history), LOG_KEY: items}


def first_checkpoint(state: dict[str, Any], histories: dict[str, list[Any]]) -> CheckpointData:
    """``checkpoint_data`` for a chat that has not run: its resume base is itself."""
    all_histories = dict(histories)
    all_histories.update({RESUME_PREFIX + k: v for k, v in histories.items()})
    return CheckpointData({"current": state, "resume": state}, all_histories)


def set_resume_base(context: AgentContext, run: DurableRun, agent: Agent, *, phase: str) -> None:
    """Remember the current state as the point a resumed run continues from."""
    state, histories = project(context, run)
    state["phase"] = phase  # start: monologue not begun; iteration: continue agent 0's loop
    state["resume_agent"] = agent.number
    run.resume_base = (state, histories)


def checkpoint_data(context: AgentContext, run: DurableRun, journal: Journal) -> CheckpointData:
    state, histories = project(context, run, journal)
    base_state, base_histories = run.resume_base or (state, histories)
    all_histories = dict(histories)
    all_histories.update({RESUME_PREFIX + k: v for k, v in base_histories.items()})
    return CheckpointData({"current": state, "resume": base_state}, all_histories)


#: How long a run's start checkpoint waits for the run's first intent to ride on. Prompt
#: building comes between the two and takes longer than the journal's default bound on a
#: busy machine; a start checkpoint lost in a crash is rebuilt from the chat's previous
#: checkpoint and the journaled input (``RunScope._restart_from_input``), the very state it
#: holds (docs/durability.md, "Results ride on the next write").
START_WITHIN_SECONDS = 1.0


async def write(
    context: AgentContext, run: DurableRun, journal: Journal, *, start: bool = False
) -> None:
    """Hand one checkpoint of the chat for ``run`` to the journal: derived state, so it
    rides on the run's next write (durability/journal/_deferral.py); ``start``: the run's
    start checkpoint, which may wait up to ``START_WITHIN_SECONDS`` for it."""
    within = START_WITHIN_SECONDS if start else None
    data = checkpoint_data(context, run, journal)
    await journal.aio.defer_checkpoint(run.run_id, data, within=within)


def _log_item(item: dict[str, Any]) -> dict[str, Any]:
    from python.helpers.log import RESTORED_STATES

    restored = item.get("restored")
    return {
        "type": str(item.get("type") or "info"),
        "heading": str(item.get("heading") or ""),
        "content": str(item.get("content") or ""),
        "kvps": item.get("kvps") or {},
        "agentno": int(item.get("agentno") or 0),
        "id": item.get("id"),
        "call_id": str(item.get("call_id") or ""),
        "restored": restored if restored in RESTORED_STATES else "",
    }


def restore_log(context: AgentContext, items: list[dict[str, Any]]) -> None:
    """Replace the chat's log with checkpointed items (a new guid: the UI starts over)."""
    log = context.new_log()
    for item in items:
        try:
            log.log(**_log_item(item))
        except (ValueError, TypeError):
            continue
    context.log = log


def restore_chain(
    context: AgentContext, state: dict[str, Any], histories: dict[str, list[Any]], prefix: str = ""
) -> None:
    """Rebuild agent 0, its subordinates and the log from a projection."""
    from agent import Agent, AgentConfig, LoopData

    parent: Agent | None = None
    for spec in state.get("agents") or [{"number": 0}]:
        number = int(spec.get("number", 0))
        if number == 0:
            profile = spec.get("profile")
            if isinstance(profile, str) and profile:  # the chat keeps the profile it was made
                context.config.profile = profile  # with (api_message's agent_profile)
            agent = Agent(0, context.config, context)
            context.agent0 = agent
        else:
            config = AgentConfig.from_settings(context.config.settings, profile=spec.get("profile"))
            config.workdir = context.config.workdir
            agent = Agent(number, config, context)
        key = f"{prefix}agent:{number}"
        agent.history = unflatten_history(histories.get(key, []), spec.get("history") or {})
        loop = spec.get("loop") or {}
        agent.loop_data = LoopData(
            iteration=int(loop.get("iteration", -1)),
            last_response=str(loop.get("last_response") or ""),
        )
        extras = loop.get("extras_persistent")
        if isinstance(extras, dict):
            agent.loop_data.extras_persistent.update(extras)
        agent.data.update(spec.get("data") or {})
        if parent is not None:
            agent.data["_superior"] = parent
            parent.data["_subordinate"] = agent
        parent = agent
    restore_log(context, histories.get(prefix + LOG_KEY, []))
    context.streaming_agent = None
    name = state.get("name")
    if isinstance(name, str) and name:  # checkpoints before #17 have no name
        context.name = name


def agent_by_number(context: AgentContext, number: int) -> Agent:
    for agent in context.agents():
        if agent.number == number:
            return agent
    return context.agent0
