"""Token providers used by the generated clients.

A provider hands out the current access token (`TokenProvider.get_token()`) and drops
it when the platform rejects it (`TokenProvider.invalidate()`); the client then retries
the call once with a fresh token.

`RefreshingTokenProvider` caches the token and refreshes it ahead of expiry, the way
botocore's ``DeferredRefreshableToken`` does:

- outside the *advisory* window the cached token is returned without taking a lock;
- inside the advisory window (``advisory_refresh`` seconds before expiry) one caller
  refreshes while the others keep using the still-valid token; a failed advisory refresh
  is logged and the old token kept;
- inside the *mandatory* window (``mandatory_refresh`` seconds before expiry) or with no
  token, callers queue on the lock (with a timeout) and exactly one fetches; the rest find
  the fresh token when they get the lock. N concurrent callers cause one token request.

Concrete providers: `DingTalkTokenProvider` (``POST /v1.0/oauth2/accessToken``),
`FeishuTokenProvider` (``POST /open-apis/auth/v3/tenant_access_token/internal``),
`BotFrameworkTokenProvider` (Microsoft Teams, OAuth 2.0 client credentials at
``login.microsoftonline.com``) and `StaticTokenProvider` (Telegram bot token,
Weixin bot token).
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from channelkit.errors import (
    ApiError,
    AuthError,
    ChannelKitError,
    ConfigurationError,
    DeserializationError,
    TransportError,
)
from channelkit.http.errormap import ErrorSpec, map_error
from channelkit.http.redact import REDACTOR, redact_value
from channelkit.http.transport import DEFAULT_TIMEOUT, Transport

if TYPE_CHECKING:
    import requests

__all__ = [
    "PROVIDERS",
    "BotFrameworkTokenProvider",
    "DingTalkTokenProvider",
    "FeishuTokenProvider",
    "RefreshingTokenProvider",
    "StaticTokenProvider",
    "Token",
    "TokenProvider",
]

logger = logging.getLogger(__name__)


@runtime_checkable
class TokenProvider(Protocol):
    """Supplies the access token a client sends."""

    def get_token(self) -> str:
        """The token to use now (may block while one caller fetches a new one)."""
        ...

    def invalidate(self, token: str | None = None) -> None:
        """Forget ``token`` (or the current token) after the platform rejected it."""
        ...


@dataclass(frozen=True)
class Token:
    """A token and the clock reading at which it expires."""

    value: str
    expires_at: float


class StaticTokenProvider:
    """A fixed token given at construction (Telegram bot token, Weixin iLink bot token)."""

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token:
            raise ConfigurationError("a non-empty token is required", "token")
        self._token = token
        REDACTOR.add(token)

    def get_token(self) -> str:
        """Return the configured token."""
        return self._token

    def invalidate(self, token: str | None = None) -> None:
        """Nothing to refresh: a rejected static token stays rejected."""

    def __repr__(self) -> str:
        return "StaticTokenProvider(token=***)"


class RefreshingTokenProvider(abc.ABC):
    """Caches a token from `fetch()` and refreshes it ahead of expiry under a lock.

    ``clock`` is a monotonic clock in seconds (inject a fake one in tests).
    """

    refreshable = True
    #: whether the client's ``base_url`` is also the token endpoint's host (DingTalk,
    #: Feishu); providers whose token comes from elsewhere set this to False
    uses_client_base_url = True

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        advisory_refresh: float = 300.0,
        mandatory_refresh: float = 60.0,
        lock_timeout: float = 30.0,
        retry_advisory_after: float = 30.0,
    ) -> None:
        if mandatory_refresh > advisory_refresh:
            raise ConfigurationError("must not exceed advisory_refresh", "mandatory_refresh")
        self._clock = clock
        self._advisory = advisory_refresh
        self._mandatory = mandatory_refresh
        self._lock_timeout = lock_timeout
        self._retry_advisory_after = retry_advisory_after
        self._lock = threading.Lock()
        self._current: Token | None = None
        self._next_advisory_try = 0.0
        self.fetch_count = 0

    @abc.abstractmethod
    def fetch(self) -> tuple[str, float]:
        """Request a new token from the platform: ``(token, lifetime in seconds)``."""

    def get_token(self) -> str:
        """The cached token, refreshed first when it is missing or about to expire."""
        current = self._current
        now = self._clock()
        if current is not None and now < current.expires_at - self._advisory:
            return current.value
        if current is not None and now < current.expires_at - self._mandatory:
            if now >= self._next_advisory_try and self._lock.acquire(blocking=False):
                try:
                    if self._current is current:
                        self._refresh_advisory()
                finally:
                    self._lock.release()
            latest = self._current
            return (latest or current).value
        if not self._lock.acquire(timeout=self._lock_timeout):
            raise TransportError(
                f"timed out after {self._lock_timeout} s waiting for a token refresh",
                timeout=True,
            )
        try:
            current = self._current
            if current is not None and self._clock() < current.expires_at - self._mandatory:
                return current.value
            return self._refresh().value
        finally:
            self._lock.release()

    def invalidate(self, token: str | None = None) -> None:
        """Drop the cached token (only if it is still ``token``, when given)."""
        with self._lock:
            if self._current is not None and (token is None or self._current.value == token):
                self._current = None

    def _refresh(self) -> Token:
        started = self._clock()
        value, lifetime = self.fetch()
        self.fetch_count += 1
        if not value:
            raise DeserializationError("token", value, "the platform returned an empty token")
        REDACTOR.add(value)
        token = Token(value, started + float(lifetime))
        self._current = token
        logger.debug("%s: fetched a token valid for %s s", type(self).__name__, lifetime)
        return token

    def _refresh_advisory(self) -> None:
        try:
            self._refresh()
        except ChannelKitError as exc:
            self._next_advisory_try = self._clock() + self._retry_advisory_after
            logger.warning(
                "%s: early token refresh failed, keeping the current token: %s",
                type(self).__name__,
                exc,
            )


def _post(
    transport: Transport,
    url: str,
    timeout: tuple[float, float],
    *,
    json_body: Mapping[str, Any] | None = None,
    form_body: Mapping[str, str] | None = None,
) -> tuple[requests.Response, Any]:
    """POST a JSON or form body to a token endpoint; the response and its parsed body."""
    headers = {"Accept": "application/json"}
    if json_body is not None:
        headers["Content-Type"] = "application/json"
    response = transport.request(
        "POST",
        url,
        timeout=timeout,
        headers=headers,
        json_body=dict(json_body) if json_body is not None else None,
        has_body=json_body is not None,
        form_body=form_body,
    )
    try:
        parsed = response.json() if response.content else None
    except (ValueError, RecursionError):
        parsed = response.text[:500]
    return response, parsed


def _as_auth_error(error: ApiError, what: str) -> ApiError:
    """Credential rejections at a token endpoint are AuthErrors whatever the status."""
    if error.retryable or isinstance(error, AuthError):
        return error
    return AuthError(
        f"{what}: {error.message}",
        status=error.status,
        code=error.code,
        request_id=error.request_id,
        body=error.body,
    )


class AppCredentialTokenProvider(RefreshingTokenProvider):
    """A token exchanged for an app id + secret with one JSON ``POST``.

    Subclasses name the endpoint and the wire fields; the exchange, the error mapping (an
    auth failure of the token endpoint is an `AuthError`), the response checks and
    the secret's redaction are shared.
    """

    LABEL = "access token"
    DEFAULT_BASE_URL = ""
    PATH = ""
    ERRORS = ErrorSpec()
    #: argument names (for errors) and the wire names of the id and the secret
    ID_ARG, SECRET_ARG = "app_id", "app_secret"
    ID_FIELD, SECRET_FIELD = "app_id", "app_secret"
    #: the token and its lifetime (seconds) in the response
    TOKEN_FIELD, EXPIRE_FIELD = "access_token", "expire"

    def __init__(
        self,
        app_id: str,
        app_secret: str,
        *,
        base_url: str | None = None,
        transport: Transport | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        wall_clock: Callable[[], float] = time.time,
        **options: Any,
    ) -> None:
        for name, value in ((self.ID_ARG, app_id), (self.SECRET_ARG, app_secret)):
            if not isinstance(value, str) or not value:
                raise ConfigurationError("a non-empty string is required", name)
        super().__init__(**options)
        self._app_id = app_id
        self._app_secret = app_secret
        REDACTOR.add(app_secret)
        self._url = (base_url or self.DEFAULT_BASE_URL).rstrip("/") + self.PATH
        self._transport = transport or Transport()
        self._timeout = timeout
        self._wall_clock = wall_clock

    def fetch(self) -> tuple[str, float]:
        """Exchange the app credentials for a token and its lifetime in seconds."""
        body = {self.ID_FIELD: self._app_id, self.SECRET_FIELD: self._app_secret}
        response, parsed = _post(self._transport, self._url, self._timeout, json_body=body)
        error = map_error(
            response.status_code, response.headers, parsed, self.ERRORS, clock=self._wall_clock
        )
        if error is not None:
            raise _as_auth_error(error, f"{self.LABEL} request failed")
        if not isinstance(parsed, dict) or not isinstance(parsed.get(self.TOKEN_FIELD), str):
            raise DeserializationError(
                self.TOKEN_FIELD, redact_value(parsed), "missing from the token response"
            )
        expire = parsed.get(self.EXPIRE_FIELD, 7200)
        if not isinstance(expire, int | float) or isinstance(expire, bool):
            raise DeserializationError(self.EXPIRE_FIELD, expire, "expected integer seconds")
        return parsed[self.TOKEN_FIELD], float(expire)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.ID_ARG}={self._app_id!r}, {self.SECRET_ARG}=***)"


class DingTalkTokenProvider(AppCredentialTokenProvider):
    """DingTalk internal-app access token: ``POST /v1.0/oauth2/accessToken`` (7200 s).

    ``DingTalkTokenProvider(app_key, app_secret, base_url=..., clock=...)``.
    """

    LABEL = "DingTalk access token"
    DEFAULT_BASE_URL = "https://api.dingtalk.com"
    PATH = "/v1.0/oauth2/accessToken"
    ERRORS = ErrorSpec(code_field="code", message_field="message", request_id_field="requestid")
    ID_ARG, SECRET_ARG = "app_key", "app_secret"
    ID_FIELD, SECRET_FIELD = "appKey", "appSecret"
    TOKEN_FIELD, EXPIRE_FIELD = "accessToken", "expireIn"


class FeishuTokenProvider(AppCredentialTokenProvider):
    """Feishu/Lark tenant access token for a self-built app (``expire`` seconds, max 2 h).

    ``FeishuTokenProvider(app_id, app_secret, base_url=..., clock=...)``.
    """

    LABEL = "Feishu tenant access token"
    DEFAULT_BASE_URL = "https://open.feishu.cn"
    PATH = "/open-apis/auth/v3/tenant_access_token/internal"
    ERRORS = ErrorSpec(
        code_field="code",
        message_field="msg",
        success_values=(0,),
        request_id_header="x-tt-logid",
        rate_limit_codes=(99991400,),
    )
    TOKEN_FIELD, EXPIRE_FIELD = "tenant_access_token", "expire"


class BotFrameworkTokenProvider(RefreshingTokenProvider):
    """Microsoft Bot Framework (Teams) token from the OAuth 2.0 client-credentials flow.

    ``POST https://login.microsoftonline.com/<tenant>/oauth2/v2.0/token`` with the form
    fields ``grant_type=client_credentials``, ``client_id``, ``client_secret`` and
    ``scope=https://api.botframework.com/.default``; the answer carries ``access_token``
    and ``expires_in`` (about 3,600 s). ``tenant`` is ``botframework.com`` for multi-tenant
    bots and the Azure AD tenant id for single-tenant ones. The token endpoint is not on
    the Bot Connector host, so ``login_url`` (not the client's ``base_url``) moves it, for
    example to a local emulator. Rejected credentials raise `AuthError` carrying
    Azure AD's ``error`` code, ``error_description`` and ``correlation_id``.

    ``BotFrameworkTokenProvider(app_id, app_password, tenant=..., clock=...)``.
    """

    LABEL = "Bot Framework access token"
    DEFAULT_LOGIN_URL = "https://login.microsoftonline.com"
    DEFAULT_TENANT = "botframework.com"
    DEFAULT_SCOPE = "https://api.botframework.com/.default"
    ERRORS = ErrorSpec(
        code_field="error", message_field="error_description", request_id_field="correlation_id"
    )
    uses_client_base_url = False

    def __init__(
        self,
        app_id: str,
        app_password: str,
        *,
        tenant: str = DEFAULT_TENANT,
        scope: str = DEFAULT_SCOPE,
        login_url: str | None = None,
        base_url: str | None = None,
        transport: Transport | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        wall_clock: Callable[[], float] = time.time,
        **options: Any,
    ) -> None:
        del base_url  # the Bot Connector host; the token comes from ``login_url``
        for name, value in (
            ("app_id", app_id),
            ("app_password", app_password),
            ("tenant", tenant),
            ("scope", scope),
        ):
            if not isinstance(value, str) or not value:
                raise ConfigurationError("a non-empty string is required", name)
        if "/" in tenant:
            raise ConfigurationError("a tenant id or domain, without '/'", "tenant")
        super().__init__(**options)
        self._app_id = app_id
        self._app_password = app_password
        REDACTOR.add(app_password)
        self._scope = scope
        root = (login_url or self.DEFAULT_LOGIN_URL).rstrip("/")
        self._url = f"{root}/{tenant}/oauth2/v2.0/token"
        self._transport = transport or Transport()
        self._timeout = timeout
        self._wall_clock = wall_clock

    @property
    def token_url(self) -> str:
        """The token endpoint this provider posts to."""
        return self._url

    def fetch(self) -> tuple[str, float]:
        """Run the client-credentials exchange; return the token and its lifetime."""
        form = {
            "grant_type": "client_credentials",
            "client_id": self._app_id,
            "client_secret": self._app_password,
            "scope": self._scope,
        }
        response, parsed = _post(self._transport, self._url, self._timeout, form_body=form)
        error = map_error(
            response.status_code, response.headers, parsed, self.ERRORS, clock=self._wall_clock
        )
        if error is None and isinstance(parsed, dict) and "error" in parsed:
            error = map_error(400, response.headers, parsed, self.ERRORS, clock=self._wall_clock)
        if error is not None:
            raise _as_auth_error(error, f"{self.LABEL} request failed")
        if not isinstance(parsed, dict) or not isinstance(parsed.get("access_token"), str):
            raise DeserializationError(
                "access_token", redact_value(parsed), "missing from the token response"
            )
        expires_in = parsed.get("expires_in", 3600)
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)  # Azure AD v1 endpoints send it as a string
        if not isinstance(expires_in, int | float) or isinstance(expires_in, bool):
            raise DeserializationError("expires_in", expires_in, "expected integer seconds")
        return parsed["access_token"], float(expires_in)

    def __repr__(self) -> str:
        return f"BotFrameworkTokenProvider(app_id={self._app_id!r}, app_password=***)"


class _RegisteredProviders(Mapping[str, Callable[..., RefreshingTokenProvider]]):
    """The refreshing token providers of the registered platforms (each platform's
    ``token_provider`` in ``channelkit.platforms.PLATFORMS``), by platform name; a
    provider class is imported when it is looked up."""

    @staticmethod
    def _refs() -> dict[str, Any]:
        from channelkit.platforms.registry import PLATFORMS

        return {
            name: spec.token_provider
            for name, spec in PLATFORMS.items()
            if spec.token_provider is not None
        }

    def __getitem__(self, name: str) -> Callable[..., RefreshingTokenProvider]:
        provider: Callable[..., RefreshingTokenProvider] = self._refs()[name].load()
        return provider

    def __iter__(self) -> Iterator[str]:
        return iter(self._refs())

    def __len__(self) -> int:
        return len(self._refs())

    def __repr__(self) -> str:
        return f"PROVIDERS({', '.join(self)})"


PROVIDERS: Mapping[str, Callable[..., RefreshingTokenProvider]] = _RegisteredProviders()
"""Token providers by the ``provider`` name used in a spec's ``x-channelkit-auth`` (the
platform's name), read from the platform registry."""
