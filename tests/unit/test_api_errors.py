"""The one code -> status table at the edge (python/server/errors.py) and the validators."""

from __future__ import annotations

import json

import pytest
from starlette.requests import Request

from durability.errors import DurabilityError, RunHeld
from python.helpers.errors import (
    BadRequest,
    ChatExists,
    ChatNotFound,
    ChatStopped,
    DomainError,
    ShuttingDown,
    TaskBusy,
)
from python.server import api, errors
from python.server.http_limits import BodyRefused

pytestmark = pytest.mark.unit


def _body(response) -> dict:
    return json.loads(response.body)


def test_api_error_keeps_code_and_message_and_gets_the_tables_status():
    response = api.exception_to_response(api.ApiError("context_not_found", "Chat 'x'."))
    assert response.status_code == 404
    assert _body(response) == {"error": {"code": "context_not_found", "message": "Chat 'x'."}}


def test_typed_errors_of_every_family_use_their_code_and_the_tables_status():
    class RunHeld(DomainError):
        code = "run_held"

    response = api.exception_to_response(RunHeld("the run is held"))
    assert response.status_code == 409
    assert _body(response)["error"] == {"code": "run_held", "message": "the run is held"}


def test_errors_matched_by_class_name_along_the_mro():
    class ModelError(Exception):
        pass

    class ProviderDown(ModelError):
        pass

    response = api.exception_to_response(ProviderDown("provider said 500"))
    assert response.status_code == 502
    assert _body(response)["error"]["code"] == "model_error"


def test_unknown_exception_is_internal_error_without_a_trace(caplog):
    try:
        raise RuntimeError("secret detail in /path/file.py")
    except RuntimeError as exc:
        response = api.exception_to_response(exc)
    body = _body(response)
    assert response.status_code == 500
    assert body["error"]["code"] == "internal_error"
    assert "Traceback" not in response.body.decode()
    assert "secret detail" not in response.body.decode()
    assert "Traceback" in caplog.text  # the trace goes to the server log


@pytest.mark.parametrize(
    ("getter", "data", "key"),
    [
        (api.get_str, {"text": 5}, "text"),
        (api.get_int, {"n": "x"}, "n"),
        (api.get_int, {"n": True}, "n"),
        (api.get_int, {"n": 2**63}, "n"),
        (api.get_int, {"n": -(10**30)}, "n"),
        (api.get_number, {"n": 10**400}, "n"),
        (api.get_bool, {"b": "maybe"}, "b"),
        (api.get_dict, {"d": []}, "d"),
        (api.get_list, {"l": {}}, "l"),
    ],
)
def test_wrong_types_are_bad_request(getter, data, key):
    with pytest.raises(BadRequest) as info:
        getter(data, key) if getter is not api.get_number else getter(data, key, default=1.0)
    assert info.value.code == "bad_request"
    assert errors.STATUS[info.value.code] == 400
    assert key in info.value.message


def test_validators_accept_good_values_and_defaults():
    assert api.get_str({"a": "x"}, "a") == "x"
    assert api.get_str({}, "a", default="d") == "d"
    assert api.get_int({"n": "7"}, "n") == 7
    assert api.get_int({}, "n", default=3) == 3
    assert api.get_bool({"b": "true"}, "b") is True
    assert api.get_number({"h": 2}, "h", default=24.0) == 2.0
    with pytest.raises(BadRequest):
        api.get_str({}, "a", required=True)
    with pytest.raises(BadRequest):
        api.get_int({"n": -1}, "n", minimum=0)
    with pytest.raises(BadRequest):
        api.get_number({"h": 0}, "h", default=1.0)


def test_secrets_are_masked_in_error_responses_and_the_server_log(monkeypatch, caplog):
    secret = "sk-very-secret-value-123"
    monkeypatch.setenv("API_KEY_OPENAI", secret)
    try:
        raise RuntimeError(f"provider rejected key {secret}")
    except RuntimeError as exc:
        response = api.exception_to_response(exc)
    assert secret not in response.body.decode()
    assert secret not in caplog.text
    assert "§§secret(API_KEY_OPENAI)" in caplog.text

    class Held(DurabilityError):
        code = "run_held"

    held = api.exception_to_response(Held(f"held while using {secret}"))
    assert secret not in held.body.decode()
    assert "§§secret(API_KEY_OPENAI)" in held.body.decode()


