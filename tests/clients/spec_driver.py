"""Drive a generated client from its own OpenAPI document.

For every operation of ``openapi/<platform>.json`` this builds arguments and a request body
from the spec's schemas, calls the generated method against requests-mock and checks the
request's URL, method, headers and JSON body against the spec; then it parses a sample
response (plus an unknown field and an unseen enum value) and checks the error mapping.
"""

from __future__ import annotations

import copy
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests_mock as rm
from channelkit.errors import (
    ApiError,
    AuthError,
    BadRequest,
    NotFound,
    RateLimited,
    ServerError,
)
from channelkit.http.errormap import ErrorSpec, dig
from channelkit.http.model import Model
from channelkit.http.multipart import UploadFile
from channelkit.http.retry import RetryPolicy

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-123:ABC"
HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def load_spec(platform: str) -> dict[str, Any]:
    return json.loads((ROOT / "openapi" / f"{platform}.json").read_text(encoding="utf-8"))


def operations(platform: str) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """``(path, method, path item, operation)`` for every operation, sorted by operationId."""
    doc = load_spec(platform)
    ops = []
    for path, item in doc["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                ops.append((path, method, item, item[method]))
    return sorted(ops, key=lambda o: o[3]["operationId"])


def operation_ids(platform: str) -> list[str]:
    return [o[3]["operationId"] for o in operations(platform)]


def snake(name: str) -> str:
    from codegen.naming import snake as to_snake

    return to_snake(name)


def attr(name: str) -> str:
    from codegen.naming import safe_attr

    return safe_attr(name)


class Sampler:
    """Builds schema-valid sample values (every property, recursion cut at repeated refs)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.schemas = doc.get("components", {}).get("schemas", {})

    def resolve(self, schema: Any) -> Any:
        while isinstance(schema, dict) and "$ref" in schema:
            schema = self.schemas[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def sample(self, schema: Any, name: str = "v", stack: tuple[str, ...] = ()) -> Any:
        if isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if ref in stack:
                return None
            return self.sample(self.resolve(schema), name, (*stack, ref))
        if not isinstance(schema, dict) or not schema:
            return "any-value"
        if "enum" in schema:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return self.sample(schema[key][0], name, stack)
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                value = self.sample(part, name, stack)
                if isinstance(value, dict):
                    merged.update(value)
            return merged
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next(k for k in kind if k != "null")
        if kind == "string":
            text = f"s-{name}"
            if schema.get("pattern"):
                text = "s_" + "".join(c for c in name if c.isalnum())[:20]
            if "maxLength" in schema:
                text = text[: schema["maxLength"]]
            return text
        if kind == "integer":
            return int(schema.get("minimum", 2))
        if kind == "number":
            return float(schema.get("minimum", 1.5))
        if kind == "boolean":
            return True
        if kind == "array":
            item = self.sample(schema.get("items", {}), name, stack)
            return [] if item is None else [item]
        props = schema.get("properties")
        if props:
            out = {}
            for prop in sorted(props):
                value = self.sample(props[prop], prop, stack)
                if value is not None or prop in schema.get("required", []):
                    out[prop] = value
            return out
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return {"k1": self.sample(extra, "k1", stack)}
        return {"free": "form"}


def client_class(platform: str) -> type[Any]:
    module = importlib.import_module(f"channelkit.clients.{platform}")
    return getattr(module, platform[:1].upper() + platform[1:] + "Client")  # type: ignore[no-any-return]


def make_client(platform: str, **kwargs: Any) -> Any:
    doc = load_spec(platform)
    kind = doc.get("x-channelkit-auth", {}).get("kind", "none")
    if kind != "none":
        kwargs.setdefault("token", TOKEN)
    kwargs.setdefault("retry", RetryPolicy.never())
    return client_class(platform)(**kwargs)


def server_url(doc: dict[str, Any], item: dict[str, Any], op: dict[str, Any]) -> str:
    servers = op.get("servers") or item.get("servers") or doc["servers"]
    return str(servers[0]["url"]).rstrip("/")


def effective_errors(doc: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    return dict(op.get("x-channelkit-errors") or doc.get("x-channelkit-errors") or {})


def success_body(sampler: Sampler, op: dict[str, Any], errors: dict[str, Any]) -> Any:
    responses = op.get("responses", {})
    code = sorted(c for c in responses if str(c).startswith("2"))[0]
    schema = responses[code].get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return None
    body = sampler.sample(schema, "resp")
    if isinstance(body, dict):
        _set_path(body, errors.get("okField"), True)
        if errors.get("codeField") and errors.get("successValues"):
            _set_path(body, errors["codeField"], errors["successValues"][0])
        elif errors.get("codeField") and dig(body, errors["codeField"]) is not None:
            _drop_path(body, errors["codeField"])
    return body


def _set_path(body: dict[str, Any], dotted: str | None, value: Any) -> None:
    if not dotted:
        return
    parts = dotted.split(".")
    for part in parts[:-1]:
        body = body.setdefault(part, {})
    body[parts[-1]] = value


def _drop_path(body: dict[str, Any], dotted: str) -> None:
    parts = dotted.split(".")
    for part in parts[:-1]:
        body = body.get(part, {})
    body.pop(parts[-1], None)


@dataclass
class MultipartExpect:
    """What a multipart request must carry: form fields as their text, files' bytes."""

    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)


