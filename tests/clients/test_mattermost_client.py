"""The generated mattermost client, every operation driven by its OpenAPI document."""

from __future__ import annotations

import pytest
from spec_driver import (
    ERROR_STATUSES,
    check_business_errors,
    check_missing_and_wrong_arguments,
    check_request_shape,
    check_status_mapping,
    check_unknown_enum_value,
    operation_ids,
)

PLATFORM = "mattermost"


@pytest.mark.parametrize("as_model", [False, True], ids=["dict-body", "model-body"])
@pytest.mark.parametrize("operation_id", operation_ids(PLATFORM))
def test_request_matches_spec(operation_id: str, as_model: bool) -> None:
    check_request_shape(PLATFORM, operation_id, as_model=as_model)


def test_unknown_enum_value_is_kept() -> None:
    check_unknown_enum_value(PLATFORM)


@pytest.mark.parametrize(("status", "expected"), ERROR_STATUSES)
def test_http_status_maps_to_error_class(status: int, expected: type) -> None:
    check_status_mapping(PLATFORM, status, expected)


def test_business_errors_on_http_200() -> None:
    check_business_errors(PLATFORM)


def test_bad_input_fails_before_any_network_call() -> None:
    check_missing_and_wrong_arguments(PLATFORM)
