"""Custom resources are pruned, defaulted and validated as kube-apiserver 1.28 does it.

Each test installs a CRD (written here as a manifest) and sends the same objects to
the target: the emulator, or a real kube-apiserver with KUBEREFLECTOR_TEST_KUBECONFIG
(each test's CRD has a group of its own and is deleted afterwards). The expected
answers below are what kube-apiserver v1.28.7 answered. kube walks an object's fields
in Go's random map order, so when an object has several errors the order of the
causes varies from one request to the next: the tests compare the causes as a set,
and check that the message lists the causes in the order the server gave them.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from conftest import Target

pytestmark = pytest.mark.asyncio

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@dataclass
class Answer:
    status: int
    body: Any
    warnings: list[str] = field(default_factory=list)

    @property
    def causes(self) -> list[tuple[str, str, str]]:
        """(field, reason, message) of each cause, sorted."""
        causes = self.body.get("details", {}).get("causes", [])
        return sorted((c.get("field", ""), c["reason"], c["message"]) for c in causes)

    def check_message(self, subject: str) -> None:
        """The message lists the causes, in the server's order, as kube joins them."""
        texts = list(
            dict.fromkeys(
                f"{c.get('field', '')}: {c['message']}" for c in self.body["details"]["causes"]
            )
        )
        joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
        assert self.body["message"] == f"{subject} is invalid: {joined}"


class Http:
    """Raw requests to the target, answering status, body and warnings."""

    def __init__(self, target: Target, session: aiohttp.ClientSession) -> None:
        self.target = target
        self.session = session

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        **params: str,
    ) -> Answer:
        config = self.target.client.config
        auth = await config.auth.authorize()
        headers = {**auth.headers, "Content-Type": content_type, "Accept": "application/json"}
        data = None if body is None else json.dumps(body)
        async with self.session.request(
            method, config.server + path, data=data, headers=headers, params=params
        ) as resp:
            text = await resp.text()
            warnings = [_warning_text(w) for w in resp.headers.getall("Warning", [])]
            return Answer(resp.status, json.loads(text) if text else None, warnings)


def _warning_text(header: str) -> str:
    # '299 - "unknown field \"spec.x\""' -> 'unknown field "spec.x"'
    text = header.split(" ", 2)[2]
    return str(json.loads(text))


@asynccontextmanager
async def http(target: Target) -> AsyncIterator[Http]:
    config = target.client.config
    context: ssl.SSLContext | bool = False
    if config.server.startswith("https"):
        context = ssl.create_default_context(
            cadata=config.ca_data.decode() if config.ca_data else None
        )
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        yield Http(target, session)


@dataclass
class Crd:
    http: Http
    group: str
    kind: str
    plural: str
    namespace: str

    @property
    def path(self) -> str:
        return f"/apis/{self.group}/v1/namespaces/{self.namespace}/{self.plural}"

    def obj(self, name: str, spec: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "apiVersion": f"{self.group}/v1",
            "kind": self.kind,
            "metadata": {"name": name},
        }
        if spec is not None:
            body["spec"] = dict(spec)
        body.update(extra)
        return body

    def subject(self, name: str) -> str:
        return f'{self.kind}.{self.group} "{name}"'

    async def create(self, obj: Any, **params: str) -> Answer:
        return await self.http.call("POST", self.path, obj, **params)

    async def get(self, name: str) -> Answer:
        return await self.http.call("GET", f"{self.path}/{name}")

    async def put(self, obj: Any, subresource: str = "", **params: str) -> Answer:
        tail = f"/{subresource}" if subresource else ""
        name = obj["metadata"]["name"]
        return await self.http.call("PUT", f"{self.path}/{name}{tail}", obj, **params)

    async def patch(self, name: str, patch: Any, kind: str = "merge", **params: str) -> Answer:
        content_type = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "apply": "application/apply-patch+yaml",
        }[kind]
        return await self.http.call(
            "PATCH", f"{self.path}/{name}", patch, content_type=content_type, **params
        )


def crd_manifest(
    group: str, kind: str, plural: str, schema: Mapping[str, Any], *, status: bool
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [version],
        },
    }


