"""The start-up checks of `channelkit serve` and `channelkit check-config --online`.

Before `serve` accepts any traffic it asks, at the same time and each within a bound:

* every configured channel's platform whether its credentials work, through the
  `check_credentials` entry of the platform's `PlatformSpec` (Telegram `getMe`, Slack
  `auth.test`, DingTalk and Feishu an access token; a platform without one, such as
  Weixin, is not checked);
* the ACP agent whether it starts: its program exists (on `PATH`, or as a path) and
  answers ACP `initialize` (through `AcpBridge.start`; `serve` keeps that process for
  the first runs).

A failed check is a `CheckResult` whose one line names the channel and the field;
`serve` prints it on stderr and exits with status 4 instead of starting, e.g.
`channel 'telegram' (telegram): credentials.botToken was refused by Telegram (HTTP 401:
Unauthorized)` or `agent.command: program 'qwen' was not found on PATH`. Every line is
scrubbed of the configuration's secrets (credentials, `agent.env`, the Redis URL).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from channelkit.agents.acp import AcpBridge
from channelkit.config import ChannelSpec, DeploymentConfig
from channelkit.errors import (
    AcpError,
    AcpRequestError,
    AcpTimeoutError,
    AgentProcessError,
    ConfigurationError,
    CredentialCheckFailed,
)
from channelkit.http.redact import redact_text
from channelkit.platforms import get_platform

__all__ = [
    "CREDENTIAL_CHECK_TIMEOUT_S",
    "CheckResult",
    "StartupReport",
    "run_startup_checks",
]

#: Bound of each platform's credential check (one call, no retry), seconds.
CREDENTIAL_CHECK_TIMEOUT_S = 5.0
#: What the runner waits beyond the longest bound before it stops waiting for a check
#: that overran its own bound.
_MARGIN_S = 1.0

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. `subject` names what was checked (`"channel 'telegram'
    (telegram)"`, or `None` for the agent, whose `message` starts with its JSON path);
    `status` is `"ok"`, `"failed"` or `"skipped"`; `message` says what happened."""

    subject: str | None
    status: str
    message: str

    @property
    def line(self) -> str:
        """The one line shown for it: `"<subject>: <message>"`."""
        return f"{self.subject}: {self.message}" if self.subject else self.message


@dataclass(frozen=True)
class StartupReport:
    """What `run_startup_checks` found, in configuration order (channels, then the
    agent); a check still running when the runner stopped waiting is absent."""

    results: tuple[CheckResult, ...]

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """The failed checks."""
        return tuple(r for r in self.results if r.status == FAILED)

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not self.failures


@dataclass(frozen=True)
class _Check:
    index: int
    subject: str | None
    bound: float
    run: Callable[[], CheckResult]
    #: the message when the check overran its bound and the runner stopped waiting
    overrun: str


def _channel_subject(channel: ChannelSpec) -> str:
    return f"channel {channel.name!r} ({channel.platform})"


def _channel_check(channel: ChannelSpec, bound: float) -> Callable[[], CheckResult]:
    subject = _channel_subject(channel)

    def run() -> CheckResult:
        spec = get_platform(channel.platform)
        if spec.check_credentials is None:
            return CheckResult(subject, SKIPPED, f"{spec.display_name} offers no credential check")
        settings = spec.named_settings({**channel.options, **channel.credentials}, channel.name)
        platform_config = spec.build_config(settings)
        try:
            spec.check_credentials.load()(platform_config, timeout=bound)
        except CredentialCheckFailed as exc:
            return CheckResult(subject, FAILED, f"credentials.{exc.field} {exc.reason}")
        return CheckResult(subject, OK, f"credentials accepted by {spec.display_name}")

    return run