def multipart_body(
    platform: str, sampler: Sampler, schema_ref: dict[str, Any]
) -> tuple[Model, MultipartExpect]:
    """The request model of a ``multipart/form-data`` body (every binary property a
    file part of known bytes, every primitive property a sampled value; object
    properties are left out unless required) and what its parts must be."""
    name = schema_ref["$ref"].rsplit("/", 1)[-1]
    schema = sampler.resolve(schema_ref)
    model_cls = getattr(importlib.import_module(f"channelkit.clients.{platform}.models"), name)
    required = set(schema.get("required", []))
    values: dict[str, Any] = {}
    expect = MultipartExpect()
    for prop, prop_schema in schema.get("properties", {}).items():
        target = sampler.resolve(prop_schema)
        if target.get("type") == "string" and target.get("format") == "binary":
            data = f"the bytes of {prop}".encode()
            values[attr(prop)] = UploadFile.from_bytes(f"{attr(prop)}.bin", "text/plain", data)
            expect.files[prop] = data
            continue
        value = sampler.sample(prop_schema, prop)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str | int | float):
            text = str(value)
        else:
            assert prop not in required, f"{name}.{prop}: a required non-primitive form field"
            continue
        values[attr(prop)] = value
        expect.fields[prop] = text
    assert expect.files, f"{name}: a multipart body without a file part"
    return model_cls(**values), expect


def build_call(
    platform: str, operation_id: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], Any]:
    """``(op info, kwargs, expected query, expected headers, expected body)``."""
    doc = load_spec(platform)
    sampler = Sampler(doc)
    path, method, item, op = next(
        o for o in operations(platform) if o[3]["operationId"] == operation_id
    )
    auth = doc.get("x-channelkit-auth", {"kind": "none"})
    kwargs: dict[str, Any] = {}
    query: dict[str, str] = {}
    headers: dict[str, str] = {}
    url_path = path
    for param in list(item.get("parameters", [])) + list(op.get("parameters", [])):
        name = param["name"]
        if auth.get("kind") == "path-token" and name == auth.get("parameter"):
            url_path = url_path.replace("{" + name + "}", TOKEN)
            continue
        value = sampler.sample(param.get("schema", {}), name)
        kwargs[attr(name)] = value
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        if param["in"] == "path":
            url_path = url_path.replace("{" + name + "}", text)
        elif param["in"] == "query":
            query[name] = text
        else:
            headers[name] = text
    body: Any = None
    if op.get("requestBody"):
        content = op["requestBody"]["content"]
        if "application/json" in content:
            schema = content["application/json"]["schema"]
            body = sampler.sample(schema, "body")
            kwargs["body"] = body
        else:
            kwargs["body"], body = multipart_body(
                platform, sampler, content["multipart/form-data"]["schema"]
            )
    info = {
        "url": server_url(doc, item, op) + url_path,
        "method": method.upper(),
        "op": op,
        "doc": doc,
        "auth": auth,
        "sampler": sampler,
        "errors": effective_errors(doc, op),
    }
    return info, kwargs, query, headers, body