async def _served(client: Http, crd: Crd) -> None:
    """Wait until the real server serves the new resource: its CRD Established, then
    its collection answering (kube's handler sees the CRD a moment after that)."""
    name = f"{crd.plural}.{crd.group}"
    for _ in range(200):
        answer = await client.call("GET", f"{CRDS}/{name}")
        conditions = ((answer.body or {}).get("status") or {}).get("conditions") or []
        established = any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
        if established and (await client.call("GET", crd.path)).status == 200:
            return
        await asyncio.sleep(0.05)  # a real server's controllers run on their own time
    raise AssertionError(f"{name} was not served")


@asynccontextmanager
async def custom_resource(
    target: Target, schema: Mapping[str, Any], *, status: bool = False, kind: str = "Probe"
) -> AsyncIterator[Crd]:
    group = f"{target.namespace}.kr.dev"
    plural = kind.lower() + "s"
    async with http(target) as client:
        manifest = crd_manifest(group, kind, plural, schema, status=status)
        answer = await client.call("POST", CRDS, manifest)
        assert answer.status == 201, answer.body
        crd = Crd(client, group, kind, plural, target.namespace)
        try:
            if target.emulator is None:
                await _served(client, crd)
            yield crd
        finally:
            await client.call("DELETE", f"{CRDS}/{plural}.{group}")


PROBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "ex": {
                    "type": "number",
                    "exclusiveMinimum": True,
                    "minimum": 0,
                    "exclusiveMaximum": True,
                    "maximum": 1.5,
                },
                "mult": {"type": "integer", "multipleOf": 3},
                "fmult": {"type": "number", "multipleOf": 0.5},
                "color": {"type": "string", "enum": ["red", "green"]},
                "numEnum": {"type": "integer", "enum": [1, 2]},
                "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": 2,
                },
                "set": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-list-type": "set",
                },
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                    },
                },
                "labels": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "minProperties": 1,
                    "maxProperties": 2,
                },
                "ios": {"x-kubernetes-int-or-string": True},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "nul": {"type": "string", "nullable": True},
                "flag": {"type": "boolean"},
                "when": {"type": "string", "format": "date-time"},
                "uid": {"type": "string", "format": "uuid"},
                "defaulted": {"type": "string", "default": "dflt"},
                "obj": {
                    "type": "object",
                    "default": {},
                    "properties": {"inner": {"type": "integer", "default": 7}},
                },
                "emb": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "integer", "minimum": 0}}},
    },
}


# -- pruning and defaulting -------------------------------------------------------------------


