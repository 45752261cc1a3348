"""The reply stream shows the extensions masked text only (issue #17, point 8): a secret
split across chunks never appears, not even its first characters, and what was held back
is shown once the reply is complete."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from durability import Masker
from python.helpers.models import ModelResult
from python.helpers.reply_stream import ReplyStream

pytestmark = pytest.mark.unit

SECRET = "sk-stream-9d8c7b6a"


class _Agent:
    def __init__(self) -> None:
        self.context = SimpleNamespace(masker=Masker({"STREAM_KEY": SECRET}))
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def extensions(self, point: str, **kwargs: Any) -> None:
        data = kwargs.get("stream_data") or {"text": kwargs.get("text")}
        self.seen.append((point, dict(data)))

    async def handle_intervention(self, progress: str = "") -> None:
        return None


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _feed(stream: ReplyStream, callback: str, text: str) -> None:
    full = ""
    for piece in _pieces(text, 3):
        full += piece
        await getattr(stream, callback)(piece, full)


async def test_no_extension_sees_a_secret_or_its_start():
    agent = _Agent()
    stream = ReplyStream(agent)  # type: ignore[arg-type]
    reasoning = f"the key is {SECRET}, and it ends with sk"
    reply = json.dumps({"tool_name": "response", "tool_args": {"text": f"key {SECRET}"}})
    await _feed(stream, "on_reasoning", reasoning)
    await _feed(stream, "on_response", reply)
    masker = agent.context.masker
    await stream.finish(ModelResult(masker.mask(reply), masker.mask(reasoning)))
    for _point, data in agent.seen:
        for value in data.values():
            text = str(value)
            assert SECRET not in text
            for size in range(3, len(SECRET)):  # no prefix of the secret at a chunk's end
                assert not text.endswith(SECRET[:size]), (text, size)
    reasoning_texts = [d["text"] for p, d in agent.seen if p == "reasoning_stream"]
    assert reasoning_texts[-1] == "the key is §§secret(STREAM_KEY), and it ends with sk"
    response_texts = [d["text"] for p, d in agent.seen if p == "response_stream"]
    assert json.loads(response_texts[-1])["tool_args"]["text"] == "key §§secret(STREAM_KEY)"
    assert stream.reply(masker.mask(reply)) == masker.mask(reply)
