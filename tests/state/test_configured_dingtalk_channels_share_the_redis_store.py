"""``state.redis`` in a deployment configuration reaches every DingTalk channel that
``load_config`` + ``build_channels`` (and so ``channelkit serve``) builds: the channel's
cluster runs on a RedisStore with the configured lease settings; bad lease settings
are rejected naming their path; without ``state`` a channel keeps everything in memory."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from channelkit.cluster_config import WORKER_ENV, close_store, lease_options
from channelkit.config import build_channels, load_config, parse_config
from channelkit.errors import ConfigurationError
from channelkit.web.service import ChannelService

DINGTALK = {
    "platform": "dingtalk",
    "name": "helpdesk",
    "credentials": {
        "clientId": "ding-app",
        "clientSecret": "ding-secret",
        "cardCallbackSecret": "card-secret",
    },
    "options": {
        "ingress": "http",
        "cardCallbackRouteKey": "helpdesk-cards",
        "apiBaseUrl": "http://127.0.0.1:9",
        "interactiveCards": {"enabled": True},
    },
}


def write(tmp_path: Path, state: Any = None) -> Path:
    doc: dict[str, Any] = {"channels": [DINGTALK], "agent": {"type": "demo"}}
    if state is not None:
        doc["state"] = state
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_configured_redis_store_reaches_the_dingtalk_channel_with_its_lease_settings(
    tmp_path: Path, redis_server: Any
) -> None:
    namespace = f"cfg-{uuid.uuid4().hex[:8]}"
    state = {
        "redis": {"url": redis_server.url, "namespace": namespace},
        "leaseRenewSeconds": 0.5,
        "leaseExpirySeconds": 4,
        "instanceName": "bot-a",
    }
    config = load_config(write(tmp_path, state), environ={})
    service = ChannelService(build_channels(config))
    try:
        (channel,) = service.channels
        assert channel.cluster is not None, "state.redis must give the channel a cluster"
        cluster = channel.cluster.cluster
        assert type(cluster.store).__name__ == "RedisStore"
        assert cluster.store.namespace == namespace
        assert cluster.options.lease_renew_s == 0.5
        assert cluster.options.lease_expiry_s == 4.0
        assert cluster.name == "bot-a"
        # the channel's lease is in Redis, so other processes see this instance alive
        lease = cluster.lease_key(cluster.instance_id)
        assert cluster.store.get(lease) is not None
    finally:
        assert service.shutdown(10.0)


def test_without_a_state_section_the_dingtalk_channel_has_no_cluster(tmp_path: Path) -> None:
    config = load_config(write(tmp_path), environ={})
    (channel,) = build_channels(config)
    try:
        assert channel.cluster is None
    finally:
        channel.close(timeout=5)
        close_store(channel)  # nothing to close: no error either


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ({"leaseRenewSeconds": 0}, "state.leaseRenewSeconds"),
        ({"leaseExpirySeconds": "30"}, "state.leaseExpirySeconds"),
        ({"leaseRenewSeconds": 10, "leaseExpirySeconds": 10}, "state.leaseExpirySeconds"),
        ({"leaseRenewSeconds": 40}, "state.leaseRenewSeconds"),
        ({"instanceName": "a b"}, "state.instanceName"),
        ({"leaseSeconds": 3}, "state.leaseSeconds"),
    ],
)
def test_bad_lease_settings_are_rejected_naming_their_path(extra: Any, path: str) -> None:
    doc = {"channels": [DINGTALK], "state": {"redis": {"url": "redis://127.0.0.1:9"}, **extra}}
    with pytest.raises(ConfigurationError) as caught:
        parse_config(doc, environ={})
    assert caught.value.path == path, (caught.value.path, str(caught.value))


def test_each_serve_worker_gets_its_own_instance_name() -> None:
    doc = {"channels": [DINGTALK], "state": {"redis": {"url": "redis://h"}, "instanceName": "b"}}
    config = parse_config(doc, environ={})
    assert lease_options(config, environ={})["instanceName"] == "b"
    assert lease_options(config, environ={WORKER_ENV: "2"})["instanceName"] == "b-w2"
    assert "instanceName" not in lease_options(parse_config({"channels": [DINGTALK]}), environ={})