async def test_unknown_fields_are_pruned_and_defaults_applied(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        obj = crd.obj(
            "ok",
            {"size": 3.0, "unknown": 1, "obj": None, "nul": None, "flag": None},
            top=1,
        )
        obj["metadata"]["bogus"] = 1
        obj["spec"]["free"] = {"x": {"y": 1}}
        obj["spec"]["emb"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ok", "bogus": 1},
            "x": 1,
        }
        answer = await crd.create(obj)
        assert answer.status == 201, answer.body
        assert answer.body["spec"] == {
            "defaulted": "dflt",
            "emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok"}, "x": 1},
            "free": {"x": {"y": 1}},
            "nul": None,
            "obj": {"inner": 7},
            "size": 3,
        }
        assert "top" not in answer.body
        assert "bogus" not in answer.body["metadata"]
        assert answer.warnings == [
            'unknown field "metadata.bogus"',
            'unknown field "spec.unknown"',
            'unknown field "top"',
            'unknown field "spec.emb.metadata.bogus"',
        ]
        # Defaulted fields belong to the writer, as if it had sent them.
        fields = answer.body["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
        assert {"f:defaulted", "f:obj", "f:size"} <= set(fields)
        assert (await crd.get("ok")).body["spec"] == answer.body["spec"]


async def test_field_validation_strict_names_every_unknown_field(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        obj = crd.obj("s1", {"size": 1, "zzz": 1, "yyy": {"a": 1}, "free": {"q": 1}}, top=1)
        obj["metadata"]["bogus"] = 1
        answer = await crd.create(obj, fieldValidation="Strict")
        assert answer.status == 400
        assert answer.body["reason"] == "BadRequest"
        assert answer.body["message"] == (
            'Probe in version "v1" cannot be handled as a Probe: strict decoding error: '
            'unknown field "metadata.bogus", unknown field "spec.yyy", unknown field '
            '"spec.zzz", unknown field "top"'
        )
        ignored = await crd.create(obj, fieldValidation="Ignore")
        assert ignored.status == 201
        assert ignored.warnings == []
        assert ignored.body["spec"]["free"] == {"q": 1}


async def test_patches_check_the_fields_of_the_patched_object(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        assert (await crd.create(crd.obj("p", {"size": 1}))).status == 201
        warned = await crd.patch("p", [{"op": "add", "path": "/spec/zz", "value": 1}], "json")
        assert warned.status == 200
        assert warned.warnings == ['unknown field "spec.zz"']
        assert "zz" not in warned.body["spec"]
        strict = await crd.patch("p", {"spec": {"q": 3}}, fieldValidation="Strict")
        assert strict.status == 422
        assert strict.body["reason"] == "Invalid"
        [cause] = strict.body["details"]["causes"]
        assert cause["field"] == "patch"
        prefix, suffix = 'Invalid value: "', '": strict decoding error: unknown field "spec.q"'
        assert cause["message"].startswith(prefix)
        assert cause["message"].endswith(suffix)
        quoted = json.loads(cause["message"][len(prefix) - 1 : -len(suffix) + 1])
        patched = json.loads(quoted)
        assert patched["spec"] == {"defaulted": "dflt", "obj": {"inner": 7}, "q": 3, "size": 1}
        assert strict.body["message"] == f' "" is invalid: patch: {cause["message"]}'
        assert set(strict.body["details"]) == {"causes"}


async def test_apply_of_an_unknown_field_fails_whatever_the_field_validation(
    target: Target,
) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        config = crd.obj("a1", {"size": 2, "zz": 1})
        for params in ({}, {"fieldValidation": "Ignore"}):
            answer = await crd.patch("a1", config, "apply", fieldManager="t", **params)
            assert answer.status == 500
            assert answer.body["message"] == (
                f"failed to create typed patch object (/a1; {crd.group}/v1, Kind=Probe): "
                ".spec.zz: field not declared in schema"
            )
        applied = await crd.patch("a1", crd.obj("a1", {"size": 2}), "apply", fieldManager="t")
        assert applied.status == 201
        assert applied.body["spec"] == {"defaulted": "dflt", "obj": {"inner": 7}, "size": 2}
        # An apply's defaults are not the applier's: it owns what it sent.
        [entry] = applied.body["metadata"]["managedFields"]
        assert entry["fieldsV1"] == {"f:spec": {"f:size": {}}}


async def test_a_new_default_shows_on_objects_stored_before_it(target: Target) -> None:
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    }
    async with custom_resource(target, schema) as crd:
        created = await crd.create(crd.obj("x", {"a": 1}))
        assert created.status == 201
        name = f"{crd.plural}.{crd.group}"
        current = (await crd.http.call("GET", f"{CRDS}/{name}")).body
        properties = current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        properties["spec"]["properties"]["b"] = {"type": "string", "default": "bee"}
        assert (await crd.http.call("PUT", f"{CRDS}/{name}", current)).status == 200
        for _ in range(100):  # the real server reloads the CRD's schema on its own time
            read = await crd.get("x")
            if "b" in read.body["spec"] or target.emulator is not None:
                break
            await asyncio.sleep(0.05)
        assert read.body["spec"] == {"a": 1, "b": "bee"}
        rv = created.body["metadata"]["resourceVersion"]
        assert read.body["metadata"]["resourceVersion"] == rv


# -- validation -------------------------------------------------------------------------------


async def test_values_out_of_bounds_get_kubes_causes(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        spec = {
            "size": 11,
            "ex": 1.5,
            "mult": 4,
            "fmult": 0.7,
            "color": "blue",
            "numEnum": 3,
            "name": "A",
            "tags": [],
            "labels": {},
            "flag": "yes",
            "when": "nope",
            "uid": "x",
            "ios": 1.5,
        }
        answer = await crd.create(crd.obj("bad1", spec))
        assert answer.status == 422
        assert answer.body["reason"] == "Invalid"
        assert answer.body["details"]["name"] == "bad1"
        assert answer.body["details"]["group"] == crd.group
        assert answer.body["details"]["kind"] == "Probe"
        answer.check_message(crd.subject("bad1"))
        invalid, type_invalid, unsupported = (
            "FieldValueInvalid",
            "FieldValueTypeInvalid",
            "FieldValueNotSupported",
        )
        assert answer.causes == sorted(
            [
                (
                    "spec.color",
                    unsupported,
                    'Unsupported value: "blue": supported values: "red", "green"',
                ),
                (
                    "spec.ex",
                    invalid,
                    "Invalid value: 1.5: spec.ex in body should be less than 1.5",
                ),
                (
                    "spec.flag",
                    type_invalid,
                    'Invalid value: "string": spec.flag in body must be of type boolean: "string"',
                ),
                (
                    "spec.fmult",
                    invalid,
                    "Invalid value: 0.7: spec.fmult in body should be a multiple of 0.5",
                ),
                (
                    "spec.ios",
                    type_invalid,
                    'Invalid value: "number": spec.ios in body must be of type '
                    'integer,string: "number"',
                ),
                (
                    "spec.labels",
                    invalid,
                    "Invalid value: 0: spec.labels in body should have at least 1 properties",
                ),
                (
                    "spec.mult",
                    invalid,
                    "Invalid value: 4: spec.mult in body should be a multiple of 3",
                ),
                (
                    "spec.name",
                    invalid,
                    'Invalid value: "A": spec.name in body should be at least 2 chars long',
                ),
                ("spec.numEnum", unsupported, 'Unsupported value: 3: supported values: "1", "2"'),
                (
                    "spec.size",
                    invalid,
                    "Invalid value: 11: spec.size in body should be less than or equal to 10",
                ),
                (
                    "spec.tags",
                    invalid,
                    "Invalid value: 0: spec.tags in body should have at least 1 items",
                ),
                (
                    "spec.uid",
                    type_invalid,
                    'Invalid value: "x": spec.uid in body must be of type uuid: "x"',
                ),
                (
                    "spec.when",
                    type_invalid,
                    'Invalid value: "nope": spec.when in body must be of type date-time: "nope"',
                ),
            ]
        )


async def test_types_lengths_lists_and_embedded_resources(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        spec = {
            "size": "3",
            "name": "abcdefg",
            "tags": ["a", "b", "c"],
            "labels": {"a": "1", "b": "2", "c": "3"},
            "set": ["a", "a"],
            "ports": [{"name": "a"}, {"name": "a", "port": 2}],
            "ex": 0,
            "emb": {"metadata": {"name": "X_"}},
        }
        answer = await crd.create(crd.obj("bad2", spec))
        assert answer.status == 422
        answer.check_message(crd.subject("bad2"))
        assert answer.causes == sorted(
            [
                ("spec.emb.apiVersion", "FieldValueRequired", "Required value: must not be empty"),
                ("spec.emb.kind", "FieldValueRequired", "Required value: must not be empty"),
                (
                    "spec.ex",
                    "FieldValueInvalid",
                    "Invalid value: 0: spec.ex in body should be greater than 0",
                ),
                ("spec.labels", "FieldValueTooMany", "Too many: 3: must have at most 2 items"),
                ("spec.name", "FieldValueTooLong", "Too long: may not be longer than 5"),
                (
                    "spec.ports[1]",
                    "FieldValueDuplicate",
                    'Duplicate value: map[string]interface {}{"name":"a"}',
                ),
                ("spec.set[1]", "FieldValueDuplicate", 'Duplicate value: "a"'),
                (
                    "spec.size",
                    "FieldValueTypeInvalid",
                    'Invalid value: "string": spec.size in body must be of type integer: "string"',
                ),
                ("spec.tags", "FieldValueTooMany", "Too many: 3: must have at most 2 items"),
            ]
        )
        nested = await crd.create(
            crd.obj("bad3", {"size": 1.5, "ports": [{"port": "x"}], "labels": {"k": 1}})
        )
        assert nested.status == 422
        nested.check_message(crd.subject("bad3"))
        assert nested.causes == sorted(
            [
                (
                    "spec.labels.k",
                    "FieldValueTypeInvalid",
                    'Invalid value: "integer": spec.labels.k in body must be of type string: '
                    '"integer"',
                ),
                ("spec.ports[0].name", "FieldValueRequired", "Required value"),
                (
                    "spec.ports[0].port",
                    "FieldValueTypeInvalid",
                    'Invalid value: "string": spec.ports[0].port in body must be of type '
                    'integer: "string"',
                ),
                (
                    "spec.size",
                    "FieldValueTypeInvalid",
                    'Invalid value: "number": spec.size in body must be of type integer: "number"',
                ),
            ]
        )


async def test_required_fields_and_valid_edge_values(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA) as crd:
        missing = await crd.create(crd.obj("bad4", {}))
        assert missing.status == 422
        assert (
            missing.body["message"]
            == f"{crd.subject('bad4')} is invalid: spec.size: Required value"
        )
        assert missing.causes == [("spec.size", "FieldValueRequired", "Required value")]
        assert (await crd.create(crd.obj("nospec"))).status == 201
        edge = {"size": 10, "ex": 1.25, "fmult": 1.5, "ios": "x", "when": "2024-01-02T03:04:05Z"}
        answer = await crd.create(crd.obj("edge", edge))
        assert answer.status == 201, answer.body
        negative_zero = await crd.create(crd.obj("zero", {"size": 1, "ex": -0.0}))
        assert negative_zero.status == 422
        assert negative_zero.causes == [
            (
                "spec.ex",
                "FieldValueInvalid",
                "Invalid value: -0: spec.ex in body should be greater than 0",
            )
        ]


async def test_updates_and_patches_are_validated(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA, status=True) as crd:
        created = (await crd.create(crd.obj("u", {"size": 1}))).body
        bad = {**created, "spec": {"size": 100}}
        answer = await crd.put(bad)
        assert answer.status == 422
        assert answer.causes == [
            (
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: 100: spec.size in body should be less than or equal to 10",
            )
        ]
        patched = await crd.patch("u", {"spec": {"size": 0, "name": "B"}})
        assert patched.status == 422
        patched.check_message(crd.subject("u"))
        assert patched.causes == [
            (
                "spec.name",
                "FieldValueInvalid",
                'Invalid value: "B": spec.name in body should be at least 2 chars long',
            ),
            (
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ),
        ]
        applied = await crd.patch(
            "u", crd.obj("u", {"size": 20}), "apply", fieldManager="t", force="true"
        )
        assert applied.status == 422
        assert applied.causes == [
            (
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: 20: spec.size in body should be less than or equal to 10",
            )
        ]


async def test_the_status_subresource_checks_status_by_its_own_schema(target: Target) -> None:
    async with custom_resource(target, PROBE_SCHEMA, status=True) as crd:
        created = (await crd.create(crd.obj("st", {"size": 1}))).body
        # The spec of a status write is ignored, even when it would be invalid.
        answer = await crd.put(
            {**created, "spec": {"size": 100}, "status": {"ready": -1}}, "status"
        )
        assert answer.status == 422
        assert answer.body["message"] == (
            f"{crd.subject('st')} is invalid: ready: Invalid value: -1: ready in body should "
            "be greater than or equal to 0"
        )
        assert answer.causes == [
            (
                "ready",
                "FieldValueInvalid",
                "Invalid value: -1: ready in body should be greater than or equal to 0",
            )
        ]
        ok = await crd.put({**created, "spec": {"size": 100}, "status": {"ready": 2}}, "status")
        assert ok.status == 200, ok.body
        assert ok.body["spec"]["size"] == 1
        assert ok.body["status"] == {"ready": 2}


# -- CEL rules --------------------------------------------------------------------------------

RULES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                {"rule": "self.min < 100"},
                {
                    "rule": "!has(self.name) || self.name.startsWith('a')",
                    "messageExpression": "'name ' + self.name + ' must start with a'",
                    "reason": "FieldValueForbidden",
                    "fieldPath": ".name",
                },
                {
                    "rule": "self.max == oldSelf.max || self.max > oldSelf.max",
                    "message": "max may only grow",
                },
                {"rule": "self.tags.all(t, t.size() < 4)", "message": "short tags"},
            ],
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer", "maximum": 1000},
                "name": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self.size() > 1", "message": "too short"}
                    ],
                },
                "tags": {
                    "type": "array",
                    "default": [],
                    "items": {
                        "type": "string",
                        "x-kubernetes-validations": [{"rule": "self != 'bad'"}],
                    },
                },
                "imm": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "imm is immutable"}
                    ],
                },
                "m": {
                    "type": "object",
                    "additionalProperties": {"type": "integer"},
                    "x-kubernetes-validations": [
                        {"rule": "self.all(k, self[k] > 0)", "message": "positive"}
                    ],
                },
                "text": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {
                            "rule": "self.lowerAscii().split(',').size() == 2 && "
                            "self.indexOf(',') > 0 && [3, 1].sum() == 4 && "
                            "self.find('[0-9]+') == '12' && isURL('https://a.b/c')",
                            "message": "kube's libraries",
                        }
                    ],
                },
            },
        },
    },
}