def expected_auth_headers(auth: dict[str, Any], op: dict[str, Any]) -> dict[str, str]:
    kind = auth.get("kind", "none")
    if kind == "none" or op.get("security") == []:
        return {}
    if kind == "header-token":
        return {auth["header"]: auth.get("prefix", "") + TOKEN}
    if kind == "bearer":
        return {"Authorization": f"Bearer {TOKEN}"}
    if kind == "bearer-static":
        return {"Authorization": f"Bearer {TOKEN}", **auth.get("headers", {})}
    return {}


def check_request_shape(platform: str, operation_id: str, *, as_model: bool) -> None:
    """One operation: URL, method, headers and JSON body as the spec says; response parsed."""
    info, kwargs, query, headers, body = build_call(platform, operation_id)
    op = info["op"]
    client = make_client(platform, validate=True)
    method = getattr(client, snake(operation_id))
    if (
        as_model
        and isinstance(body, dict)
        and op["requestBody"]["content"]["application/json"]["schema"].get("$ref")
    ):
        name = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        module = importlib.import_module(f"channelkit.clients.{platform}.models")
        model_cls = getattr(module, name, None)
        if model_cls is not None:
            model = model_cls.from_dict(copy.deepcopy(body))
            assert model.to_dict() == body
            kwargs["body"] = model
    response_body = success_body(info["sampler"], op, info["errors"])
    if isinstance(response_body, dict):
        response_body["zzUnknownField"] = {"kept": [1, 2]}
    with rm.Mocker() as mocker:
        if response_body is None:
            mocker.register_uri(rm.ANY, rm.ANY, status_code=200)
        else:
            mocker.register_uri(rm.ANY, rm.ANY, json=response_body, status_code=200)
        result = method(**kwargs)
        assert mocker.call_count == 1
        sent = mocker.request_history[0]
    split = urlsplit(sent.url)
    assert f"{split.scheme}://{split.netloc}{split.path}" == info["url"]
    assert sent.method == info["method"]
    assert {k: v[0] for k, v in parse_qs(split.query).items()} == query
    for name, value in {**expected_auth_headers(info["auth"], op), **headers}.items():
        assert sent.headers.get(name) == value, name
    if op.get("security") == [] and info["auth"].get("kind") == "header-token":
        assert info["auth"]["header"] not in sent.headers
    if body is None:
        assert not sent.body
    elif isinstance(body, MultipartExpect):
        from channelkit.playground.bot_files import parse_multipart

        content_type = sent.headers["Content-Type"]
        assert content_type.startswith("multipart/form-data; boundary=")
        raw = sent.body if isinstance(sent.body, bytes) else sent.body.read()
        assert int(sent.headers["Content-Length"]) == len(raw)
        fields, files = parse_multipart(raw, content_type)
        assert fields == body.fields
        assert {k: f.data for k, f in files.items()} == body.files
    else:
        assert sent.headers["Content-Type"].startswith("application/json")
        assert sent.json() == body
    assert isinstance(sent.timeout, tuple) and sent.timeout == (3.05, 10.0)
    if isinstance(result, Model):
        assert result.extra_fields["zzUnknownField"] == {"kept": [1, 2]}
        assert result.to_dict() == response_body


def check_unknown_enum_value(platform: str) -> None:
    """Some response model with an enum field accepts a value the spec does not list."""
    doc = load_spec(platform)
    module = importlib.import_module(f"channelkit.clients.{platform}.models")
    sampler = Sampler(doc)
    for name in sorted(doc["components"]["schemas"]):
        schema = doc["components"]["schemas"][name]
        for prop, pschema in sorted(schema.get("properties", {}).items()):
            target = sampler.resolve(pschema)
            if isinstance(target, dict) and "enum" in target and hasattr(module, name):
                data = sampler.sample(schema, name)
                unseen = "zz_unseen_value" if isinstance(target["enum"][0], str) else 987654
                data[prop] = unseen
                parsed = getattr(module, name).from_dict(data)
                assert parsed.to_dict()[prop] == unseen
                return
    pytest.skip(f"{platform} has no enum property")


ERROR_STATUSES = [
    (400, BadRequest),
    (401, AuthError),
    (403, AuthError),
    (404, NotFound),
    (422, BadRequest),
    (429, RateLimited),
    (500, ServerError),
    (503, ServerError),
]


