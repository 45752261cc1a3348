"""The one exception -> response table and the input validators."""

from __future__ import annotations

import json

import pytest
from starlette.requests import Request

from python.helpers import api

pytestmark = pytest.mark.unit


def _body(response) -> dict:
    return json.loads(response.body)


def test_api_error_keeps_code_message_and_status():
    response = api.exception_to_response(api.ApiError("context_not_found", "Chat 'x'.", 404))
    assert response.status_code == 404
    assert _body(response) == {"error": {"code": "context_not_found", "message": "Chat 'x'."}}


def test_duck_typed_errors_use_their_code_and_http_status():
    class RunHeld(Exception):
        code = "run_held"
        http_status = 409

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
    with pytest.raises(api.ApiError) as info:
        getter(data, key) if getter is not api.get_number else getter(data, key, default=1.0)
    assert info.value.code == "bad_request"
    assert info.value.status == 400
    assert key in info.value.message


def test_validators_accept_good_values_and_defaults():
    assert api.get_str({"a": "x"}, "a") == "x"
    assert api.get_str({}, "a", default="d") == "d"
    assert api.get_int({"n": "7"}, "n") == 7
    assert api.get_int({}, "n", default=3) == 3
    assert api.get_bool({"b": "true"}, "b") is True
    assert api.get_number({"h": 2}, "h", default=24.0) == 2.0
    with pytest.raises(api.ApiError):
        api.get_str({}, "a", required=True)
    with pytest.raises(api.ApiError):
        api.get_int({"n": -1}, "n", minimum=0)
    with pytest.raises(api.ApiError):
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

    class Held(Exception):
        code = "run_held"
        http_status = 409

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
    class Broken(Exception):
        code = "broken"
        http_status = 409

        def to_dict(self):
            raise RuntimeError("no")

    class Nan(Broken):
        def to_dict(self):
            return {"value": float("nan")}

    for cls in (Broken, Nan):
        error = _body(api.exception_to_response(cls("refused")))["error"]
        assert error == {"code": "broken", "message": "refused"}


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
    with pytest.raises(api.ApiError) as info:
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
