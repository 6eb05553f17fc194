"""Django views over `IngressDispatcher`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from channelkit.ingress import (
    MAX_BODY_BYTES,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    SupportsIngress,
)
from channelkit.web.dispatch import IngressDispatcher, environ_headers, query_dict

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
        # request.read() streams from the WSGI input without Django's in-memory limit.
        body = self.dispatcher.read_or_refuse(request, request.META.get("CONTENT_LENGTH"))
        if isinstance(body, IngressResponse):
            return self._to_django(body)
        ingress = IngressRequest(
            method=str(request.method).upper(),
            path=self.path,
            headers=environ_headers(request.META),
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
    `channelkit.web.create_wsgi_app()`.
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
