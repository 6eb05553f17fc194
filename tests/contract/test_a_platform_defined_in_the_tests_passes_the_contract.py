"""A platform is a plug-in: one defined inside the test suite passes the contract's core.

Tinychat (``plugin_platform/``: config, channel, emulator, contract driver, pytest
plugin) is defined here, not in the package. A pytest process started with
``-p plugin_platform.pytest_plugin`` registers it (``register_platform``) and its driver
(``DRIVERS``) in ``pytest_configure`` and runs the contract suite's core modules
unchanged: every core rule passes on ``[tinychat]`` (read from the JUnit XML), and
what it skips is exactly what its driver declares missing. In-process, the registered
platform goes through ``channelkit check-config`` and ``build_channels`` like a
built-in one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.config import build_channels, parse_config
from channelkit.platforms import PLATFORMS, register_platform
from contract_drivers import DRIVERS
from plugin_platform import NAME, SPEC
from plugin_platform.api import TinychatConfig
from plugin_platform.channel import TinychatChannel

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

#: The contract suite's core modules, run unchanged on the plug-in platform.
CORE_MODULES = (
    "test_output_segments_end_completed_cancelled_or_failed.py",
    "test_questions_are_one_shot_owner_only_and_settle_in_place.py",
    "test_ingress_dedup_and_queue_notices.py",
    "test_approval_buttons_and_presentations.py",
    "test_a_replay_after_twenty_thousand_messages_starts_no_second_run.py",
    "test_an_agent_that_dies_while_a_question_waits_is_told_once.py",
    "test_a_final_answer_lost_in_a_hang_is_never_gone.py",
    "test_a_burst_of_messages_is_answered_promptly.py",
    "test_hostile_headers_never_fail_ingress.py",
    "test_every_chat_platform_has_a_contract_driver.py",
)

#: The core rules that must pass on the plug-in platform (test name -> cases).
MUST_PASS = {
    "test_a_reply_ends_its_segment_completed": 1,
    "test_the_owners_stop_cancels_the_run_and_ends_its_segment_cancelled": 1,
    "test_a_stop_cancels_exactly_its_own_run_and_a_run_in_another_chat_goes_on": 1,
    "test_a_foreign_users_stop_is_refused_privately_and_the_run_goes_on": 1,
    "test_a_failed_run_ends_failed_and_the_failure_is_told_once": 2,
    "test_an_answered_question_reaches_the_agent_and_settles_submitted": 1,
    "test_a_question_is_one_shot_a_second_answer_changes_nothing": 1,
    "test_a_foreign_users_answer_is_refused_then_the_owners_answer_works": 1,
    "test_the_forms_cancel_settles_cancelled_and_the_agent_sees_it": 1,
    "test_an_unanswered_question_expires_on_the_fake_clock": 1,
    "test_a_second_question_in_the_same_run_gets_the_text_prompt": 1,
    "test_a_form_never_shows_submitted_before_the_responder_accepted": 1,
    "test_a_submit_after_deny_won_never_shows_submitted": 1,
    "test_a_redelivered_message_starts_no_second_run": 1,
    "test_a_run_that_must_wait_for_a_slot_is_told_it_is_queued_then_runs": 1,
    "test_a_replay_after_twenty_thousand_messages_starts_no_second_run": 1,
    "test_the_person_is_told_once_that_the_run_failed": 2,
    "test_last_with_nothing_to_send_says_so": 2,
    "test_every_person_of_a_burst_gets_one_answer_promptly": 4,
    "test_approval_buttons_answer_a_tool_permission_once_and_only_for_the_owner": 1,
    "test_a_presentation_is_rendered_natively_with_a_message_id": 1,
    "test_generated_hostile_headers_get_a_refusal_or_an_ack": 1,
    "test_a_fresh_timestamp_with_a_non_ascii_signature_is_refused": 5,
    "test_the_drivers_capabilities_agree_with_the_registry": 1,
}
#: The skips the suite itself explains: the text-prompt rule is for platforms without
#: native questions; the final answer shows in the streamed message (no final send to
#: hang); the dedup is per process (no shared store to share it through).
MAY_SKIP = {
    "test_without_native_input_a_question_is_the_text_prompt",
    "test_the_next_message_after_a_hung_final_send_carries_a_hint",
    "test_last_sends_the_hung_answer_again",
    "test_with_redis_a_replay_after_twenty_thousand_messages_starts_no_second_run",
}


def _outcome(case: ET.Element) -> str:
    for kind in ("failure", "error", "skipped"):
        if case.find(kind) is not None:
            return kind
    return "passed"


def test_the_contract_suite_passes_on_a_platform_registered_by_a_plugin(
    tmp_path: Path,
) -> None:
    junit = tmp_path / "junit.xml"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(str(HERE / module) for module in CORE_MODULES),
        "-p",
        "plugin_platform.pytest_plugin",
        "-p",
        "no:cacheprovider",
        "-k",
        f"{NAME} or registered or driver_is",
        "-q",
        f"--junitxml={junit}",
    ]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    report = f"pytest exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert junit.exists(), report
    cases = ET.parse(junit).getroot().iter("testcase")
    outcomes: dict[str, list[str]] = {}
    for case in cases:
        name = case.get("name", "")
        if f"[{NAME}" in name:
            outcomes.setdefault(name.partition("[")[0], []).append(_outcome(case))
        elif name.startswith("test_every"):  # the registry <-> DRIVERS checks
            outcomes.setdefault(name, []).append(_outcome(case))
    broken = {name: o for name, o in outcomes.items() if {"failure", "error"} & set(o)}
    assert not broken, f"{broken}\n{report}"
    for name, count in MUST_PASS.items():
        assert outcomes.get(name) == ["passed"] * count, (name, outcomes.get(name), report)
    skipped = {name for name, o in outcomes.items() if "skipped" in o}
    declared_missing = {  # the driver's missing capabilities: native presentations, pins
        "test_a_pinned_presentation_is_pinned_where_the_platform_pins",
        "test_a_presentations_value_button_reaches_the_agent_as_the_persons_message",
    }
    assert skipped <= MAY_SKIP | declared_missing, skipped
    for name in (
        "test_every_registered_chat_platform_has_a_driver",
        "test_every_driver_is_a_registered_chat_platform",
    ):
        assert outcomes.get(name) == ["passed"], (name, report)
    assert done.returncode == 0, report
    # the plugin's registrations stayed in its process
    assert NAME not in PLATFORMS and NAME not in DRIVERS


# -- the registry path end to end: check-config and build_channels -------------------------


def _document(**credentials: Any) -> dict[str, Any]:
    channel = {
        "platform": NAME,
        "name": "tiny",
        "credentials": credentials,
        "options": {"apiBaseUrl": "http://127.0.0.1:9"},
    }
    return {"channels": [channel], "agent": {"type": "demo"}}


def _check(tmp_path: Path, document: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> Any:
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code = cli.main(["check-config", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_check_config_and_build_channels_take_the_registered_plugin_platform(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _document(botToken="t", signingSecret="s")
    code, _, err = _check(tmp_path, good, capsys)
    assert code == 2 and "channels[0].platform" in err, err  # not registered: refused
    with register_platform(SPEC):
        code, out, err = _check(tmp_path, good, capsys)
        assert code == 0 and out.startswith("ok"), (out, err)
        code, _, err = _check(tmp_path, _document(botToken="t"), capsys)
        assert code == 2 and "channels[0].credentials" in err and "signingSecret" in err, err
        (channel,) = build_channels(parse_config(good, environ={}))
        try:
            assert isinstance(channel, TinychatChannel)
            assert channel.tinychat_config == TinychatConfig(
                bot_token="t",
                signing_secret="s",
                api_base_url="http://127.0.0.1:9",
                channel_name="tiny",
            )
            assert [route.path for route in channel.ingress_routes()] == ["/tinychat/events"]
        finally:
            channel.close()
    assert NAME not in PLATFORMS
    code, _, err = _check(tmp_path, good, capsys)
    assert code == 2 and "channels[0].platform" in err, err
