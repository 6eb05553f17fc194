"""The OpenAPI documents in openapi/ are valid and follow openapi/CONVENTIONS.md.

No network: the OpenAPI 3.1 schema is vendored under tests/openapi/schemas/ (see its README).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[2]
OPENAPI_DIR = ROOT / "openapi"
OAS_SCHEMA_FILE = Path(__file__).parent / "schemas" / "oas-3.1-schema-2022-10-07.json"

PLATFORMS = (
    "dingtalk",
    "feishu",
    "telegram",
    "weixin",
    "slack",
    "discord",
    "mattermost",
    "line",
    "msteams",
)
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
AUTH_KINDS = {"header-token", "bearer", "path-token", "bearer-static"}
PRIMITIVE_TYPES = {"string", "integer", "number", "boolean"}

# Operations the clients and adapters are built on: (method, path) -> operationId.
REQUIRED_OPERATIONS: dict[str, dict[tuple[str, str], str]] = {
    "dingtalk": {
        ("post", "/v1.0/oauth2/accessToken"): "getAccessToken",
        ("get", "/gettoken"): "getLegacyAccessToken",
        ("post", "/v1.0/card/instances/createAndDeliver"): "createAndDeliverCard",
        ("put", "/v1.0/card/streaming"): "streamingUpdateCard",
        ("put", "/v1.0/card/instances"): "updateCardInstance",
        ("post", "/v1.0/card/callbacks/register"): "registerCardCallback",
        ("post", "/v1.0/robot/oToMessages/batchSend"): "batchSendRobotOtoMessages",
        ("post", "/v1.0/robot/groupMessages/send"): "sendRobotGroupMessage",
        ("post", "/v1.0/robot/emotion/reply"): "replyRobotEmotion",
        ("post", "/v1.0/robot/emotion/recall"): "recallRobotEmotion",
    },
    "feishu": {
        ("post", "/open-apis/auth/v3/tenant_access_token/internal"): "getTenantAccessToken",
        ("post", "/open-apis/im/v1/messages"): "createMessage",
        ("post", "/open-apis/im/v1/messages/{message_id}/reply"): "replyMessage",
        ("patch", "/open-apis/im/v1/messages/{message_id}"): "patchMessage",
        ("delete", "/open-apis/im/v1/messages/{message_id}"): "deleteMessage",
        ("post", "/open-apis/im/v1/messages/{message_id}/reactions"): "createMessageReaction",
        ("get", "/open-apis/im/v1/messages/{message_id}/reactions"): "listMessageReactions",
        (
            "delete",
            "/open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}",
        ): "deleteMessageReaction",
        ("post", "/open-apis/im/v1/pins"): "createPin",
        ("post", "/open-apis/cardkit/v1/cards"): "createCard",
        ("put", "/open-apis/cardkit/v1/cards/{card_id}"): "updateCard",
        (
            "put",
            "/open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content",
        ): "updateCardElementContent",
        ("patch", "/open-apis/cardkit/v1/cards/{card_id}/settings"): "updateCardSettings",
    },
    "telegram": {
        ("post", f"/bot{{token}}/{name}"): name
        for name in (
            "sendMessage",
            "editMessageText",
            "deleteMessage",
            "sendChatAction",
            "answerCallbackQuery",
            "pinChatMessage",
            "setWebhook",
            "getMe",
        )
    },
    "weixin": {
        ("post", "/ilink/bot/getconfig"): "getConfig",
        ("post", "/ilink/bot/sendtyping"): "sendTyping",
        ("post", "/ilink/bot/sendmessage"): "sendMessage",
    },
    "slack": {
        ("post", "/chat.postMessage"): "chatPostMessage",
        ("post", "/chat.update"): "chatUpdate",
        ("post", "/pins.add"): "pinsAdd",
    },
    "discord": {
        ("post", "/channels/{channel_id}/messages"): "createMessage",
        ("put", "/channels/{channel_id}/messages/pins/{message_id}"): "pinMessage",
    },
    "mattermost": {
        ("post", "/api/v4/posts"): "createPost",
        ("post", "/api/v4/posts/{post_id}/pin"): "pinPost",
    },
    "line": {
        ("post", "/v2/bot/message/push"): "pushMessage",
        ("post", "/v2/bot/message/reply"): "replyMessage",
    },
    "msteams": {
        ("post", "/v3/conversations/{conversationId}/activities"): "sendToConversation",
    },
}

# Every POST marked "x-channelkit-idempotent": true, with why the platform says repeating it is
# safe. A POST not in this list must not carry the mark (a retried non-idempotent POST can send
# a user the same message twice).
IDEMPOTENT_POSTS: dict[tuple[str, str], str] = {
    ("dingtalk", "getAccessToken"): "returns the same token while it is valid",
    ("dingtalk", "registerCardCallback"): "re-registering a route key is a no-op/overwrite",
    ("feishu", "getTenantAccessToken"): "returns the current token while > 30 min remain",
    ("telegram", "editMessageText"): "sets the text; a repeat answers 'message is not modified'",
    ("telegram", "deleteMessage"): "the message stays deleted",
    ("telegram", "sendChatAction"): "refreshes a status that expires after 5 s",
    ("telegram", "answerCallbackQuery"): "only stops the button's progress indicator",
    ("telegram", "pinChatMessage"): "a pinned message stays pinned",
    ("telegram", "unpinChatMessage"): "an unpinned message stays unpinned",
    ("telegram", "getChat"): "read-only",
    ("telegram", "setWebhook"): "sets the same webhook configuration",
    ("telegram", "setMyCommands"): "replaces the scope's command menu with the same list",
    ("telegram", "getMe"): "read-only",
    ("telegram", "getFile"): "read-only (a repeat gives a download link to the same file)",
    ("dingtalk", "downloadRobotMessageFile"): "read-only (a repeat gives a link to the same file)",
    ("weixin", "getConfig"): "read-only (returns the typing ticket)",
    ("weixin", "sendTyping"): "sets a typing state (1 typing / 2 cancel)",
    ("slack", "chatUpdate"): "replaces the message with the given content",
    ("slack", "assistantThreadsSetStatus"): "sets the thread's status text (empty clears it)",
    ("slack", "authTest"): "read-only",
    ("mattermost", "pinPost"): "sets is_pinned; pinning a pinned post answers OK",
}

# Properties/parameters whose name says they carry a credential must be marked secret.
SECRET_NAME = re.compile(r"(secret|access_?token$|^token$|bot_?token)", re.IGNORECASE)
NOT_CREDENTIALS = {"context_token", "typing_ticket", "replyToken"}


def _load(platform: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((OPENAPI_DIR / f"{platform}.json").read_text(encoding="utf-8"))
    return doc


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in sorted(doc["paths"].items()):
        for method in HTTP_METHODS:
            if method in item:
                yield method, path, item[method]


def _walk(node: Any, pointer: str = "#") -> Iterator[tuple[str, Any]]:
    yield pointer, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{pointer}/{index}")


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"only local refs are used, got {ref}"
    node: Any = doc
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and key in node, f"unresolvable $ref {ref}"
        node = node[key]
    return node


def _schema_name(ref_holder: dict[str, Any]) -> str:
    ref = str(ref_holder.get("$ref", ""))
    prefix = "#/components/schemas/"
    assert ref.startswith(prefix), f"expected a $ref to a named schema, got {ref_holder}"
    return ref[len(prefix) :]


def _json_schema(content: dict[str, Any]) -> dict[str, Any]:
    assert set(content) == {"application/json"}, f"only application/json, got {sorted(content)}"
    schema: dict[str, Any] = content["application/json"]["schema"]
    return schema


@pytest.fixture(scope="module")
def oas_validator() -> Draft202012Validator:
    schema = json.loads(OAS_SCHEMA_FILE.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_every_platform_has_a_document_and_nothing_else() -> None:
    found = {p.stem for p in OPENAPI_DIR.glob("*.json")}
    assert found == set(PLATFORMS)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_document_validates_against_openapi_31_schema(
    platform: str, oas_validator: Draft202012Validator
) -> None:
    doc = _load(platform)
    errors = sorted(oas_validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10]
    )
    assert doc["openapi"] == "3.1.0"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_file_is_canonical_json(platform: str) -> None:
    text = (OPENAPI_DIR / f"{platform}.json").read_text(encoding="utf-8")
    assert "\r" not in text
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_component_schemas_are_valid_json_schema_2020_12(platform: str) -> None:
    doc = _load(platform)
    for name, schema in doc["components"]["schemas"].items():
        try:
            Draft202012Validator.check_schema(schema)
        except Exception as exc:  # pragma: no cover - message is the point
            pytest.fail(f"{platform}: components.schemas.{name}: {exc}")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_info_servers_and_descriptions(platform: str) -> None:
    doc = _load(platform)
    info = doc["info"]
    assert info["title"] and info["version"]
    assert re.search(r"https://\S+", info["description"]), "info.description links the docs"
    assert doc["servers"][0]["url"].startswith("https://")
    for method, path, op in _operations(doc):
        assert op.get("summary"), f"{method} {path}: summary"
        for server in op.get("servers", []):
            assert server["url"].startswith("https://")
            assert server.get(
                "x-channelkit-server-name"
            ), f"{method} {path}: an operation-level server needs x-channelkit-server-name"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_operation_ids_unique_and_lower_camel_case(platform: str) -> None:
    doc = _load(platform)
    ids = [str(op.get("operationId") or "") for _, _, op in _operations(doc)]
    assert all(ids), "every operation has an operationId"
    assert len(ids) == len(set(ids)), f"duplicate operationIds: {sorted(ids)}"
    for op_id in ids:
        assert re.fullmatch(r"[a-z][a-zA-Z0-9]*", op_id), op_id


@pytest.mark.parametrize("platform", PLATFORMS)
def test_required_operations_present(platform: str) -> None:
    doc = _load(platform)
    actual = {(method, path): op["operationId"] for method, path, op in _operations(doc)}
    for key, op_id in REQUIRED_OPERATIONS[platform].items():
        assert actual.get(key) == op_id, f"{platform}: {key[0].upper()} {key[1]} -> {op_id}"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_ref_resolves(platform: str) -> None:
    doc = _load(platform)
    refs = [
        (ptr, node["$ref"]) for ptr, node in _walk(doc) if isinstance(node, dict) and "$ref" in node
    ]
    assert refs
    for pointer, ref in refs:
        assert isinstance(ref, str), pointer
        target = _resolve(doc, ref)
        assert isinstance(target, dict), f"{pointer}: {ref} is not an object"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_error_schema_declared_and_referenced_by_every_operation(platform: str) -> None:
    doc = _load(platform)
    schemas = doc["components"]["schemas"]
    errors = doc["x-channelkit-errors"]
    assert errors.get("messageField"), "x-channelkit-errors.messageField"
    assert errors.get("codeField") or errors.get("okField") or platform in {"line"}
    primary = f"{platform.capitalize()}ErrorBody"
    assert primary in schemas, f"{platform}: error schema {primary}"
    for method, path, op in _operations(doc):
        default = op["responses"].get("default")
        assert default, f"{method} {path}: responses.default (the error body)"
        name = _schema_name(_json_schema(default["content"]))
        assert name.endswith("ErrorBody") and name in schemas, f"{method} {path}: {name}"
        if "x-channelkit-errors" in op:
            assert op["x-channelkit-errors"].get("codeField"), f"{method} {path}"
        else:
            assert name == primary, f"{method} {path}: error body {name} != {primary}"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_success_responses_reference_named_schemas(platform: str) -> None:
    doc = _load(platform)
    for method, path, op in _operations(doc):
        success = [code for code in op["responses"] if code.startswith("2")]
        assert len(success) == 1, f"{method} {path}: exactly one 2xx response"
        response = op["responses"][success[0]]
        if success[0] == "204":
            assert "content" not in response
            continue
        _schema_name(_json_schema(response["content"]))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_parameters_and_bodies_follow_conventions(platform: str) -> None:
    doc = _load(platform)
    for method, path, op in _operations(doc):
        declared_path_params = set()
        for prm in op.get("parameters", []):
            assert prm["in"] in {"path", "query", "header"}, f"{method} {path}: {prm}"
            assert prm["schema"].get("type") in PRIMITIVE_TYPES, f"{method} {path}: {prm}"
            if prm["in"] == "path":
                assert prm.get("required") is True
                declared_path_params.add(prm["name"])
        assert declared_path_params == set(re.findall(r"{([^}]+)}", path)), f"{method} {path}"
        body = op.get("requestBody")
        if body is not None:
            content = body["content"]
            assert set(content) <= BODY_TYPES and content, f"{method} {path}: {sorted(content)}"
            for media_type, entry in content.items():
                name = _schema_name(entry["schema"])
                if media_type == "multipart/form-data":
                    _assert_upload_schema(doc, name, f"{method} {path}")
            if "multipart/form-data" in content and "application/json" in content:
                assert op.get(
                    "x-channelkit-multipart-operationId"
                ), f"{method} {path}: both bodies need a second operationId for the upload"


#: The request body media types the generator supports.
BODY_TYPES = {"application/json", "multipart/form-data"}


def _assert_upload_schema(doc: dict[str, Any], name: str, where: str) -> None:
    """A multipart body is an object of form fields with at least one file part (a
    ``"type": "string", "format": "binary"`` property)."""
    schema = doc["components"]["schemas"][name]
    assert schema.get("type") == "object", f"{where}: {name} is not an object"
    properties = schema.get("properties", {})
    files = [
        key
        for key, prop in properties.items()
        if prop.get("type") == "string" and prop.get("format") == "binary"
    ]
    assert files, f"{where}: multipart body {name} has no binary file part"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_auth_described_in_extension_and_security_schemes(platform: str) -> None:
    doc = _load(platform)
    auth = doc["x-channelkit-auth"]
    assert auth["kind"] in AUTH_KINDS
    schemes = doc.get("components", {}).get("securitySchemes", {})
    if auth["kind"] == "path-token":
        # No standard scheme describes a token in the path; every operation carries it instead.
        for method, path, op in _operations(doc):
            names = {p["name"]: p for p in op.get("parameters", []) if p["in"] == "path"}
            prm = names.get(auth["parameter"])
            assert prm is not None, f"{method} {path}: path token parameter"
            assert prm.get("x-channelkit-secret") is True
    else:
        assert schemes, f"{platform}: components.securitySchemes"
    if auth["kind"] == "header-token":
        assert auth["header"]
    if auth["kind"] in {"header-token", "bearer"} and "provider" in auth:
        assert auth["provider"] == platform
    if auth["kind"] == "bearer-static":
        assert isinstance(auth.get("headers", {}), dict)
    requirements = list(doc.get("security", []))
    for _, _, op in _operations(doc):
        requirements.extend(op.get("security", []))
    for requirement in requirements:
        for name in requirement:
            assert name in schemes, f"{platform}: security requirement {name}"


def test_idempotent_marks_match_the_documented_list() -> None:
    marked: set[tuple[str, str]] = set()
    for platform in PLATFORMS:
        for method, path, op in _operations(_load(platform)):
            flag = op.get("x-channelkit-idempotent")
            if flag is None:
                continue
            assert isinstance(flag, bool), f"{platform} {path}"
            assert method == "post", f"{platform} {method} {path}: only POSTs carry the mark"
            if flag:
                marked.add((platform, op["operationId"]))
    assert marked - IDEMPOTENT_POSTS.keys() == set(), "marked idempotent but not in the list"
    assert IDEMPOTENT_POSTS.keys() - marked == set(), "listed but not marked idempotent"


def test_sending_a_message_is_never_marked_idempotent() -> None:
    senders = {
        ("dingtalk", "createAndDeliverCard"),
        ("dingtalk", "batchSendRobotOtoMessages"),
        ("dingtalk", "sendRobotGroupMessage"),
        ("feishu", "createMessage"),
        ("feishu", "replyMessage"),
        ("telegram", "sendMessage"),
        ("weixin", "sendMessage"),
        ("slack", "chatPostMessage"),
        ("discord", "createMessage"),
        ("mattermost", "createPost"),
        ("line", "pushMessage"),
        ("line", "replyMessage"),
        ("msteams", "sendToConversation"),
    }
    assert not senders & IDEMPOTENT_POSTS.keys()


@pytest.mark.parametrize("platform", PLATFORMS)
def test_credentials_are_marked_secret(platform: str) -> None:
    doc = _load(platform)
    for pointer, node in _walk(doc):
        if not isinstance(node, dict):
            continue
        if pointer.endswith("/properties"):
            for name, prop in node.items():
                if SECRET_NAME.search(name) and name not in NOT_CREDENTIALS:
                    assert prop.get("x-channelkit-secret") is True, f"{pointer}/{name}"
        if "in" in node and "name" in node and SECRET_NAME.search(node["name"]):
            assert node.get("x-channelkit-secret") is True, f"{pointer}: {node['name']}"
