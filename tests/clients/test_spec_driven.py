"""Every generated client, every operation, driven by its OpenAPI document.

One module for all platforms: each test runs once per ``openapi/<platform>.json``. What
a platform adds beyond its spec is tested in ``test_<platform>_client.py``.
"""

from __future__ import annotations

import pytest
from spec_driver import (
    ERROR_STATUSES,
    ROOT,
    check_business_errors,
    check_missing_and_wrong_arguments,
    check_request_shape,
    check_status_mapping,
    check_unknown_enum_value,
    operation_ids,
)

PLATFORMS = sorted(p.stem for p in (ROOT / "openapi").glob("*.json"))


def test_every_spec_is_covered() -> None:
    # a new spec joins this module by existing; guard against an empty glob
    assert {"dingtalk", "feishu", "telegram", "weixin", "msteams"} <= set(PLATFORMS)


@pytest.mark.parametrize("as_model", [False, True], ids=["dict-body", "model-body"])
@pytest.mark.parametrize(
    ("platform", "operation_id"),
    [(p, op) for p in PLATFORMS for op in operation_ids(p)],
    ids=lambda value: str(value),
)
def test_request_matches_spec(platform: str, operation_id: str, as_model: bool) -> None:
    check_request_shape(platform, operation_id, as_model=as_model)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_unknown_enum_value_is_kept(platform: str) -> None:
    check_unknown_enum_value(platform)


@pytest.mark.parametrize(("status", "expected"), ERROR_STATUSES)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_http_status_maps_to_error_class(platform: str, status: int, expected: type) -> None:
    check_status_mapping(platform, status, expected)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_business_errors_on_http_200(platform: str) -> None:
    check_business_errors(platform)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_bad_input_fails_before_any_network_call(platform: str) -> None:
    check_missing_and_wrong_arguments(platform)