def test_typed_errors_carry_their_fields_into_the_body(monkeypatch):
    from durability.errors import StaleVersion

    secret = "sk-another-secret-value-456"
    monkeypatch.setenv("API_KEY_OPENAI", secret)
    exc = StaleVersion(
        "the run changed since this decision was made",
        run_id="r1",
        version=3,
        current_version=5,
        status="needs_attention",
        detail={"note": f"typed {secret}", "when": object()},
    )
    exc.fields["code"] = "not-this"  # a field never replaces the code
    response = api.exception_to_response(exc)
    assert response.status_code == 409
    error = _body(response)["error"]
    assert error["code"] == "stale_version"
    assert error["message"] == "the run changed since this decision was made"
    assert (error["current_version"], error["status"]) == (5, "needs_attention")
    assert (error["run_id"], error["version"]) == ("r1", 3)
    assert error["detail"]["note"] == "typed §§secret(API_KEY_OPENAI)"
    assert error["detail"]["when"].startswith("<object object")
    assert secret not in response.body.decode()


def test_fields_that_cannot_be_sent_are_left_out():
    class Broken(DomainError):
        code = "stale_revision"

        def to_dict(self):
            raise RuntimeError("no")

    class Nan(Broken):
        def to_dict(self):
            return {"value": float("nan")}

    for cls in (Broken, Nan):
        error = _body(api.exception_to_response(cls("refused")))["error"]
        assert error == {"code": "stale_revision", "message": "refused"}


def _Request(body: bytes) -> Request:
    """A real Starlette request whose body arrives in one message."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/x",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
    }
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "not an object, deep"),
        (b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}", "nested"),
        (b'{"a": NaN}', "not valid JSON"),
        (b'{"a": -Infinity}', "not valid JSON"),
        (b'{"a": 1e400}', "not valid JSON"),
        (b'{"a": "\\ud800"}', "not valid Unicode"),
        (b'{"\\udfff": 1}', "not valid Unicode"),
    ],
)
async def test_bodies_nothing_downstream_could_handle_are_bad_requests(raw, why):
    with pytest.raises(DomainError) as info:
        await api.read_input(_Request(raw))
    assert info.value.code == "bad_request"


async def test_a_body_at_the_depth_limit_is_read():
    raw = b'{"a": ' + b"[" * 63 + b"]" * 63 + b', "b": "\xc3\xa9 \\ud83d\\ude00"}'
    data = await api.read_input(_Request(raw))
    assert data["b"] == "\u00e9 \U0001f600"


def test_responses_escape_text_that_is_not_valid_unicode():
    response = api.ApiJSONResponse({"log": "broken \ud800 output", "ok": "\u00e9"})
    assert json.loads(response.body) == {"log": "broken \ud800 output", "ok": "\u00e9"}
    assert api.ApiJSONResponse({"ok": "\u00e9"}).body == '{"ok":"\u00e9"}'.encode()


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (ChatNotFound("Chat 'x' not found."), 404),
        (ChatExists("Chat 'x' already exists."), 409),
        (ChatStopped("The chat was stopped before it answered."), 409),
        (TaskBusy("The task's chat is working; run it later."), 409),
        (ShuttingDown("The server is shutting down."), 503),
        (BadRequest("'path' is too long", field="path"), 400),
        (RunHeld("The task's chat has a run waiting for a decision (Recovery)."), 409),
        (BodyRefused("payload_too_large", "The body is too large.", limit=5), 413),
    ],
)
def test_the_glues_refusals_answer_with_the_status_they_always_had(exc, status):
    response = api.exception_to_response(exc)
    assert response.status_code == status
    assert _body(response)["error"] == exc.to_dict()


def test_a_code_the_table_lacks_is_a_500_that_keeps_its_code():
    class Unmapped(DomainError):
        code = "not_in_the_table"

    response = api.exception_to_response(Unmapped("refused"))
    assert response.status_code == 500
    assert _body(response)["error"] == {"code": "not_in_the_table", "message": "refused"}
