"""Conversation history: topics, summarised bulks and compression to a token budget.

A topic starts at a user message and holds the messages that follow it. Older topics
can be summarised (one summary replaces their messages) and grouped into bulks. The
whole structure is JSON-serialisable so the journal can checkpoint it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from python.helpers import images

CHARS_PER_TOKEN = 4
COMPRESS_TARGET = 0.8  # compress to this share of the limit
TOPICS_PER_BULK = 3
BULKS_MERGED = 3
KEEP_TAIL = 2  # messages kept verbatim at the end of the current topic

Summarize = Callable[[str], Awaitable[str]]


def approx_tokens(text: str) -> int:
    """Approximate token count (about four characters per token)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def content_text(content: str | dict | list) -> str:
    """The text a message content contributes to the prompt."""
    if isinstance(content, str):
        return content
    if images.is_parts(content):  # text and images (python/helpers/images.py)
        return images.parts_text(content)  # type: ignore[arg-type]
    return json.dumps(content, ensure_ascii=False)


def truncate_text(text: str, max_chars: int) -> str:
    """Keep the head and tail of `text`, with a marker naming what was cut."""
    if len(text) <= max_chars:
        return text
    max_chars = max(max_chars, 64)
    marker = "\n[... {n} characters truncated ...]\n"
    keep = max(max_chars - len(marker.format(n=len(text))), 16)
    head, tail = keep // 2, keep - keep // 2
    cut = len(text) - head - tail
    return text[:head] + marker.format(n=cut) + text[len(text) - tail :]


@dataclass
class Message:
    ai: bool
    content: str | dict | list
    id: int = 0

    @property
    def role(self) -> str:
        return "assistant" if self.ai else "user"

    def text(self) -> str:
        return content_text(self.content)

    def tokens(self) -> int:
        return approx_tokens(self.text()) + images.TOKENS_PER_IMAGE * images.image_count(
            self.content
        )

    def prompt_content(self) -> str | list[dict[str, Any]]:
        """What the model gets: the text, or the parts when the message holds images."""
        if images.image_count(self.content):
            return list(self.content)  # type: ignore[arg-type]
        return self.text()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "ai": self.ai, "content": self.content}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        return cls(ai=bool(d["ai"]), content=d["content"], id=int(d.get("id", 0)))


@dataclass
class Topic:
    """Messages from one user message to the next; `summary` replaces them once set."""

    messages: list[Message] = field(default_factory=list)
    summary: str = ""

    def output(self) -> list[tuple[bool, str | list[dict[str, Any]]]]:
        if self.summary:
            return [(False, self.summary)]
        return [(m.ai, m.prompt_content()) for m in self.messages]

    def tokens(self) -> int:
        if self.summary:
            return approx_tokens(self.summary)
        return sum(m.tokens() for m in self.messages)

    def transcript(self) -> str:
        return "\n\n".join(f"{m.role}: {m.text()}" for m in self.messages)

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "messages": [m.to_dict() for m in self.messages]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Topic:
        return cls(
            messages=[Message.from_dict(m) for m in d.get("messages", [])],
            summary=str(d.get("summary", "")),
        )


@dataclass
class Bulk:
    """A summary standing for several older topics."""

    summary: str
    topics: int = 1

    def tokens(self) -> int:
        return approx_tokens(self.summary)

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "topics": self.topics}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Bulk:
        return cls(summary=str(d["summary"]), topics=int(d.get("topics", 1)))


