"""Bad input: a required parameter given as ``None`` (or left out) fails
with an error naming it, before any network call, for every operation of every platform.

(The wrong-type and left-out cases per platform are in ``spec_driver``'s
``check_missing_and_wrong_arguments``; this adds the explicit ``None``, which Python's own
signature check does not catch.)
"""

from __future__ import annotations

from typing import Any

import pytest
import requests_mock as rm
from channelkit.errors import ConfigurationError
from spec_driver import attr, build_call, make_client, operations, snake

PLATFORMS = (
    "dingtalk",
    "discord",
    "feishu",
    "line",
    "mattermost",
    "msteams",
    "slack",
    "telegram",
    "weixin",
)


def _cases() -> list[Any]:
    cases = []
    for platform in PLATFORMS:
        for _path, _method, item, op in operations(platform):
            _, kwargs, _, _, _ = build_call(platform, op["operationId"])
            params = list(item.get("parameters", [])) + list(op.get("parameters", []))
            for param in params:
                name = attr(param["name"])
                if (param.get("required") or param["in"] == "path") and name in kwargs:
                    cases.append(
                        pytest.param(
                            platform,
                            op["operationId"],
                            name,
                            id=f"{platform}-{op['operationId']}-{name}",
                        )
                    )
            if op.get("requestBody", {}).get("required"):
                cases.append(
                    pytest.param(
                        platform,
                        op["operationId"],
                        "body",
                        id=f"{platform}-{op['operationId']}-body",
                    )
                )
    return cases


@pytest.mark.parametrize(("platform", "operation_id", "name"), _cases())
def test_required_argument_given_as_none_is_named_before_the_network(
    platform: str, operation_id: str, name: str
) -> None:
    _, kwargs, _, _, _ = build_call(platform, operation_id)
    client = make_client(platform)
    with rm.Mocker() as mocker:
        with pytest.raises(ConfigurationError) as caught:
            getattr(client, snake(operation_id))(**{**kwargs, name: None})
        assert mocker.call_count == 0
    assert caught.value.path == name
    assert name in str(caught.value)
