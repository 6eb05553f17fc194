"""``include("channelkit.web.django.urls")``: patterns from the ``CHANNELKIT_CHANNELS`` setting.

``CHANNELKIT_CHANNELS`` is a dotted path to a list of channels or to a zero-argument
callable returning them (called once, when Django loads the URLconf).
"""

from __future__ import annotations

import importlib
from typing import Any

from channelkit.errors import ConfigurationError
from channelkit.web.django.views import urlpatterns as _urlpatterns

__all__ = ["load_channels", "urlpatterns"]


def load_channels() -> list[Any]:
    """Resolve ``settings.CHANNELKIT_CHANNELS`` to a list of channels."""
    from django.conf import settings

    target = getattr(settings, "CHANNELKIT_CHANNELS", None)
    if not isinstance(target, str) or "." not in target:
        raise ConfigurationError(
            "set it to 'package.module.attribute' (a list or a callable)",
            path="settings.CHANNELKIT_CHANNELS",
        )
    module_name, _, attr = target.rpartition(".")
    value = getattr(importlib.import_module(module_name), attr)
    if callable(value):
        value = value()
    return list(value)


urlpatterns: list[Any] = _urlpatterns(load_channels())
