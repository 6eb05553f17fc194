"""The error hierarchy: every exception class lives in ``channelkit.errors``.

The modules that raise an error keep re-exporting it, timeouts are also the builtin
``TimeoutError`` (as in requests and httpx), and the runtime's closed errors are
``ChannelKitError`` as well as ``RuntimeError``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import channelkit
import pytest
import requests
from channelkit import errors
from channelkit.errors import (
    ChannelKitError,
    ConnectTimeout,
    PoolClosed,
    ReadTimeout,
    SchedulerClosed,
    TransportError,
)
from channelkit.http.transport import Transport

PACKAGE_ROOT = Path(channelkit.__file__).parent


def _hand_written_modules() -> list[str]:
    names = ["channelkit"]
    for info in pkgutil.walk_packages(channelkit.__path__, "channelkit."):
        if info.name == "channelkit.clients" or info.name.startswith("channelkit.clients."):
            continue
        names.append(info.name)
    return names


def _module_path(name: str) -> Path:
    relative = Path(*name.split(".")[1:])
    package = PACKAGE_ROOT / relative / "__init__.py"
    return package if package.exists() else (PACKAGE_ROOT / relative).with_suffix(".py")


def _exception_classes_defined_in(name: str) -> list[str]:
    try:
        module = importlib.import_module(name)
    except Exception:
        # A module that needs configuration to import (Django's urls need settings):
        # read its source instead; any class with a base named like an error counts.
        tree = ast.parse(_module_path(name).read_text(encoding="utf-8"))
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                if any(b.endswith(("Error", "Exception", "Closed", "Busy")) for b in bases):
                    found.append(node.name)
        return found
    return [
        obj.__qualname__
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name
    ]


def test_every_exception_class_is_defined_in_channelkit_errors() -> None:
    strays = {
        name: classes
        for name in _hand_written_modules()
        if name != "channelkit.errors" and (classes := _exception_classes_defined_in(name))
    }
    assert strays == {}


def test_the_walk_sees_the_whole_package() -> None:
    modules = _hand_written_modules()
    assert "channelkit.runtime.pool" in modules
    assert "channelkit.platforms.feishu.crypto" in modules
    assert not any(name.startswith("channelkit.clients") for name in modules)


def test_errors_module_draws_every_public_class_in_its_tree() -> None:
    doc = errors.__doc__ or ""
    public = [
        name
        for name in errors.__all__
        if inspect.isclass(getattr(errors, name))
        and issubclass(getattr(errors, name), BaseException)
    ]
    assert len(public) >= 29
    for name in public:
        assert f" {name}" in doc, name


def test_every_error_derives_from_channelkit_error() -> None:
    for name in errors.__all__:
        obj = getattr(errors, name)
        if inspect.isclass(obj):
            assert issubclass(obj, ChannelKitError), name


@pytest.mark.parametrize("cls", [ConnectTimeout, ReadTimeout])
def test_timeouts_are_transport_errors_and_builtin_timeouts(cls: type[TransportError]) -> None:
    mro = cls.__mro__
    assert mro[1] is TransportError
    assert TimeoutError in mro and ChannelKitError in mro
    error = cls("GET https://example.invalid: timeout")
    assert isinstance(error, TransportError)
    assert isinstance(error, TimeoutError)
    assert error.timeout is True
    assert str(error) == "GET https://example.invalid: timeout"


def test_closed_runtime_errors_are_channelkit_errors_and_runtime_errors() -> None:
    for cls in (PoolClosed, SchedulerClosed):
        error = cls("closed")
        assert isinstance(error, ChannelKitError)
        assert isinstance(error, RuntimeError)


def test_old_module_paths_still_export_the_errors() -> None:
    from channelkit.agents.acp import AcpError, AcpTimeoutError, AgentProcessError
    from channelkit.agents.function import QuestionCancelled, QuestionError, QuestionExpired
    from channelkit.core.channel import ChannelBusy, ChannelClosed
    from channelkit.errors import DeliveryPinError, PresentationError
    from channelkit.platforms.feishu.crypto import DecryptionError
    from channelkit.platforms.feishu.ingress import IngressRejected
    from channelkit.platforms.feishu.questions import InvalidForm
    from channelkit.platforms.telegram.ingress import UpdateParseError
    from channelkit.runtime.pool import PoolClosed as PoolClosedOld
    from channelkit.runtime.scheduler import SchedulerClosed as SchedulerClosedOld

    for cls in (
        AcpError,
        AcpTimeoutError,
        AgentProcessError,
        QuestionCancelled,
        QuestionError,
        QuestionExpired,
        ChannelBusy,
        ChannelClosed,
        DecryptionError,
        IngressRejected,
        InvalidForm,
        UpdateParseError,
        DeliveryPinError,
        PresentationError,
        PoolClosedOld,
        SchedulerClosedOld,
    ):
        assert getattr(errors, cls.__name__) is cls


def test_ingress_rejection_renders_its_http_answer() -> None:
    from channelkit.errors import IngressRejected

    response = IngressRejected(401, "bad signature").response()
    assert response.status == 401


class _TimingOutSession(requests.Session):
    def __init__(self, exc: requests.RequestException) -> None:
        super().__init__()
        self.exc = exc

    def request(self, *args: object, **kwargs: object) -> requests.Response:  # type: ignore[override]
        raise self.exc


@pytest.mark.parametrize(
    ("raised", "expected", "message"),
    [
        (requests.ConnectTimeout("boom"), ConnectTimeout, "connect timeout after 1.5 s"),
        (
            requests.ReadTimeout("boom"),
            ReadTimeout,
            "read timeout, no complete answer within the overall deadline of 7 s",
        ),
    ],
)
def test_transport_raises_the_phase_specific_timeout(
    raised: requests.RequestException, expected: type[TransportError], message: str
) -> None:
    transport = Transport(_TimingOutSession(raised))
    with pytest.raises(expected) as info:
        transport.request("GET", "https://example.invalid/x", timeout=(1.5, 7.0))
    assert info.value.timeout is True
    assert isinstance(info.value, TimeoutError)
    assert str(info.value) == f"GET https://example.invalid/x: {message}"


def test_other_request_failures_stay_plain_transport_errors() -> None:
    transport = Transport(_TimingOutSession(requests.ConnectionError("reset")))
    with pytest.raises(TransportError) as info:
        transport.request("GET", "https://example.invalid/x", timeout=(1.5, 7.0))
    assert not isinstance(info.value, TimeoutError)
    assert info.value.timeout is False
