"""Django integration: views and URL patterns over the same ingress handlers.

::

    # urls.py
    from channelkit.web.django import urlpatterns as channelkit_urls
    urlpatterns = [*channelkit_urls([channel])]

or ``path("", include("channelkit.web.django.urls"))`` with the setting
``CHANNELKIT_CHANNELS = "myproject.channels.get_channels"`` (a dotted path to a callable
returning the channels, or to a list of them).

Pool threads must not keep stale database connections: build the channel's executor
with `django_executor()` (it runs ``django.db.close_old_connections()`` before and
after every task, like slack bolt's Django adapter). Django is imported lazily.
"""

from __future__ import annotations

from channelkit.web.django.executor import DjangoDBExecutor, django_executor
from channelkit.web.django.views import IngressView, make_view, urlpatterns

__all__ = ["DjangoDBExecutor", "IngressView", "django_executor", "make_view", "urlpatterns"]
