"""Every registered chat platform runs the contract suite: it has a driver in
``contract_drivers.DRIVERS``, and the capabilities its driver declares missing (the
suite's skip reasons) agree with the registry's capability set."""

from __future__ import annotations

from typing import Any

import pytest
from contract_drivers import DRIVERS

#: registry capability -> the driver flag that must be None (offered) exactly when it is set
AGREEING = {
    "stop_button": "stop_button",
    "forms": "native_questions",
    "pins": "pins",
    "threads": "threads",
}


def _registry() -> Any:
    try:
        from channelkit.platforms import PLATFORMS
    except ImportError:
        pytest.skip("channelkit.platforms.PLATFORMS (the platform registry) does not exist yet")
    return PLATFORMS


def test_every_registered_chat_platform_has_a_driver() -> None:
    chat = sorted(name for name, spec in _registry().items() if spec.kind == "chat")
    assert chat, "the registry lists no chat platform"
    missing = [name for name in chat if name not in DRIVERS]
    assert not missing, f"chat platforms without a contract driver: {missing}"


def test_every_driver_is_a_registered_chat_platform() -> None:
    registry = _registry()
    stray = [  # a key may name an ingress mode of its driver's platform
        name
        for name, driver in DRIVERS.items()
        if driver.platform not in registry
        or registry[driver.platform].kind != "chat"
        or name
        not in (
            driver.platform,
            *(f"{driver.platform}-{m}" for m in registry[driver.platform].ingress),
        )
    ]
    assert not stray, f"contract drivers for no registered chat platform: {stray}"


@pytest.mark.parametrize("platform", sorted(DRIVERS))
def test_the_drivers_capabilities_agree_with_the_registry(platform: str) -> None:
    registry = _registry()
    name = DRIVERS[platform].platform  # the key may name one of its ingress modes
    if name not in registry:
        pytest.skip(f"{name} is not registered yet")
    offered = registry[name].capabilities
    caps = DRIVERS[platform].caps
    for capability, flag in AGREEING.items():
        missing_reason = getattr(caps, flag)
        assert (capability in offered) == (missing_reason is None), (
            f"{platform}: the registry {'lists' if capability in offered else 'omits'} "
            f"{capability!r} but the driver's {flag} is {missing_reason!r}"
        )
