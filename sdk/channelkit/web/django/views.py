"""Django views over :class:`~channelkit.web.dispatch.IngressDispatcher`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from channelkit.web.dispatch import (
    BadContentLength,
    BodyTooLarge,
    IngressDispatcher,
    UnreadableBody,
    query_dict,
    read_body,
)
from channelkit.web.ingress import (
    MAX_BODY_BYTES,
    Headers,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    SupportsIngress,
)

__all__ = ["IngressView", "make_view", "urlpatterns"]


def _import_django() -> Any:
    try:
        import django.http
        import django.urls
        import django.views.decorators.csrf
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "channelkit.web.django needs Django: python -m pip install 'channelkit[django]'"
        ) from exc
    return django


def _headers(meta: dict[str, Any]) -> Headers:
    pairs: list[tuple[str, str]] = []
    for key, value in meta.items():
        if key.startswith("HTTP_"):
            pairs.append((key[5:].replace("_", "-").title(), str(value)))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            pairs.append((key.replace("_", "-").title(), str(value)))
    return Headers(pairs)


class IngressView:
    """A CSRF-exempt Django view serving one mounted path of a dispatcher."""

    csrf_exempt = True

    def __init__(self, dispatcher: IngressDispatcher, path: str) -> None:
        self.dispatcher = dispatcher
        self.path = path

    def _to_django(self, response: IngressResponse) -> Any:
        django = _import_django()
        result = django.http.HttpResponse(response.body, status=response.status)
        for header, value in response.headers:
            result[header] = value
        if response.after:
            # Django's handler closes the response after sending it (the test client
            # too); the deferred work starts only then.
            _run_after_close(result, response)
        return result

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        early = self.dispatcher.preflight(request.method, self.path)
        if early is not None:
            return self._to_django(early)
        try:
            # request.read() streams from the WSGI input without Django's in-memory limit.
            body = read_body(
                request,
                request.META.get("CONTENT_LENGTH"),
                limit=self.dispatcher.max_body_bytes,
            )
        except BodyTooLarge:
            return self._to_django(self.dispatcher.too_large())
        except UnreadableBody:
            return self._to_django(self.dispatcher.bad_request("unreadable_body"))
        except BadContentLength:
            return self._to_django(self.dispatcher.bad_request("bad_content_length"))
        ingress = IngressRequest(
            method=str(request.method).upper(),
            path=self.path,
            headers=_headers(request.META),
            body=body,
            query=query_dict(request.GET.items()),
            remote_addr=request.META.get("REMOTE_ADDR"),
        )
        return self._to_django(self.dispatcher.dispatch(ingress))


def make_view(dispatcher: IngressDispatcher, path: str) -> IngressView:
    """The view serving ``path`` of ``dispatcher``."""
    return IngressView(dispatcher, path)


def urlpatterns(
    channels: Iterable[SupportsIngress | IngressRoute],
    *,
    prefix: str = "",
    healthz: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> list[Any]:
    """Django URL patterns for every channel's ingress paths (plus ``healthz``).

    ``prefix`` (e.g. ``"hooks/"``) is prepended to each path. Behaviour matches
    :func:`channelkit.web.create_wsgi_app`.
    """
    django = _import_django()
    csrf_exempt = django.views.decorators.csrf.csrf_exempt
    dispatcher = IngressDispatcher(channels, healthz=healthz, max_body_bytes=max_body_bytes)
    patterns: list[Any] = []
    for index, path in enumerate(dispatcher.paths):
        route = prefix + path.lstrip("/")
        patterns.append(
            django.urls.path(
                route,
                csrf_exempt(make_view(dispatcher, path)),
                name=f"channelkit_ingress_{index}",
            )
        )
    return patterns


def _run_after_close(result: Any, response: IngressResponse) -> None:
    original_close = result.close

    def close() -> None:
        try:
            original_close()
        finally:
            response.run_after()

    result.close = close