async def test_cel_rules_report_as_kube_does(target: Target) -> None:
    async with custom_resource(target, RULES_SCHEMA, kind="Rule") as crd:
        spec = {"min": 5, "max": 3, "name": "b", "tags": ["x", "bad", "long1"], "m": {"a": 0}}
        answer = await crd.create(crd.obj("c1", spec))
        assert answer.status == 422
        answer.check_message(crd.subject("c1"))
        # kube 1.28 keeps a rule's fieldPath for the rules after it on the same node
        # ("short tags" at spec.name): so does the emulator.
        assert answer.causes == sorted(
            [
                ("spec", "FieldValueInvalid", 'Invalid value: "object": min must not exceed max'),
                ("spec.m", "FieldValueInvalid", 'Invalid value: "object": positive'),
                ("spec.name", "FieldValueForbidden", "Forbidden: name b must start with a"),
                ("spec.name", "FieldValueInvalid", 'Invalid value: "object": short tags'),
                ("spec.name", "FieldValueInvalid", 'Invalid value: "string": too short'),
                (
                    "spec.tags[1]",
                    "FieldValueInvalid",
                    "Invalid value: \"string\": failed rule: self != 'bad'",
                ),
            ]
        )
        ok = await crd.create(crd.obj("c2", {"min": 1, "max": 3, "text": "A,12", "imm": "x"}))
        assert ok.status == 201, ok.body
        libraries = await crd.create(crd.obj("c3", {"min": 1, "max": 3, "text": "a12"}))
        assert libraries.causes == [
            ("spec.text", "FieldValueInvalid", 'Invalid value: "string": kube\'s libraries')
        ]


