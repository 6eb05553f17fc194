"""``BaseClient``: what every generated ``<Platform>Client`` runs on.

A generated client is a subclass that declares, as class attributes taken from its OpenAPI
document, the servers (``SERVERS``), the auth scheme (``AUTH``), the error conventions
(``ERRORS``) and the JSON schemas of its request bodies (``SCHEMAS``); each generated method
describes its operation with an `Operation` and calls `BaseClient._call()`.

One call: check and encode the arguments (a missing or wrong-typed argument raises
`ConfigurationError` naming it, before any network traffic),
optionally validate the body against the spec schema (``validate=True``), then attempt the
request under the `RetryPolicy`, adding the token from the
token provider on each attempt and invalidating it and retrying once on an
`AuthError`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from channelkit.errors import (
    ApiError,
    AuthError,
    ChannelKitError,
    ConfigurationError,
    DeserializationError,
    TransportError,
)
from channelkit.http.auth import PROVIDERS, StaticTokenProvider, TokenProvider
from channelkit.http.errormap import ErrorSpec, map_error
from channelkit.http.model import UNSET, Codec, Model, encode_value
from channelkit.http.redact import redact_url, redact_value
from channelkit.http.retry import RetryPolicy
from channelkit.http.transport import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    Timeout,
    Transport,
    normalize_timeout,
)
from channelkit.observability import hub

if TYPE_CHECKING:
    import jsonschema
    import requests

__all__ = ["AuthSpec", "BaseClient", "Operation", "Param"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuthSpec:
    """How a platform authenticates (the spec's ``x-channelkit-auth``).

    ``kind`` is ``none``, ``header-token`` (token in ``header``), ``bearer``
    (``Authorization: Bearer``), ``path-token`` (the path parameter ``parameter``) or
    ``bearer-static`` (a fixed bearer token plus fixed ``headers``); ``prefix`` goes before
    the token in a ``header-token`` header (Discord's ``"Bot "``). ``provider`` names a
    refreshing provider in `channelkit.http.auth.PROVIDERS`; ``credentials`` are the
    constructor arguments it needs.
    """

    kind: str = "none"
    header: str | None = None
    prefix: str = ""
    parameter: str | None = None
    provider: str | None = None
    credentials: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Param:
    """One path/query/header parameter of an operation."""

    name: str
    wire: str
    location: str
    codec: Codec
    required: bool = False
    secret: bool = False


@dataclass(frozen=True)
class Operation:
    """One OpenAPI operation, as the generated method describes it to `BaseClient._call()`."""

    operation_id: str
    method: str
    path: str
    server: str = "default"
    params: tuple[Param, ...] = ()
    body_schema: str | None = None
    body_required: bool = False
    body_codec: Codec | None = None
    #: ``json`` or ``multipart`` (``multipart/form-data``: `channelkit.http.multipart`)
    body_format: str = "json"
    idempotent: bool = False
    authenticated: bool = True
    errors: ErrorSpec | None = None


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_stringify(v) for v in value)
    return str(value)


class BaseClient:
    """Shared machinery of the generated platform clients (see the module docstring).

    Keyword arguments common to every generated client:

    ``base_url``
        Send every operation to this URL instead of the spec's servers (the playground
        emulator and tests point it at ``http://127.0.0.1:<port>``).
    ``server_urls``
        Override single named servers, e.g. ``{"legacy": "http://127.0.0.1:9000"}``;
        ``"default"`` is ``servers[0]``.
    ``timeout``
        Default deadline in seconds: one number bounds each attempt as a whole (connect,
        send and the whole answer, headers included), a ``(connect, total)`` pair also
        bounds the connection; ``(3.05, 10.0)`` unless given. Token fetches get the same.
        Each method also takes ``timeout=`` for one call.
    ``retry``
        A `RetryPolicy` (3 attempts by default).
    ``validate``
        Validate request bodies against the spec's JSON schema before sending.
    ``session`` / ``max_workers``
        Share a ``requests.Session`` between clients, or let the client make one whose
        connection pool holds ``max_workers`` connections per host.
    ``token_provider``
        Supply tokens yourself instead of giving credentials.
    """

    PLATFORM: ClassVar[str] = ""
    SPEC_FILE: ClassVar[str] = ""
    SERVERS: ClassVar[Mapping[str, str]] = {}
    AUTH: ClassVar[AuthSpec] = AuthSpec()
    ERRORS: ClassVar[ErrorSpec] = ErrorSpec()
    SCHEMAS: ClassVar[Mapping[str, Any]] = {}

    _validators: ClassVar[dict[str, jsonschema.protocols.Validator]]
    _validators_lock: ClassVar[threading.Lock]

    def __init__(
        self,
        *,
        credentials: Mapping[str, str | None] | None = None,
        token: str | None = None,
        token_provider: TokenProvider | None = None,
        base_url: str | None = None,
        server_urls: Mapping[str, str] | None = None,
        timeout: Timeout | None = None,
        retry: RetryPolicy | None = None,
        validate: bool = False,
        session: requests.Session | None = None,
        max_workers: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self._base_url = base_url.rstrip("/") if base_url else None
        self._server_urls: dict[str, str] = {}
        for name, url in (server_urls or {}).items():
            if name not in self.SERVERS:
                known = ", ".join(sorted(self.SERVERS))
                raise ConfigurationError(f"unknown server (known: {known})", f"server_urls.{name}")
            self._server_urls[name] = url.rstrip("/")
        self._timeout = normalize_timeout(timeout, DEFAULT_TIMEOUT)
        self._retry = retry if retry is not None else RetryPolicy()
        self._validate = validate
        self._transport = Transport(session, pool_size=max_workers)
        self._token_provider = self._make_provider(credentials or {}, token, token_provider)
        #: ``pace(operation_id, path_args, body)``, called before each call goes out (not
        #: before its retries): the platform's outbound rate limits may make it wait
        #: (`channelkit.platforms.common.rate_limit.OutboundPacer`); None: no pacing
        self.pace: Callable[[str, Mapping[str, Any], Any], None] | None = None

    # -- construction helpers -------------------------------------------------------------

    def _make_provider(
        self,
        credentials: Mapping[str, str | None],
        token: str | None,
        token_provider: TokenProvider | None,
    ) -> TokenProvider | None:
        if token_provider is not None:
            return token_provider
        kind = self.AUTH.kind
        if kind in ("path-token", "bearer-static") or (kind != "none" and token is not None):
            return StaticTokenProvider(token) if token is not None else None
        if self.AUTH.provider is None or self.AUTH.provider not in PROVIDERS:
            return None
        given = {k: v for k, v in credentials.items() if v is not None}
        if not given:
            return None
        missing = [k for k in self.AUTH.credentials if k not in given]
        if missing:
            raise ConfigurationError("required together with the other credentials", missing[0])
        provider_cls = PROVIDERS[self.AUTH.provider]
        shares_host = getattr(provider_cls, "uses_client_base_url", True)
        base_url = self.server_url("default") if shares_host else None
        return provider_cls(
            *(given[k] for k in self.AUTH.credentials),
            base_url=base_url,
            transport=self._transport,
            timeout=self._timeout,
            wall_clock=self._retry.clock,
        )

    @property
    def token_provider(self) -> TokenProvider | None:
        """The provider supplying this client's tokens (``None`` when not configured)."""
        return self._token_provider

    def server_url(self, name: str = "default") -> str:
        """The base URL requests to server ``name`` go to, after overrides."""
        if self._base_url is not None:
            return self._base_url
        if name in self._server_urls:
            return self._server_urls[name]
        try:
            return self.SERVERS[name].rstrip("/")
        except KeyError:
            raise ConfigurationError("no such server in the spec", f"server {name}") from None

    def close(self) -> None:
        """Release the HTTP connection pool (if this client created the session)."""
        self._transport.close()

    def __enter__(self) -> BaseClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call ---------------------------------------------------------------------------

    def _encode_params(
        self, op: Operation, args: Mapping[str, Any]
    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        path: dict[str, str] = {}
        query: dict[str, str] = {}
        headers: dict[str, str] = {}
        for param in op.params:
            if self.AUTH.kind == "path-token" and param.wire == self.AUTH.parameter:
                continue
            value = args.get(param.name)
            if value is None or value is UNSET:
                if param.required:
                    raise ConfigurationError("required parameter is missing", param.name)
                continue
            encoded = param.codec.encode(value, param.name)
            text = _stringify(encoded)
            if param.location == "path":
                path[param.wire] = quote(text, safe="")
            elif param.location == "query":
                query[param.wire] = text
            else:
                headers[param.wire] = text
        return path, query, headers

    def _encode_body(self, op: Operation, body: Any) -> Any:
        if body is None or body is UNSET:
            if op.body_required:
                raise ConfigurationError("a request body is required", "body")
            return UNSET
        if isinstance(body, Model):
            if op.body_codec is not None:
                return op.body_codec.encode(body, "body")
            return body.to_dict()
        if isinstance(body, Mapping):
            return encode_value(body)
        raise ConfigurationError(f"expected a model or a dict, got {type(body).__name__}", "body")

    @classmethod
    def _validator(cls, schema_name: str) -> jsonschema.protocols.Validator:
        if "_validators" not in cls.__dict__:
            cls._validators = {}
            cls._validators_lock = threading.Lock()
        with cls._validators_lock:
            found = cls._validators.get(schema_name)
            if found is None:
                root = {
                    "$ref": f"#/components/schemas/{schema_name}",
                    "components": {"schemas": dict(cls.SCHEMAS)},
                }
                import jsonschema  # only clients built with validate=True need it

                found = jsonschema.Draft202012Validator(root)
                cls._validators[schema_name] = found
            return found

    def _check_body(self, op: Operation, payload: Any) -> None:
        if op.body_schema is None:
            return
        import jsonschema

        error = jsonschema.exceptions.best_match(
            self._validator(op.body_schema).iter_errors(payload)
        )
        if error is not None:
            where = "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
            )
            raise ConfigurationError(error.message, f"body{where}")

    def _auth_headers(
        self, op: Operation, path_values: dict[str, str]
    ) -> tuple[dict[str, str], str | None]:
        auth = self.AUTH
        headers = dict(auth.headers) if op.authenticated else {}
        if not op.authenticated or auth.kind == "none":
            return headers, None
        if self._token_provider is None:
            needed = ", ".join(auth.credentials) if auth.credentials else "token"
            raise ConfigurationError(
                f"{type(self).__name__} needs {needed} (or token_provider=) for "
                f"{op.operation_id}",
                auth.credentials[0] if auth.credentials else "token",
            )
        token = self._token_provider.get_token()
        if auth.kind == "header-token" and auth.header:
            headers[auth.header] = f"{auth.prefix}{token}"
        elif auth.kind in ("bearer", "bearer-static"):
            headers["Authorization"] = f"Bearer {token}"
        elif auth.kind == "path-token" and auth.parameter:
            path_values[auth.parameter] = quote(token, safe=":")
        return headers, token

    def _call(
        self,
        op: Operation,
        args: Mapping[str, Any],
        *,
        body: Any = None,
        timeout: Timeout | None = None,
    ) -> Any:
        """Run ``op`` and return the parsed JSON body of its successful response."""
        call_timeout = normalize_timeout(timeout, self._timeout)
        path_values, query, param_headers = self._encode_params(op, args)
        payload = self._encode_body(op, body)
        has_body = payload is not UNSET
        if has_body and self._validate and op.body_format == "json":
            self._check_body(op, payload)
        pace = self.pace
        if pace is not None:
            pace(op.operation_id, args, payload)
        base = self.server_url(op.server)
        errors = op.errors or self.ERRORS
        attempt = 1
        auth_retried = False
        while True:
            token: str | None = None
            started = time.monotonic()
            try:
                values = dict(path_values)
                auth_headers, token = self._auth_headers(op, values)
                headers = {"Accept": "application/json", **auth_headers, **param_headers}
                multipart = has_body and op.body_format == "multipart"
                if has_body and not multipart:
                    headers["Content-Type"] = "application/json; charset=utf-8"
                url = base + op.path.format_map(values)
                try:
                    response = self._transport.request(
                        op.method,
                        url,
                        timeout=call_timeout,
                        params=query,
                        headers=headers,
                        json_body=payload if has_body and not multipart else None,
                        has_body=has_body and not multipart,
                        multipart=payload if multipart else None,
                    )
                except TransportError as exc:
                    status = "timeout" if exc.timeout else "error"
                    hub.api_call(self.PLATFORM, op.operation_id, status, time.monotonic() - started)
                    raise
                hub.api_call(
                    self.PLATFORM,
                    op.operation_id,
                    str(response.status_code),
                    time.monotonic() - started,
                )
                parsed = _parse_body(response)
                logger.debug(
                    "%s %s -> %s in %.3f s (attempt %d)",
                    op.method,
                    redact_url(url),
                    response.status_code,
                    time.monotonic() - started,
                    attempt,
                )
                error = map_error(
                    response.status_code,
                    response.headers,
                    parsed.text if isinstance(parsed, _Unparsed) else parsed,
                    errors,
                    clock=self._retry.clock,
                )
                if error is None:
                    if isinstance(parsed, _Unparsed):
                        raise DeserializationError(
                            "<body>", redact_value(parsed.text), "response is not JSON"
                        )
                    return parsed
                raise error
            except ConfigurationError:
                raise
            except DeserializationError:
                raise
            except ChannelKitError as exc:
                if (
                    isinstance(exc, AuthError)
                    and not auth_retried
                    and token is not None
                    and getattr(self._token_provider, "refreshable", False)
                    and self._token_provider is not None
                ):
                    auth_retried = True
                    self._token_provider.invalidate(token)
                    logger.info("%s: token rejected, refreshing once", op.operation_id)
                    continue
                delay = self._retry.delay(attempt, exc, idempotent=op.idempotent)
                if delay is None:
                    raise
                logger.info(
                    "%s: attempt %d failed (%s), retrying in %.2f s",
                    op.operation_id,
                    attempt,
                    _describe(exc),
                    delay,
                )
                self._retry.sleep(delay)
                attempt += 1


class _Unparsed:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return repr(self.text[:200])


def _parse_body(response: requests.Response) -> Any:
    if not response.content:
        return None
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):
        # garbage, or nesting deep enough to exhaust the decoder's recursion: a failed
        # call (DeserializationError), never an exception from inside the decoder
        return _Unparsed(response.text[:2000])


def _describe(exc: ChannelKitError) -> str:
    if isinstance(exc, ApiError):
        return f"{type(exc).__name__} HTTP {exc.status}"
    return type(exc).__name__