def _missing_program(bridge: AcpBridge, path: str) -> str | None:
    """Why the bridge's program cannot be started (None when it can): not on the `PATH`
    it will be started with (the agent's `env` applied), no such file, not executable.
    A path with a separator is taken relative to the agent's working directory, as the
    process will be started there."""
    program = bridge.command[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        full = os.path.join(bridge.cwd, program)  # an absolute program stays as it is
        if not os.path.isfile(full):
            return f"{path}: program {program!r} does not exist"
        if not os.access(full, os.X_OK):
            return f"{path}: program {program!r} is not executable"
        return None
    env = {**os.environ, **(bridge.env or {})}
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        return f"{path}: program {program!r} was not found on PATH"
    return None


def _agent_check(
    config: DeploymentConfig, bridge: AcpBridge, bound: float
) -> Callable[[], CheckResult]:
    agent = config.agent
    path = "agent.command" if agent.get("type", "demo") == "acp" else "agent.factory"
    program = bridge.command[0]

    def run() -> CheckResult:
        missing = _missing_program(bridge, path)
        if missing is not None:
            return CheckResult(None, FAILED, missing)
        try:
            bridge.start(timeout=bound)
        except AcpTimeoutError:
            reason = f"did not answer ACP initialize within {bound:g} s"
        except AcpRequestError as exc:
            reason = f"refused ACP initialize: {exc}"
        except AgentProcessError as exc:
            reason = f"ended before answering ACP initialize: {exc}"
            tail = [line for line in bridge.stderr_tail() if line.strip()]
            if tail:
                reason += f" (its last stderr line: {' '.join(tail[-1].split())[:200]})"
        except AcpError as exc:
            reason = f"did not start: {exc}"
        else:
            return CheckResult(None, OK, f"{path}: {program!r} answered ACP initialize")
        return CheckResult(None, FAILED, f"{path}: {program!r} {reason}")

    return run


def _secrets(config: DeploymentConfig) -> list[str]:
    values = [value for channel in config.channels for value in channel.credentials.values()]
    env = config.agent.get("env")
    if isinstance(env, Mapping):
        values.extend(str(value) for value in env.values())
    url = config.state.get("redis", {}).get("url") if config.state else None
    if isinstance(url, str):
        values.append(url)
    return values


def _checks(
    config: DeploymentConfig,
    bridge: object | None,
    credential_timeout: float,
    timeout: float | None,
) -> list[_Check]:
    # the agent's start is bounded like its first run's would be: its request timeout
    if timeout is not None:
        agent_timeout = timeout
    elif isinstance(bridge, AcpBridge):
        agent_timeout = bridge.request_timeout
    else:
        agent_timeout = credential_timeout  # no agent to check
    waited = f"{max(credential_timeout, agent_timeout) + _MARGIN_S:g} s"
    checks = [
        _Check(
            index,
            _channel_subject(channel),
            credential_timeout,
            _channel_check(channel, credential_timeout),
            f"credentials could not be checked: no verdict within {waited}",
        )
        for index, channel in enumerate(config.channels)
    ]
    if isinstance(bridge, AcpBridge):
        path = "agent.command" if config.agent.get("type", "demo") == "acp" else "agent.factory"
        checks.append(
            _Check(
                len(checks),
                None,
                agent_timeout,
                _agent_check(config, bridge, agent_timeout),
                f"{path}: {bridge.command[0]!r} did not start within {waited}",
            )
        )
    return checks


def _guarded(check: _Check, secrets: Iterable[str]) -> CheckResult:
    """Run one check; an unexpected error is a failed check, never a traceback."""
    try:
        result = check.run()
    except Exception as exc:
        reason = " ".join(str(exc).split())[:300]
        result = CheckResult(
            check.subject, FAILED, f"the check itself failed: {type(exc).__name__}: {reason}"
        )
    return CheckResult(result.subject, result.status, redact_text(result.message, secrets))


def run_startup_checks(
    config: DeploymentConfig,
    bridge: object | None = None,
    *,
    timeout: float | None = None,
    stop_at_first_failure: bool = False,
) -> StartupReport:
    """Check every channel's credentials and, when `bridge` is an `AcpBridge`, that the
    agent starts, all at once; return what was found.

    `timeout` bounds each check (default: `CREDENTIAL_CHECK_TIMEOUT_S` for a
    platform's call; for the agent's start the bridge's `request_timeout`, the bound its
    first run's `initialize` would have: `agent.requestTimeoutSeconds`, 60 s unless
    set). The call itself
    returns after the longest bound plus a second at the latest: a check still running
    then is reported failed (no verdict in time). With `stop_at_first_failure` it returns
    as soon as one check failed (`serve` does: fail fast), with that failure only. A
    started agent stays started (`serve` keeps it); closing `bridge` is the caller's.
    """
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(f"must be > 0 (got {timeout!r})", "timeout")
    credential_timeout = timeout if timeout is not None else CREDENTIAL_CHECK_TIMEOUT_S
    checks = _checks(config, bridge, credential_timeout, timeout)
    secrets = _secrets(config)
    done = threading.Condition()
    results: dict[int, CheckResult] = {}

    def worker(check: _Check) -> None:
        result = _guarded(check, secrets)
        with done:
            results[check.index] = result
            done.notify_all()

    for check in checks:
        # daemon threads: a check that overruns its bound never holds the process open
        threading.Thread(
            target=worker,
            args=(check,),
            name=f"channelkit-startup-check-{check.index}",
            daemon=True,
        ).start()
    deadline = time.monotonic() + max((c.bound for c in checks), default=0.0) + _MARGIN_S
    with done:
        while len(results) < len(checks):
            failed = [r for _, r in sorted(results.items()) if r.status == FAILED]
            if stop_at_first_failure and failed:
                return StartupReport((failed[0],))
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done.wait(left)
        finished = dict(results)
    ordered: list[CheckResult] = []
    for check in checks:
        result = finished.get(check.index)
        if result is None:
            result = CheckResult(check.subject, FAILED, check.overrun)
        ordered.append(result)
    if stop_at_first_failure:
        failed = [r for r in ordered if r.status == FAILED]
        if failed:
            return StartupReport((failed[0],))
    return StartupReport(tuple(ordered))