class History:
    """Bulks (oldest) + finished topics + the current topic."""

    def __init__(self, max_tokens: int = 0) -> None:
        self.max_tokens = max_tokens  # 0: no limit
        self.counter = 0
        self.bulks: list[Bulk] = []
        self.topics: list[Topic] = []
        self.current = Topic()

    # -- building -------------------------------------------------------------
    def add(self, ai: bool, content: str | dict | list) -> Message:
        """Append a message to the current topic."""
        self.counter += 1
        msg = Message(ai=ai, content=content, id=self.counter)
        self.current.messages.append(msg)
        return msg

    def new_topic(self) -> None:
        """Close the current topic (if it has messages) and start a new one."""
        if self.current.messages or self.current.summary:
            self.topics.append(self.current)
        self.current = Topic()

    def is_empty(self) -> bool:
        return not (self.bulks or self.topics or self.current.messages)

    def last_message(self) -> Message | None:
        if self.current.messages:
            return self.current.messages[-1]
        for topic in reversed(self.topics):
            if topic.messages:
                return topic.messages[-1]
        return None

    # -- output ---------------------------------------------------------------
    def output(self) -> list[dict[str, Any]]:
        """OpenAI chat messages; consecutive same-role parts are merged into one. A message
        with images has a list of parts as content (python/helpers/images.py), else text."""
        parts: list[tuple[bool, str | list[dict[str, Any]]]] = [
            (False, b.summary) for b in self.bulks
        ]
        for topic in [*self.topics, self.current]:
            parts.extend(topic.output())
        merged: list[dict[str, Any]] = []
        for ai, content in parts:
            role = "assistant" if ai else "user"
            if merged and merged[-1]["role"] == role:
                before = merged[-1]["content"]
                if isinstance(before, str) and isinstance(content, str):
                    merged[-1]["content"] = before + "\n\n" + content
                else:
                    merged[-1]["content"] = images.as_parts(before) + images.as_parts(content)
            else:
                merged.append({"role": role, "content": content})
        return merged

    def output_text(self) -> str:
        return "\n\n".join(f"{m['role']}: {content_text(m['content'])}" for m in self.output())

    def tokens(self) -> int:
        return (
            sum(b.tokens() for b in self.bulks)
            + sum(t.tokens() for t in self.topics)
            + self.current.tokens()
        )

    def over_limit(self) -> bool:
        return bool(self.max_tokens) and self.tokens() > self.max_tokens

    # -- compression ----------------------------------------------------------
    async def compress(self, summarize: Summarize, max_tokens: int | None = None) -> bool:
        """Shrink the history below 80% of the limit; return whether anything changed.

        `summarize(text)` is the utility model; when it fails the history is
        truncated instead (oldest first), so compression always ends under budget.
        """
        limit = max_tokens if max_tokens is not None else self.max_tokens
        if not limit or self.tokens() <= limit:
            return False
        target = max(int(limit * COMPRESS_TARGET), 1)
        self._truncate_big_messages(max(target // 4, 64))
        try:
            while self.tokens() > target and await self._compress_step(summarize):
                pass
        except Exception:
            pass  # the utility model failed: fall back to truncation below
        if self.tokens() > target:
            self._truncate_to(target)
        return True

    async def _compress_step(self, summarize: Summarize) -> bool:
        for topic in self.topics:
            if not topic.summary:
                topic.summary = await summarize(topic.transcript())
                topic.messages = []
                return True
        if len(self.topics) > 1 or (self.topics and self.bulks):
            group, self.topics = self.topics[:TOPICS_PER_BULK], self.topics[TOPICS_PER_BULK:]
            text = "\n\n".join(t.summary for t in group)
            self.bulks.append(Bulk(summary=await summarize(text), topics=len(group)))
            return True
        if len(self.bulks) >= BULKS_MERGED:
            oldest, rest = self.bulks[:BULKS_MERGED], self.bulks[BULKS_MERGED:]
            text = "\n\n".join(b.summary for b in oldest)
            merged = Bulk(summary=await summarize(text), topics=sum(b.topics for b in oldest))
            self.bulks = [merged, *rest]
            return True
        if await self._summarize_current_middle(summarize):
            return True
        if self.bulks:
            self.bulks.pop(0)
            return True
        if self.topics:
            self.topics.pop(0)
            return True
        return False

    async def _summarize_current_middle(self, summarize: Summarize) -> bool:
        msgs = self.current.messages
        if len(msgs) <= KEEP_TAIL + 2:
            return False
        middle = msgs[1:-KEEP_TAIL]
        text = "\n\n".join(f"{m.role}: {m.text()}" for m in middle)
        summary = await summarize(text)
        self.counter += 1
        self.current.messages = [msgs[0], Message(False, summary, self.counter), *msgs[-KEEP_TAIL:]]
        return True

    def _truncate_big_messages(self, max_tokens: int) -> None:
        for topic in [*self.topics, self.current]:
            for m in topic.messages:
                if m.tokens() > max_tokens:
                    m.content = truncate_text(m.text(), max_tokens * CHARS_PER_TOKEN)

    def _truncate_to(self, target: int) -> None:
        """Fallback without a model: drop the oldest parts, then cut the current topic."""
        while self.tokens() > target and self.bulks:
            self.bulks.pop(0)
        while self.tokens() > target and self.topics:
            self.topics.pop(0)
        msgs = self.current.messages
        while self.tokens() > target and len(msgs) > KEEP_TAIL + 1:
            msgs.pop(1)  # keep the opening user message and the latest messages
        if self.tokens() > target and msgs:
            share = max(target // len(msgs), 16) * CHARS_PER_TOKEN
            for m in msgs:
                m.content = truncate_text(m.text(), share)

    # -- persistence ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "counter": self.counter,
            "max_tokens": self.max_tokens,
            "bulks": [b.to_dict() for b in self.bulks],
            "topics": [t.to_dict() for t in self.topics],
            "current": self.current.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> History:
        h = cls(max_tokens=int(d.get("max_tokens", 0)))
        h.counter = int(d.get("counter", 0))
        h.bulks = [Bulk.from_dict(b) for b in d.get("bulks", [])]
        h.topics = [Topic.from_dict(t) for t in d.get("topics", [])]
        h.current = Topic.from_dict(d.get("current", {}))
        return h