async def test_transition_rules_and_blocking_errors(target: Target) -> None:
    async with custom_resource(target, RULES_SCHEMA, kind="Rule") as crd:
        assert (await crd.create(crd.obj("t", {"min": 1, "max": 3, "imm": "x"}))).status == 201
        answer = await crd.patch("t", {"spec": {"max": 2, "imm": "y"}})
        assert answer.status == 422
        answer.check_message(crd.subject("t"))
        assert answer.causes == [
            ("spec", "FieldValueInvalid", 'Invalid value: "object": max may only grow'),
            ("spec.imm", "FieldValueInvalid", 'Invalid value: "string": imm is immutable'),
        ]
        missing = await crd.create(crd.obj("nokey", {"min": 1}))
        assert missing.causes == [
            (
                "spec",
                "FieldValueInvalid",
                'Invalid value: "object": no such key: max evaluating rule: min must not '
                "exceed max",
            )
        ]
        blocked = await crd.create(crd.obj("blocked", {"min": 5, "max": 3000}))
        assert blocked.causes == [
            (
                "spec.max",
                "FieldValueInvalid",
                "Invalid value: 3000: spec.max in body should be less than or equal to 1000",
            )
        ]
        typed = await crd.create(crd.obj("typed", {"min": "x", "max": 1}))
        assert typed.causes == [
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "null": some validation rules were not '
                "checked because the object was invalid; correct the existing errors to complete "
                "validation",
            ),
            (
                "spec.min",
                "FieldValueTypeInvalid",
                'Invalid value: "string": spec.min in body must be of type integer: "string"',
            ),
        ]


