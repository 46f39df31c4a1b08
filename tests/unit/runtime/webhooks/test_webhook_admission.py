"""AdmissionReview handling (kubereflector.runtime.webhooks.admission) without a server:
what a handler gets, how its answers become review responses (denials with causes,
warnings, the JSON Patch of a mutated copy), dry runs, old objects, and the error paths."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from typing import Any, TypedDict

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubereflector.models import ApiResource, register
from kubereflector.runtime.webhooks import (
    AdmissionRequest,
    AdmissionWebhook,
    Cause,
    Denied,
    ReviewError,
    UserInfo,
    Webhooks,
)
from kubereflector.runtime.webhooks._jsonpatch import diff, pointer
from kubereflector.testing.apiserver._patch import json_patch


class Widget(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


register(Widget, ApiResource("admission.test.example.com", "v1", "Widget", "widgets", True))


def review(
    operation: str = "CREATE",
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    **request: Any,
) -> bytes:
    body: dict[str, Any] = {
        "uid": "uid-1",
        "kind": {"group": "admission.test.example.com", "version": "v1", "kind": "Widget"},
        "resource": {
            "group": "admission.test.example.com",
            "version": "v1",
            "resource": "widgets",
        },
        "operation": operation,
        "name": "w",
        "namespace": "ns",
        "userInfo": {"username": "alice", "uid": "u", "groups": ["dev"], "extra": {"k": ["v"]}},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    body.update(request)
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}
    ).encode()


def widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.test.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": spec,
    }


def response(answer: bytes) -> dict[str, Any]:
    decoded = json.loads(answer)
    assert decoded["apiVersion"] == "admission.k8s.io/v1"
    assert decoded["kind"] == "AdmissionReview"
    assert decoded["response"]["uid"] == "uid-1"
    return dict(decoded["response"])


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    assert answer["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(answer["patch"]))
    return ops


def registered(kind: str = "validating", **options: Any) -> tuple[Webhooks, Any]:
    hooks = Webhooks()
    register = hooks.validator if kind == "validating" else hooks.defaulter
    return hooks, register(Widget, **options)


@pytest.mark.asyncio
async def test_a_validator_allows_and_gets_the_request() -> None:
    seen: list[tuple[Widget, AdmissionRequest[Widget]]] = []
    hooks, decorate = registered()

    @decorate
    def check(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        seen.append((obj, request))

    answer = response(await hooks.admission[0].review(review(obj=widget(size=1))))
    assert answer == {"uid": "uid-1", "allowed": True}
    obj, request = seen[0]
    assert obj["spec"] == {"size": 1}
    assert request.operation == "CREATE"
    assert request.kind.kind == "Widget"
    assert request.resource.resource == "widgets"
    assert (request.name, request.namespace) == ("w", "ns")
    assert request.user_info == UserInfo("alice", "u", ("dev",), {"k": ("v",)})
    assert request.old_object is None
    assert request.options == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert not request.dry_run


@pytest.mark.asyncio
async def test_a_denial_carries_its_message_code_causes_and_warnings() -> None:
    hooks, decorate = registered()

    @decorate
    async def check(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        raise Denied(
            "size is too large",
            causes=[Cause("spec.size", "must be at most 3")],
            warnings=["sizes above 3 are deprecated"],
        )

    answer = response(await hooks.admission[0].review(review(obj=widget(size=9))))
    assert answer["allowed"] is False
    assert answer["warnings"] == ["sizes above 3 are deprecated"]
    assert answer["status"] == {
        "status": "Failure",
        "message": "size is too large",
        "reason": "Invalid",
        "code": 422,
        "details": {
            "causes": [
                {
                    "reason": "FieldValueInvalid",
                    "message": "must be at most 3",
                    "field": "spec.size",
                }
            ]
        },
    }


@pytest.mark.asyncio
async def test_a_plain_denial_is_403_forbidden() -> None:
    assert Denied("no").status() == {
        "status": "Failure",
        "message": "no",
        "reason": "Forbidden",
        "code": 403,
    }
    assert Denied("slow down", code=429, reason="TooManyRequests").status()["code"] == 429
    with pytest.raises(ValueError, match=r"400..599"):
        Denied("ok?", code=200)
    with pytest.raises(TypeError, match="list of strings"):
        Denied("no", warnings="one")  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_warnings_are_answered_with_an_allowed_request() -> None:
    hooks, decorate = registered()

    @decorate
    def check(obj: Widget, request: AdmissionRequest[Widget]) -> list[str]:
        return ["size is ignored", "and so is colour"]

    answer = response(await hooks.admission[0].review(review(obj=widget(size=1))))
    assert answer == {
        "uid": "uid-1",
        "allowed": True,
        "warnings": ["size is ignored", "and so is colour"],
    }


@pytest.mark.asyncio
async def test_update_gets_the_old_object_and_delete_gets_it_as_obj() -> None:
    seen: list[tuple[Widget, AdmissionRequest[Widget]]] = []
    hooks, decorate = registered(operations=["UPDATE", "DELETE"])

    @decorate
    def check(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        seen.append((obj, request))

    webhook = hooks.admission[0]
    await webhook.review(review("UPDATE", widget(size=2), widget(size=1)))
    await webhook.review(review("DELETE", None, widget(size=1), dryRun=True))
    (new, update), (gone, delete) = seen
    assert new["spec"] == {"size": 2}
    assert update.old_object is not None
    assert update.old_object["spec"] == {"size": 1}
    assert gone["spec"] == {"size": 1}
    assert delete.object is None
    assert delete.dry_run


@pytest.mark.asyncio
async def test_a_defaulter_answers_the_patch_of_its_changes() -> None:
    hooks, decorate = registered("mutating")

    @decorate
    def default(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        obj["spec"].setdefault("size", 1)
        obj["spec"].pop("colour", None)
        obj["metadata"]["labels"] = {"app/name": "w"}

    original = widget(colour="red")
    answer = response(await hooks.admission[0].review(review(obj=original)))
    ops = patch_of(answer)
    assert json_patch(original, ops) == {
        **original,
        "metadata": {**original["metadata"], "labels": {"app/name": "w"}},
        "spec": {"size": 1},
    }
    assert {"op": "add", "path": "/metadata/labels", "value": {"app/name": "w"}} in ops


@pytest.mark.asyncio
async def test_a_defaulter_that_changes_nothing_answers_no_patch() -> None:
    hooks, decorate = registered("mutating")

    @decorate
    async def default(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        obj["spec"]["size"] = obj["spec"]["size"]

    answer = response(await hooks.admission[0].review(review(obj=widget(size=1))))
    assert answer == {"uid": "uid-1", "allowed": True}


@pytest.mark.asyncio
async def test_a_defaulter_changes_a_copy_not_the_request_it_was_sent() -> None:
    seen: list[AdmissionRequest[Widget]] = []
    hooks, decorate = registered("mutating")

    @decorate
    def default(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        seen.append(request)
        obj["spec"]["size"] = 5

    answer = response(await hooks.admission[0].review(review(obj=widget(size=1))))
    assert patch_of(answer) == [{"op": "replace", "path": "/spec/size", "value": 5}]
    assert seen[0].object is not None
    assert seen[0].object["spec"] == {"size": 5}


@pytest.mark.asyncio
async def test_plain_handlers_run_off_the_event_loop_and_coroutines_on_it() -> None:
    threads: list[bool] = []
    hooks = Webhooks()

    @hooks.validator(Widget, path="/plain", name="plain.admission.test.io")
    def plain(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        threads.append(threading.current_thread() is threading.main_thread())

    @hooks.validator(Widget, path="/async", name="async.admission.test.io")
    async def coroutine(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        threads.append(threading.current_thread() is threading.main_thread())

    for webhook in hooks.admission:
        await webhook.review(review(obj=widget()))
    assert threads == [False, True]


@pytest.mark.asyncio
async def test_a_handler_that_raises_is_denied_with_its_error_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hooks, decorate = registered()

    @decorate
    def check(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        raise KeyError("spec")

    answer = response(await hooks.admission[0].review(review(obj=widget())))
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    assert answer["status"]["message"] == "the webhook handler failed: KeyError: 'spec'"
    assert "Traceback" not in json.dumps(answer)
    (record,) = [r for r in caplog.records if r.name == "kubereflector.runtime.webhooks"]
    assert record.exc_info is not None
    assert "raised KeyError" in record.getMessage()


@pytest.mark.asyncio
async def test_a_handler_returning_something_odd_is_allowed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hooks, decorate = registered()

    @decorate
    def check(obj: Widget, request: AdmissionRequest[Widget]) -> Any:
        return "a warning, not a list"

    answer = response(await hooks.admission[0].review(review(obj=widget())))
    assert answer == {"uid": "uid-1", "allowed": True}
    assert "not str" in caplog.text


@pytest.mark.asyncio
async def test_a_slow_handler_is_denied_when_its_time_is_up() -> None:
    release = asyncio.Event()
    hooks, decorate = registered()

    @decorate
    async def slow(obj: Widget, request: AdmissionRequest[Widget]) -> None:
        await release.wait()

    async def expire(work: Any) -> Any:
        task = asyncio.ensure_future(work)
        await asyncio.sleep(0)
        task.cancel()
        raise TimeoutError

    answer = response(await hooks.admission[0].review(review(obj=widget()), timeout=expire))
    assert answer["allowed"] is False
    assert answer["status"]["message"] == "the webhook handler did not answer in time"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "the request body is empty"),
        (b"{", "the request body is not JSON"),
        (b"[]", "must be a admission.k8s.io/v1 AdmissionReview object"),
        (
            b'{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}',
            "only admission.k8s.io/v1 is served",
        ),
        (
            b'{"apiVersion":"v1","kind":"ConfigMap"}',
            "expected a admission.k8s.io/v1 AdmissionReview, got v1 ConfigMap",
        ),
        (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}', "has no request"),
        (
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}',
            "has no uid",
        ),
    ],
)
@pytest.mark.asyncio
async def test_bad_reviews_are_refused_naming_the_problem(body: bytes, message: str) -> None:
    hooks, decorate = registered()
    decorate(lambda obj, request: None)
    with pytest.raises(ReviewError, match=message):
        await hooks.admission[0].review(body)


@pytest.mark.asyncio
async def test_bad_request_fields_are_refused_naming_them() -> None:
    hooks, decorate = registered("mutating")
    decorate(lambda obj, request: None)
    webhook = hooks.admission[0]
    with pytest.raises(ReviewError, match="operation must be one of"):
        await webhook.review(review("PATCH", widget()))
    with pytest.raises(ReviewError, match=r"request.object must be an object"):
        await webhook.review(review("CREATE", [1]))  # type: ignore[arg-type]
    with pytest.raises(ReviewError, match=r"request.kind"):
        await webhook.review(review("CREATE", widget(), kind="Widget"))
    with pytest.raises(ReviewError, match=r"needs request.object"):
        await webhook.review(review("CREATE", None))


def test_an_admission_webhook_checks_its_handler_and_type() -> None:
    with pytest.raises(TypeError, match="must be callable"):
        AdmissionWebhook("validating", "v.a.b.io", "/v", 3, ())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'validating' or 'mutating'"):
        AdmissionWebhook("auditing", "v.a.b.io", "/v", print, ())  # type: ignore[arg-type]


# -- the JSON Patch of a change ------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab/~", max_size=3),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text("ab/~", max_size=3), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(old=json_values, new=json_values)
def test_the_patch_turns_the_old_document_into_the_new_one(old: Any, new: Any) -> None:
    before = msgspec.json.decode(msgspec.json.encode(old))
    ops = diff(old, new)
    assert old == before  # not modified
    assert json_patch(old, ops) == new
    if msgspec.json.encode(old) == msgspec.json.encode(new):  # equal as JSON (not True == 1)
        assert ops == []


def test_the_patch_is_small_for_small_changes() -> None:
    old = {"a": {"b": [1, 2, 3], "c": "x"}, "d": True}
    assert diff(old, {"a": {"b": [1, 2, 3, 4], "c": "x"}, "d": True}) == [
        {"op": "add", "path": "/a/b/3", "value": 4}
    ]
    assert diff(old, {"a": {"b": [1, 9, 3], "c": "x"}, "d": True}) == [
        {"op": "replace", "path": "/a/b/1", "value": 9}
    ]
    assert diff(old, {"a": {"b": [1], "c": "x"}, "d": True}) == [
        {"op": "replace", "path": "/a/b", "value": [1]}
    ]
    assert diff({"n": 1}, {"n": True}) == [{"op": "replace", "path": "/n", "value": True}]
    assert diff({"n": 1}, {"n": 1.0}) == []


def test_pointers_escape_tilde_and_slash() -> None:
    assert pointer(["metadata", "labels", "app.kubernetes.io/name", "a~b"]) == (
        "/metadata/labels/app.kubernetes.io~1name/a~0b"
    )
