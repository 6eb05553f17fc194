"""What every platform's start-up credential check shares: one bounded call, its
failure turned into a `CredentialCheckFailed` that names the credential.

A platform's check (the `check_credentials` entry of its `PlatformSpec`) makes one
cheap, read-only call with the credential (Telegram `getMe`, Slack `auth.test`, an
access-token exchange) through `probe()`:

* the platform refuses (an `AuthError`, or any other 4xx answer): `refused=True`,
  "was refused by Telegram (HTTP 401: Unauthorized)";
* no verdict (no answer within the bound, a 5xx, a rate limit, an answer that does not
  parse): `refused=False`, "could not be checked: Telegram did not answer ...".

Either way the message names what the platform said and never a secret (the platform's
error text has already been scrubbed by the client; URLs are shown redacted).
"""

from __future__ import annotations

from collections.abc import Callable

from channelkit.errors import (
    ApiError,
    AuthError,
    CredentialCheckFailed,
    DeserializationError,
    RateLimited,
    TransportError,
)
from channelkit.http.transport import platform_timeout

__all__ = ["api_detail", "check_timeout", "probe"]


def check_timeout(timeout: float) -> tuple[float, float]:
    """The `(connect, total)` pair of a check bounded by `timeout` seconds."""
    return platform_timeout(timeout)


def api_detail(error: ApiError) -> str:
    """What the platform answered, short: `HTTP 401: Unauthorized`, `invalid_auth`
    (Slack's HTTP 200 refusals), `HTTP 400, code 10014: app secret invalid`."""
    head: list[str] = []
    if error.status != 200:
        head.append(f"HTTP {error.status}")
    code = error.code
    message = " ".join(str(error.message or "").split())[:200]
    if code is not None and str(code) not in (str(error.status), message):
        head.append(f"code {code}")
    if not head:
        return message or "an error"
    return ", ".join(head) + (f": {message}" if message else "")


def probe(call: Callable[[], object], *, field: str, platform: str) -> None:
    """Run `call` (one platform call made with the credential `field`); raise
    `CredentialCheckFailed` naming `field` when the platform refuses it or cannot be
    asked. `platform` is its display name ("Telegram")."""
    try:
        call()
    except AuthError as exc:
        raise CredentialCheckFailed(
            field, f"was refused by {platform} ({api_detail(exc)})"
        ) from None
    except RateLimited as exc:
        raise CredentialCheckFailed(
            field,
            f"could not be checked: {platform} is rate limiting ({api_detail(exc)})",
            refused=False,
        ) from None
    except ApiError as exc:
        if exc.retryable or exc.status >= 500:
            raise CredentialCheckFailed(
                field,
                f"could not be checked: {platform} answered {api_detail(exc)}",
                refused=False,
            ) from None
        raise CredentialCheckFailed(
            field, f"was refused by {platform} ({api_detail(exc)})"
        ) from None
    except TransportError as exc:
        what = "did not answer in time" if exc.timeout else "could not be reached"
        raise CredentialCheckFailed(
            field,
            f"could not be checked: {platform} {what} ({' '.join(str(exc).split())[:200]})",
            refused=False,
        ) from None
    except DeserializationError as exc:
        raise CredentialCheckFailed(
            field,
            f"could not be checked: {platform} answered something unexpected ({exc})",
            refused=False,
        ) from None