async def test_a_crd_whose_rules_do_not_compile_is_refused(target: Target) -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self.a >"}, {"rule": "nofunc(self.a)"}],
                "properties": {"a": {"type": "integer"}},
            }
        },
    }
    group = f"{target.namespace}.kr.dev"
    async with http(target) as client:
        manifest = crd_manifest(group, "Bad", "bads", schema, status=False)
        answer = await client.call("POST", CRDS, manifest)
        if answer.status == 201:  # pragma: no cover - only on a failure, so it cleans up
            await client.call("DELETE", f"{CRDS}/bads.{group}")
        assert answer.status == 422
        where = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations"
        causes = answer.body["details"]["causes"]
        assert [c["field"] for c in causes] == [f"{where}[0].rule", f"{where}[1].rule"]
        assert causes[0]["message"].startswith(
            'Invalid value: apiextensions.ValidationRule{Rule:"self.a >", Message:"", '
            'MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), '
            'FieldPath:""}: compilation failed: ERROR: <input>:1:'
        )
        # cel-go's words for a syntax error are not cel-python's; an unknown function reads
        # the same.
        assert causes[1]["message"].endswith(
            "compilation failed: ERROR: <input>:1:7: undeclared reference to 'nofunc' "
            "(in container '')\n | nofunc(self.a)\n | ......^"
        )
