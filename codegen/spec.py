"""Read one OpenAPI document into the small model the renderer needs.

Only what ``openapi/CONVENTIONS.md`` promises is supported; anything else raises
`SpecError` naming the file and the JSON pointer, so a spec mistake is found at
generation time rather than as odd generated code.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codegen.naming import enum_member, pascal, safe_attr, snake, unique

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
IDEMPOTENT = frozenset({"GET", "PUT", "DELETE", "HEAD", "OPTIONS"})
PRIMITIVES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
CODEC_CONST = {"string": "STRING", "integer": "INTEGER", "number": "NUMBER", "boolean": "BOOLEAN"}

# Constructor arguments of the token providers in channelkit.http.auth, by provider name.
PROVIDER_CREDENTIALS = {
    "dingtalk": ("app_key", "app_secret"),
    "feishu": ("app_id", "app_secret"),
    "msteams": ("app_id", "app_password"),
}


class SpecError(Exception):
    """The document does not follow the conventions; names the file and the pointer."""

    def __init__(self, file: str, pointer: str, message: str) -> None:
        super().__init__(f"{file}: {pointer or '/'}: {message}")


@dataclass
class TypeRef:
    """A Python annotation plus the codec expression that (de)serializes it."""

    annotation: str
    codec: str
    nullable: bool = False


@dataclass
class EnumDef:
    name: str
    base: str  # "str" or "int"
    values: list[Any]
    members: list[tuple[str, Any]]
    description: str = ""


@dataclass
class FieldDef:
    attr: str
    wire: str
    type: TypeRef
    required: bool
    description: str = ""
    secret: bool = False


@dataclass
class ModelDef:
    name: str
    description: str
    fields: list[FieldDef] = field(default_factory=list)


@dataclass
class ParamDef:
    attr: str
    wire: str
    location: str
    type: TypeRef
    required: bool
    description: str = ""
    secret: bool = False
    is_auth: bool = False


@dataclass
class OperationDef:
    operation_id: str
    method_name: str
    const_name: str
    http_method: str
    path: str
    server: str
    summary: str
    description: str
    params: list[ParamDef]
    body_schema: str | None
    body_required: bool
    body_annotation: str | None
    body_format: str
    idempotent: bool
    authenticated: bool
    response_model: str | None
    response_any: bool
    errors: dict[str, Any] | None


@dataclass
class Spec:
    platform: str
    file: str
    sha256: str
    title: str
    version: str
    description: str
    servers: dict[str, str]
    auth: dict[str, Any]
    errors: dict[str, Any]
    models: list[ModelDef]
    enums: list[EnumDef]
    operations: list[OperationDef]
    schemas: dict[str, Any]  # request-body schemas (and their references) for validation


def load(path: Path) -> Spec:
    """Parse ``path`` (``openapi/<platform>.json``) into a `Spec`."""
    raw = path.read_bytes()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(path.name, "", f"not valid JSON: {exc}") from None
    return _Builder(path.stem, f"openapi/{path.name}", hashlib.sha256(raw).hexdigest(), doc).build()


def _ref_name(ref: str, file: str, pointer: str) -> str:
    prefix = "#/components/schemas/"
    if not ref.startswith(prefix):
        raise SpecError(file, pointer, f"only local schema references are supported: {ref}")
    return ref[len(prefix) :]


class _Builder:
    def __init__(self, platform: str, file: str, sha: str, doc: Any) -> None:
        self.platform = platform
        self.file = file
        self.sha = sha
        self.doc = doc
        if not isinstance(doc, dict) or not str(doc.get("openapi", "")).startswith("3."):
            raise SpecError(file, "/openapi", "expected an OpenAPI 3.x document")
        self.schemas: dict[str, Any] = doc.get("components", {}).get("schemas", {})
        self.models: dict[str, ModelDef] = {}
        self.enums: dict[str, EnumDef] = {}
        self.taken: set[str] = set(self.schemas)
        self.inline_enum_names: dict[tuple[str, str], str] = {}

    # -- schema classification ---------------------------------------------------------------

    def _is_model(self, schema: Any) -> bool:
        if not isinstance(schema, dict) or "enum" in schema:
            return False
        if "properties" in schema:
            return True
        if "allOf" in schema:
            return True
        return schema.get("type") == "object" and not isinstance(
            schema.get("additionalProperties"), dict
        )

    def _is_enum(self, schema: Any) -> bool:
        return isinstance(schema, dict) and isinstance(schema.get("enum"), list)

    def _plan_inline_enums(self) -> None:
        """Name inline enums: ``ParseMode`` when every use agrees, else ``<Owner><Prop>``."""
        uses: dict[str, list[tuple[str, str, tuple[Any, ...]]]] = {}

        def visit(owner: str, prop: str, schema: Any) -> None:
            if not isinstance(schema, dict):
                return
            if self._is_enum(schema):
                uses.setdefault(pascal(prop), []).append((owner, prop, tuple(schema["enum"])))
            elif schema.get("type") == "array":
                visit(owner, prop, schema.get("items"))
            elif isinstance(schema.get("additionalProperties"), dict):
                visit(owner, prop, schema["additionalProperties"])

        for name in sorted(self.schemas):
            schema = self.schemas[name]
            if isinstance(schema, dict):
                for prop in sorted(schema.get("properties", {}) or {}):
                    visit(name, prop, schema["properties"][prop])
        for op in self._operations_raw():
            for param in op[3].get("parameters", []) or []:
                if isinstance(param, dict) and "name" in param:
                    visit(pascal(op[3].get("operationId", "")), param["name"], param.get("schema"))

        for short in sorted(uses):
            entries = uses[short]
            owners = {e[0] for e in entries}
            same = len({e[2] for e in entries}) == 1
            if same and len(owners) > 1 and short not in self.taken:
                self.taken.add(short)
                for owner, prop, _ in entries:
                    self.inline_enum_names[(owner, prop)] = short
            else:
                for owner, prop, _ in sorted(entries):
                    self.inline_enum_names[(owner, prop)] = unique(
                        pascal(owner) + pascal(prop), self.taken
                    )

    # -- types ------------------------------------------------------------------------------

    def _enum(self, name: str, schema: dict[str, Any], pointer: str) -> EnumDef:
        if name in self.enums:
            return self.enums[name]
        values = list(schema["enum"])
        non_null = [v for v in values if v is not None]
        if all(isinstance(v, str) for v in non_null):
            base = "str"
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in non_null):
            base = "int"
        else:
            raise SpecError(self.file, pointer, "enum values must be all strings or all integers")
        taken: set[str] = set()
        members = [(unique(enum_member(v), taken), v) for v in non_null]
        enum = EnumDef(name, base, non_null, members, str(schema.get("description", "")))
        self.enums[name] = enum
        return enum

    def _enum_type(self, enum: EnumDef) -> TypeRef:
        base_codec = "STRING" if enum.base == "str" else "INTEGER"
        return TypeRef(
            f"{enum.name} | {enum.base}", f"EnumCodec(lambda: {enum.name}, {base_codec})"
        )

    def type_of(self, schema: Any, pointer: str, owner: str, prop: str) -> TypeRef:
        """The annotation and codec for a property/parameter schema."""
        if schema is None or schema is True or schema == {}:
            return TypeRef("Any", "ANY")
        if not isinstance(schema, dict):
            raise SpecError(self.file, pointer, "a schema must be an object")
        nullable = bool(schema.get("nullable"))
        inner = self._type_inner(schema, pointer, owner, prop)
        if inner.nullable:
            return inner
        if nullable and inner.annotation != "Any":
            return TypeRef(f"{inner.annotation} | None", f"NullableCodec({inner.codec})", True)
        return inner

    def _type_inner(self, schema: dict[str, Any], pointer: str, owner: str, prop: str) -> TypeRef:
        if "$ref" in schema:
            name = _ref_name(schema["$ref"], self.file, pointer)
            if name not in self.schemas:
                raise SpecError(self.file, pointer, f"dangling reference {schema['$ref']}")
            target = self.schemas[name]
            if self._is_enum(target):
                return self._enum_type(self._enum(name, target, f"/components/schemas/{name}"))
            if self._is_model(target):
                return TypeRef(name, f"ModelCodec(lambda: {name})")
            return self.type_of(target, f"/components/schemas/{name}", name, "")
        if self._is_enum(schema):
            enum_name = self.inline_enum_names.get((owner, prop)) or unique(
                pascal(owner) + pascal(prop or "value"), self.taken
            )
            self.inline_enum_names[(owner, prop)] = enum_name
            return self._enum_type(self._enum(enum_name, schema, pointer))
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return self._union(schema[key], f"{pointer}/{key}", owner, prop)
        if "allOf" in schema:
            parts = schema["allOf"]
            if isinstance(parts, list) and len(parts) == 1:
                return self.type_of(parts[0], f"{pointer}/allOf/0", owner, prop)
            return TypeRef("dict[str, Any]", "MapCodec(ANY)")
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            options = [self._type_inner({**schema, "type": k}, pointer, owner, prop) for k in kinds]
            result = self._combine(options) if options else TypeRef("Any", "ANY")
            if "null" in kind and result.annotation != "Any":
                return TypeRef(
                    f"{result.annotation} | None", f"NullableCodec({result.codec})", True
                )
            return result
        if kind == "string" and schema.get("format") == "binary":
            # a file part of a multipart/form-data body (channelkit.http.multipart)
            return TypeRef("UploadFile", "UPLOAD")
        if kind in PRIMITIVES:
            return TypeRef(PRIMITIVES[kind], CODEC_CONST[kind])
        if kind == "array":
            item = self.type_of(schema.get("items"), f"{pointer}/items", owner, prop)
            return TypeRef(f"list[{item.annotation}]", f"ListCodec({item.codec})")
        if kind == "object" or "properties" in schema or "additionalProperties" in schema:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra and "properties" not in schema:
                value = self.type_of(extra, f"{pointer}/additionalProperties", owner, prop)
                return TypeRef(f"dict[str, {value.annotation}]", f"MapCodec({value.codec})")
            return TypeRef("dict[str, Any]", "MapCodec(ANY)")
        if kind is None:
            return TypeRef("Any", "ANY")
        raise SpecError(self.file, pointer, f"unsupported type {kind!r}")

    def _union(self, options: Any, pointer: str, owner: str, prop: str) -> TypeRef:
        if not isinstance(options, list) or not options:
            raise SpecError(self.file, pointer, "expected a non-empty list")
        nullable = False
        refs: list[TypeRef] = []
        for i, option in enumerate(options):
            if isinstance(option, dict) and option.get("type") == "null":
                nullable = True
                continue
            refs.append(self.type_of(option, f"{pointer}/{i}", owner, prop))
        result = self._combine(refs) if refs else TypeRef("Any", "ANY")
        if nullable and result.annotation != "Any":
            return TypeRef(f"{result.annotation} | None", f"NullableCodec({result.codec})", True)
        return result

    def _combine(self, refs: list[TypeRef]) -> TypeRef:
        if len(refs) == 1:
            return refs[0]
        structured = [r for r in refs if not r.codec.startswith(tuple(CODEC_CONST.values()))]
        if any(r.annotation == "Any" for r in refs) or len(structured) > 1:
            return TypeRef("Any", "ANY")
        annotation = " | ".join(r.annotation for r in refs)
        codec = "UnionCodec(" + ", ".join(r.codec for r in refs) + ")"
        return TypeRef(annotation, codec)

    # -- models -----------------------------------------------------------------------------

    def _properties(self, schema: dict[str, Any], pointer: str) -> tuple[dict[str, Any], set[str]]:
        props: dict[str, Any] = {}
        required: set[str] = set(schema.get("required", []) or [])
        for i, part in enumerate(schema.get("allOf", []) or []):
            if isinstance(part, dict) and "$ref" in part:
                name = _ref_name(part["$ref"], self.file, f"{pointer}/allOf/{i}")
                part = self.schemas.get(name, {})
            if isinstance(part, dict):
                sub_props, sub_req = self._properties(part, f"{pointer}/allOf/{i}")
                props.update(sub_props)
                required |= sub_req
        props.update(schema.get("properties", {}) or {})
        return props, required

    def _model(self, name: str) -> ModelDef:
        schema = self.schemas[name]
        pointer = f"/components/schemas/{name}"
        props, required = self._properties(schema, pointer)
        model = ModelDef(name, str(schema.get("description", "")))
        taken: set[str] = set()
        order = sorted(props, key=lambda p: (p not in required, p))
        for prop in order:
            pschema = props[prop]
            ftype = self.type_of(pschema, f"{pointer}/properties/{prop}", name, prop)
            desc = pschema.get("description", "") if isinstance(pschema, dict) else ""
            secret = isinstance(pschema, dict) and bool(pschema.get("x-channelkit-secret"))
            model.fields.append(
                FieldDef(
                    unique(safe_attr(prop), taken), prop, ftype, prop in required, desc, secret
                )
            )
        return model

    # -- operations -------------------------------------------------------------------------

    def _operations_raw(self) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
        out = []
        for path in sorted(self.doc.get("paths", {}) or {}):
            item = self.doc["paths"][path]
            for method in HTTP_METHODS:
                if method in item:
                    out.append((path, method, item, item[method]))
        return out

    def _server_name(self, op: dict[str, Any], item: dict[str, Any], pointer: str) -> str:
        servers = op.get("servers") or item.get("servers")
        if not servers:
            return "default"
        name = servers[0].get("x-channelkit-server-name")
        if not name:
            raise SpecError(
                self.file, pointer, "an operation server needs x-channelkit-server-name"
            )
        return str(name)

    def _operation(
        self,
        path: str,
        method: str,
        item: dict[str, Any],
        op: dict[str, Any],
        auth: dict[str, Any],
        method_names: set[str],
    ) -> OperationDef:
        pointer = f"/paths/{path.replace('~', '~0').replace('/', '~1')}/{method}"
        op_id = op.get("operationId")
        if not isinstance(op_id, str) or not op_id:
            raise SpecError(self.file, pointer, "operationId is required")
        method_name = snake(op_id)
        if method_name in method_names or method_name in {"close", "server_url", "token_provider"}:
            raise SpecError(self.file, pointer, f"operationId {op_id} clashes as {method_name}")
        method_names.add(method_name)
        raw_params = list(item.get("parameters", []) or []) + list(op.get("parameters", []) or [])
        params: list[ParamDef] = []
        taken: set[str] = set()
        for i, param in enumerate(raw_params):
            ppointer = f"{pointer}/parameters/{i}"
            if "$ref" in param:
                raise SpecError(self.file, ppointer, "parameter references are not supported")
            location = param.get("in")
            if location not in ("path", "query", "header"):
                raise SpecError(self.file, ppointer, f"unsupported parameter location {location}")
            wire = param["name"]
            is_auth = auth.get("kind") == "path-token" and wire == auth.get("parameter")
            ptype = self.type_of(param.get("schema"), f"{ppointer}/schema", pascal(op_id), wire)
            params.append(
                ParamDef(
                    unique(safe_attr(wire), taken),
                    wire,
                    location,
                    ptype,
                    bool(param.get("required")) or location == "path",
                    str(param.get("description", "")),
                    bool(param.get("x-channelkit-secret")),
                    is_auth,
                )
            )
        params.sort(key=lambda p: (not p.required, p.attr))

        body_schema = None
        body_annotation = None
        body_required = False
        body_format = "json"
        request_body = op.get("requestBody")
        if request_body:
            content = request_body.get("content", {})
            schema = content.get("application/json", {}).get("schema")
            if schema is None and "multipart/form-data" in content:
                body_format = "multipart"
                schema = content["multipart/form-data"].get("schema")
                if not isinstance(schema, dict) or "$ref" not in schema:
                    raise SpecError(
                        self.file, f"{pointer}/requestBody", "a multipart body must be a $ref"
                    )
            if schema is None:
                raise SpecError(
                    self.file,
                    f"{pointer}/requestBody",
                    "expected application/json or multipart/form-data",
                )
            body_required = bool(request_body.get("required"))
            if "$ref" in schema:
                body_schema = _ref_name(schema["$ref"], self.file, f"{pointer}/requestBody")
                if self._is_model(self.schemas.get(body_schema)):
                    body_annotation = body_schema
            if body_annotation is None:
                body_annotation = ""

        response_model = None
        response_any = False
        responses = op.get("responses", {}) or {}
        ok_codes = sorted(c for c in responses if str(c).startswith("2"))
        if ok_codes:
            resp = responses[ok_codes[0]]
            schema = (resp.get("content", {}) or {}).get("application/json", {}).get("schema")
            if schema is not None:
                ref = schema.get("$ref") if isinstance(schema, dict) else None
                if ref is not None:
                    name = _ref_name(ref, self.file, f"{pointer}/responses/{ok_codes[0]}")
                    if self._is_model(self.schemas.get(name)):
                        response_model = name
                if response_model is None:
                    response_any = True
        http_method = method.upper()
        # Only an operation-level `security: []` opts out (CONVENTIONS.md); a document-level
        # `security: []` just says the scheme is not expressible (Telegram's path token).
        authenticated = auth.get("kind", "none") != "none" and op.get("security") != []
        return OperationDef(
            operation_id=op_id,
            method_name=method_name,
            const_name="_" + method_name.upper(),
            http_method=http_method,
            path=path,
            server=self._server_name(op, item, pointer),
            summary=str(op.get("summary", "")),
            description=str(op.get("description", "")),
            params=params,
            body_schema=body_schema,
            body_required=body_required,
            body_annotation=body_annotation,
            body_format=body_format,
            idempotent=http_method in IDEMPOTENT or bool(op.get("x-channelkit-idempotent")),
            authenticated=authenticated,
            response_model=response_model,
            response_any=response_any,
            errors=op.get("x-channelkit-errors"),
        )

    # -- validation schemas -----------------------------------------------------------------

    def _strip(self, schema: Any) -> Any:
        """A schema without annotations (description, examples) and with 3.0 nullable as 3.1."""
        if isinstance(schema, list):
            return [self._strip(s) for s in schema]
        if not isinstance(schema, dict):
            return schema
        out: dict[str, Any] = {}
        for key in sorted(schema):
            value = schema[key]
            if key in ("description", "example", "examples", "externalDocs", "title"):
                continue
            if key.startswith("x-"):
                continue
            if key in ("properties", "patternProperties", "$defs", "definitions"):
                out[key] = {k: self._strip(value[k]) for k in sorted(value)}
            elif key == "nullable":
                continue
            else:
                out[key] = self._strip(value)
        if schema.get("nullable") is True and isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        return out

    def _validation_schemas(self, roots: list[str]) -> dict[str, Any]:
        needed: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name in needed or name not in self.schemas:
                continue
            needed.add(name)
            stack.extend(_refs(self.schemas[name], self.file))
        return {name: self._strip(self.schemas[name]) for name in sorted(needed)}

    # -- all --------------------------------------------------------------------------------

    def build(self) -> Spec:
        doc = self.doc
        info = doc.get("info", {}) or {}
        servers_raw = doc.get("servers") or []
        if not servers_raw or "url" not in servers_raw[0]:
            raise SpecError(self.file, "/servers", "servers[0].url is required")
        servers = {"default": str(servers_raw[0]["url"])}
        auth = dict(doc.get("x-channelkit-auth") or {"kind": "none"})
        kind = auth.get("kind", "none")
        if kind not in ("none", "header-token", "bearer", "path-token", "bearer-static"):
            raise SpecError(self.file, "/x-channelkit-auth/kind", f"unknown auth kind {kind!r}")
        errors = dict(doc.get("x-channelkit-errors") or {})

        self._plan_inline_enums()
        for name in sorted(self.schemas):
            if self._is_enum(self.schemas[name]):
                self._enum(name, self.schemas[name], f"/components/schemas/{name}")
        models = [
            self._model(name) for name in sorted(self.schemas) if self._is_model(self.schemas[name])
        ]

        operations = []
        method_names: set[str] = set()
        for path, method, item, op in self._operations_raw():
            operations.append(self._operation(path, method, item, op, auth, method_names))
            upload_id = op.get("x-channelkit-multipart-operationId")
            if upload_id:
                # the same path and method with its multipart/form-data body (file
                # uploads): a method of its own, e.g. createMessage -> createMessageWithFiles
                content = dict((op.get("requestBody") or {}).get("content") or {})
                if "multipart/form-data" not in content:
                    raise SpecError(
                        self.file,
                        f"/paths/{path}/{method}",
                        "x-channelkit-multipart-operationId needs a multipart/form-data body",
                    )
                variant = {
                    **op,
                    "operationId": upload_id,
                    "requestBody": {
                        **op["requestBody"],
                        "content": {"multipart/form-data": content["multipart/form-data"]},
                    },
                }
                operations.append(self._operation(path, method, item, variant, auth, method_names))
            for server in op.get("servers") or item.get("servers") or []:
                name = server.get("x-channelkit-server-name")
                if name:
                    servers[str(name)] = str(server["url"])
        operations.sort(key=lambda o: o.method_name)
        body_roots = sorted({o.body_schema for o in operations if o.body_schema})
        return Spec(
            platform=self.platform,
            file=self.file,
            sha256=self.sha,
            title=str(info.get("title", self.platform)),
            version=str(info.get("version", "")),
            description=str(info.get("description", "")),
            servers=servers,
            auth=auth,
            errors=errors,
            models=models,
            enums=[self.enums[n] for n in sorted(self.enums)],
            operations=operations,
            schemas=self._validation_schemas(body_roots),
        )


def _refs(schema: Any, file: str) -> list[str]:
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.append(_ref_name(value, file, ""))
            else:
                found.extend(_refs(value, file))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_refs(value, file))
    return found