def check_status_mapping(platform: str, status: int, expected: type[ApiError]) -> None:
    operation_id = operation_ids(platform)[0]
    info, kwargs, _, _, _ = build_call(platform, operation_id)
    client = make_client(platform)
    headers = {"Retry-After": "7"} if status == 429 else {}
    with rm.Mocker() as mocker:
        mocker.register_uri(
            rm.ANY, rm.ANY, status_code=status, json={"zz": "error"}, headers=headers
        )
        with pytest.raises(expected) as caught:
            getattr(client, snake(operation_id))(**kwargs)
    assert caught.value.status == status
    assert type(caught.value) is expected
    if status == 429:
        assert caught.value.retry_after == 7.0  # type: ignore[attr-defined]


def check_business_errors(platform: str) -> None:
    """HTTP-200 bodies that report failure map into the hierarchy, code and message kept."""
    for operation_id in operation_ids(platform):
        info, kwargs, _, _, _ = build_call(platform, operation_id)
        errors = info["errors"]
        spec = ErrorSpec.from_spec(errors)
        cases: list[tuple[dict[str, Any], type[ApiError]]] = []

        def body_with(code: Any, spec: ErrorSpec = spec) -> dict[str, Any]:
            out: dict[str, Any] = {}
            _set_path(out, spec.ok_field, False)
            if spec.message_field != spec.code_field:
                _set_path(out, spec.message_field, "it failed")
            _set_path(out, spec.code_field, code)
            return out

        if spec.ok_field or spec.success_values:
            generic = (
                999_001
                if not spec.success_values or isinstance(spec.success_values[0], int)
                else "zz_failure"
            )
            if spec.ok_field and spec.code_field and not spec.success_values:
                generic = "zz_failure"
            cases.append((body_with(generic), BadRequest))
            for code in spec.auth_codes[:1]:
                cases.append((body_with(code), AuthError))
            for code in spec.rate_limit_codes[:1]:
                cases.append((body_with(code), RateLimited))
            for code in spec.retryable_codes[:1]:
                cases.append((body_with(code), ServerError))
        if not cases:
            continue
        client = make_client(platform)
        for body, expected in cases:
            with rm.Mocker() as mocker:
                mocker.register_uri(rm.ANY, rm.ANY, status_code=200, json=body)
                with pytest.raises(expected) as caught:
                    getattr(client, snake(operation_id))(**kwargs)
            assert caught.value.status == 200
            if spec.message_field != spec.code_field:
                assert caught.value.message == "it failed"
            else:
                assert caught.value.message == str(dig(body, spec.code_field))
            if spec.code_field:
                assert caught.value.code == dig(body, spec.code_field)
        return
    pytest.skip(f"{platform} signals errors by HTTP status only")


def check_missing_and_wrong_arguments(platform: str) -> None:
    """Bad input fails before any network call, naming the parameter or body field."""
    from channelkit.errors import ConfigurationError

    client = make_client(platform)
    for operation_id in operation_ids(platform):
        info, kwargs, _, _, body = build_call(platform, operation_id)
        method = getattr(client, snake(operation_id))
        op = info["op"]
        required = {
            attr(p["name"])
            for p in op.get("parameters", [])
            if p.get("required") or p["in"] == "path"
        }
        with rm.Mocker() as mocker:
            for name in list(kwargs):
                if name == "body":
                    continue
                broken = dict(kwargs)
                broken[name] = object()
                with pytest.raises(ConfigurationError) as caught:
                    method(**broken)
                assert caught.value.path == name
                if name not in required:
                    continue
                missing = dict(kwargs)
                del missing[name]
                with pytest.raises((TypeError, ConfigurationError)) as caught_missing:
                    method(**missing)
                assert name in str(caught_missing.value)
            if isinstance(body, dict) and body:
                schema = info["sampler"].resolve(
                    info["op"]["requestBody"]["content"]["application/json"]["schema"]
                )
                required = [r for r in schema.get("required", []) if r in body]
                if required:
                    broken_body = dict(body)
                    del broken_body[required[0]]
                    strict = make_client(platform, validate=True)
                    with pytest.raises(ConfigurationError) as caught_body:
                        getattr(strict, snake(operation_id))(**{**kwargs, "body": broken_body})
                    assert required[0] in str(caught_body.value)
            assert mocker.call_count == 0
