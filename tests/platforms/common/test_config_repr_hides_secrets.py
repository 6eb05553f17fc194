"""A platform config's repr names every setting but never shows a secret's value."""

from __future__ import annotations

from dataclasses import dataclass, field

from channelkit.platforms.common.config import secret_repr


@dataclass(frozen=True)
class _Settings:
    app_id: str
    app_secret: str
    token: str = ""
    internal: object = field(default=None, repr=False)

    def __repr__(self) -> str:
        return secret_repr(self, ("app_secret", "token"))


def test_set_secrets_are_masked_and_empty_ones_stay_visible() -> None:
    text = repr(_Settings("app-1", "s3cret-value", internal="hidden-object"))
    assert text == "_Settings(app_id='app-1', app_secret=***, token='')"
    assert "s3cret-value" not in text and "hidden-object" not in text


def test_every_secret_named_is_masked() -> None:
    text = repr(_Settings("app-1", "s3cret-value", token="tok-123"))
    assert text == "_Settings(app_id='app-1', app_secret=***, token=***)"
