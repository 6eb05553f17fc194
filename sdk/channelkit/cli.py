"""The ``channelkit`` console script.

* ``channelkit info`` - what is configured and installed;
* ``channelkit playground`` - the local emulator + chat page + demo agent;
* ``channelkit serve --config FILE`` - run configured channels on a production WSGI
  server (waitress or gunicorn, see docs/deployment.md);
* ``channelkit check-config FILE`` / ``channelkit config-schema`` - validate a
  configuration / print its JSON Schema;
* ``channelkit send`` / ``pin`` / ``unpin`` / ``pins`` - send a text or presentation to a
  configured channel's chat, and manage pinned messages (see docs/agents.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import os
import pkgutil
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import channelkit
from channelkit.errors import ConfigurationError

#: WSGI servers ``serve`` can use, in the order ``engine: auto`` tries them.
SERVER_ENGINES = ("waitress", "gunicorn")

NO_SERVER_MESSAGE = (
    "channelkit serve needs a production WSGI server and found none.\n"
    "Install one of them, then run the command again:\n"
    "    python -m pip install waitress      # recommended, pure Python, threaded\n"
    "    python -m pip install gunicorn      # Unix; runs one process with threads\n"
    "(The standard library's server is only for `channelkit playground`; see "
    "docs/deployment.md.)"
)


def _platforms() -> list[str]:
    """Every registered platform, presentation-only ones marked."""
    from channelkit.platforms import PLATFORMS

    return [
        name if spec.is_chat else f"{name} (presentation only)" for name, spec in PLATFORMS.items()
    ]


def playground_platforms() -> list[str]:
    """The registered platforms with a playground emulator (``playground --platform``)."""
    from channelkit.platforms import PLATFORMS

    return [name for name, spec in PLATFORMS.items() if spec.playground is not None]


def _ingress_help() -> str:
    from channelkit.platforms import PLATFORMS

    choices = "; ".join(
        f"{name} {' or '.join(PLATFORMS[name].ingress)} (default {PLATFORMS[name].ingress[0]})"
        for name in playground_platforms()
        if len(PLATFORMS[name].ingress) > 1
    )
    return f"how the channel receives, where the platform offers a choice: {choices}"


def _pinning() -> str:
    """The chat platforms whose registry entry lists the ``pins`` capability."""
    from channelkit.platforms import chat_platforms

    return ", ".join(spec.name for spec in chat_platforms() if "pins" in spec.capabilities)


def _chat_id_help() -> str:
    from channelkit.platforms import chat_platforms

    kinds = "; ".join(
        f"{spec.display_name}: {spec.chat_id_help}"
        for spec in chat_platforms()
        if spec.chat_id_help
    )
    return f"the chat id ({kinds})"


def _credential_checks() -> str:
    """Which chat platforms' registry entries carry a start-up credential check."""
    from channelkit.platforms import chat_platforms

    checked = [s.display_name for s in chat_platforms() if s.check_credentials is not None]
    unchecked = [s.display_name for s in chat_platforms() if s.check_credentials is None]
    text = f"checked on {', '.join(checked) or 'no platform'}"
    return text + (f"; not on {', '.join(unchecked)}" if unchecked else "")


def _clients() -> list[str]:
    import channelkit.clients as clients

    return sorted(m.name for m in pkgutil.iter_modules(clients.__path__) if m.ispkg)


def _cmd_info(_: argparse.Namespace) -> int:
    print(f"channelkit {channelkit.__version__} on Python {sys.version.split()[0]}")
    print(f"platform adapters: {', '.join(_platforms()) or '(none)'}")
    print(f"generated clients: {', '.join(_clients()) or '(none)'}")
    extras = []
    for name in ("flask", "django", "acp", "waitress", "gunicorn"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        extras.append(name)
    print(f"optional integrations importable: {', '.join(extras) or '(none)'}")
    return 0


def _feishu_options(args: argparse.Namespace) -> dict[str, Any]:
    key = getattr(args, "feishu_encrypt_key", None)
    if key is None:
        return {}
    return {"feishu_encrypt_key": key or None}


#: `Playground` argument names -> the `channelkit playground` options that set them
_PLAYGROUND_OPTIONS = {
    "question_expiry": "--question-expiry",
    "cwd": "--cwd",
    "stream_port": "--stream-port",
}


def _option_name(exc: ConfigurationError) -> str:
    """``exc``'s message with the `Playground` argument it names spelled as the option."""
    option = _PLAYGROUND_OPTIONS.get(exc.path or "")
    text = str(exc)
    if option is None or exc.path is None:
        return text
    return option + text[len(exc.path) :]


def _positive_seconds(text: str) -> float:
    """argparse type of ``--question-expiry``: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text}")
    return value


def _directory(text: str) -> str:
    """argparse type of ``--cwd``: an existing directory."""
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"must be an existing directory, got {text!r}")
    return text


def _cmd_playground(args: argparse.Namespace) -> int:
    from channelkit.observability.logs import configure_logging
    from channelkit.playground import Playground

    # text: warnings only, short lines; json (for a log pipeline): INFO, the story too
    configure_logging(
        logging.INFO if args.log_format == "json" else logging.WARNING,
        args.log_format,
        text_format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        from channelkit.playground.overrides import channel_options, parse_settings

        settings = channel_options(parse_settings(args.settings))
        playground = Playground(
            platform=args.platform,
            agent=args.agent,
            host=args.host,
            port=args.port,
            demo_delay=args.delay,
            ingress=args.ingress,
            instances=args.instances,
            state=args.state,
            question_expiry=args.question_expiry,
            cwd=args.cwd,
            stream_port=args.stream_port,
            channel_options=settings or None,
            **_feishu_options(args),
        )
    except ConfigurationError as exc:
        print(f"channelkit playground: {_option_name(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"channelkit playground: cannot listen on {args.host}:{args.port}: {exc}",
            file=sys.stderr,
        )
        return 2
    agent = f"ACP agent `{args.agent}`" if args.agent else "the built-in demo agent"
    try:
        print(f"channelkit playground ({args.platform} emulator, {agent})")
        print(f"Open {playground.url}/ in your browser. Press Ctrl+C to stop.", flush=True)
        playground.serve_forever()
    except KeyboardInterrupt:  # Ctrl+C before serve_forever took over the signal
        playground.close()
    return 0


def _pick_engine(preferred: str) -> str | None:
    candidates = SERVER_ENGINES if preferred == "auto" else (preferred,)
    for name in candidates:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return name
    return None


def _say(text: str, *, err: bool = False) -> None:
    """Write ``text`` and its newline to stdout (stderr: ``err``) in one call, flushed.

    The workers of ``serve --workers N`` share one terminal or pipe. `print()` writes the
    text and the newline apart, so with unbuffered output (``PYTHONUNBUFFERED``, ``-u``)
    another worker's line could land between them and two lines run together; one write
    of a short line to a pipe is never split.
    """
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def _bind_error(host: str, port: int, exc: OSError) -> ConfigurationError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return ConfigurationError(f"cannot listen on {host}:{port}: {reason}")


def run_server(engine: str, app: Any, host: str, port: int, threads: int) -> None:
    """Serve ``app`` with ``engine`` (``waitress`` or ``gunicorn``) until stopped.

    The listening address is printed once the socket is bound (port 0: the port the
    system chose). A bind failure raises `ConfigurationError` (one line).
    Returns when the server stops (SIGINT/SIGTERM arrive as ``KeyboardInterrupt``).
    """
    if engine == "waitress":
        waitress = importlib.import_module("waitress")
        from channelkit.serve_workers import inherited_socket

        shared = inherited_socket()  # a worker of `serve --workers N`: the parent's socket
        try:
            if shared is not None:
                server = waitress.create_server(app, sockets=[shared], threads=threads)
            else:
                server = waitress.create_server(app, host=host, port=port, threads=threads)
        except OSError as exc:
            raise _bind_error(host, port, exc) from None
        listen = getattr(server, "effective_listen", None) or [
            (server.effective_host, server.effective_port)
        ]
        for address, bound in listen:
            shown = f"[{address}]" if ":" in str(address) else address
            _say(f"channelkit serve: waitress listening on http://{shown}:{bound}")
        try:
            server.run()
        finally:
            server.close()
        return
    base = importlib.import_module("gunicorn.app.base")

    class _Gunicorn(base.BaseApplication):  # type: ignore[misc,name-defined]
        def load_config(self) -> None:
            # One process: channel state (runs, pending questions) lives in memory.
            self.cfg.set("bind", f"{host}:{port}")
            self.cfg.set("workers", 1)
            self.cfg.set("worker_class", "gthread")
            self.cfg.set("threads", threads)

        def load(self) -> Any:
            return app

    _say(f"channelkit serve: gunicorn on http://{host}:{port}")
    _Gunicorn().run()


def _port(text: str) -> int:
    """argparse type of ``--port``: an integer 0-65535."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0-65535, got {value}")
    return value


def _grace(text: str) -> float:
    """argparse type of ``--grace``: seconds, more than 0 and at most 3600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not 0 < value <= 3600:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 3600, got {text}")
    return value


def _config_or_error(command: str, path: str) -> Any:
    """The shared validation of ``check-config`` and ``serve``; prints the one-line
    error and returns None when the file is invalid."""
    from channelkit.config import validate_config_file

    try:
        return validate_config_file(path)
    except ConfigurationError as exc:
        print(f"channelkit {command}: invalid configuration: {exc}", file=sys.stderr)
        return None


#: Exit status of ``serve`` and ``check-config --online`` when a start-up check failed.
EXIT_STARTUP_CHECK = 4


def _startup_checks_pass(
    command: str, config: Any, bridge: Any, timeout: float | None, *, every: bool
) -> bool:
    """Run the start-up checks (`channelkit.startup_checks`); print each failure as one
    line on stderr (``every``: all of them and the passed checks on stdout; else the
    first failure only, as soon as it is known). True when nothing failed."""
    from channelkit.startup_checks import OK, run_startup_checks

    report = run_startup_checks(config, bridge, timeout=timeout, stop_at_first_failure=not every)
    for result in report.results:
        if result.status == "failed":
            _say(f"channelkit {command}: {result.line}", err=True)
        elif every:
            label = "checked" if result.status == OK else "not checked"
            _say(f"{label}: {result.line}")
    if report.ok and not every:
        checked = [r.subject or r.line.partition(":")[0] for r in report.results if r.status == OK]
        skipped = [r.subject or "" for r in report.results if r.status != OK]
        _say(
            f"channelkit {command}: start-up checks passed: {', '.join(checked) or 'none'}"
            + (f"; not checked: {', '.join(skipped)}" if skipped else "")
        )
    return report.ok


def _summary(config: Any) -> str:
    names = ", ".join(f"{c.name} ({c.platform})" for c in config.channels)
    return f"{len(config.channels)} channel(s): {names}; agent: {config.agent.get('type')}"


class _StopSignals:
    """SIGTERM does what SIGINT does (``KeyboardInterrupt`` in the main thread) while
    serving; once the shutdown has begun, a second signal exits at once (status 1)."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self.stopping = False

    def _interrupt(self, signum: int, frame: Any) -> None:
        if self.stopping:
            print(
                f"channelkit serve: second {signal.Signals(signum).name}: exiting now",
                file=sys.stderr,
                flush=True,
            )
            os._exit(1)
        raise KeyboardInterrupt

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is signal.SIG_IGN:
                    continue  # e.g. SIGINT of a background job: keep ignoring it
                self._previous[signum] = signal.signal(signum, self._interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _cmd_serve(args: argparse.Namespace) -> int:
    from channelkit.config import DEFAULT_SHUTDOWN_GRACE_S, build_agent, build_channels
    from channelkit.web import MAX_BODY_BYTES, create_wsgi_app
    from channelkit.web.service import ChannelService

    config = _config_or_error("serve", args.config)
    if config is None:
        return 2
    if args.check:
        print(f"ok: {_summary(config)}")
        return 0
    if args.workers > 1:
        if args.admin_port is not None:
            print(
                "channelkit serve: --admin-port serves one process: use state.redis and "
                "channelkit pairing with --workers",
                file=sys.stderr,
            )
            return 2
        return _serve_workers(args, config)
    admin_token = os.environ.get("CHANNELKIT_ADMIN_TOKEN", "")
    if args.admin_port is not None and len(admin_token) < 16:
        print(
            "channelkit serve: --admin-port needs CHANNELKIT_ADMIN_TOKEN (16 characters or more)",
            file=sys.stderr,
        )
        return 2
    preferred = args.engine or str(config.server.get("engine", "auto"))
    engine = _pick_engine(preferred)
    if engine is None:
        print(NO_SERVER_MESSAGE, file=sys.stderr)
        return 3
    from channelkit.observability.logs import configure_logging
    from channelkit.observability.metrics import MISSING_MESSAGE, metrics_available, metrics_route

    level = str(config.options.get("logLevel", "INFO"))
    grace = float(
        args.grace
        if args.grace is not None
        else config.server.get("shutdownGraceS", DEFAULT_SHUTDOWN_GRACE_S)
    )
    host = args.host or str(config.server.get("host", "127.0.0.1"))
    port = args.port if args.port is not None else int(config.server.get("port", 8000))
    threads = int(config.server.get("threads", 8))
    service: ChannelService | None = None
    admin: Any = None
    status = 0
    with _StopSignals() as signals:
        try:
            bridge = build_agent(config)
            try:
                if not args.skip_startup_checks and not _startup_checks_pass(
                    "serve", config, bridge, args.check_timeout, every=False
                ):
                    bridge.close()
                    return EXIT_STARTUP_CHECK
                # logging starts after the checks: a failed check is one line, no log lines
                configure_logging(level, args.log_format)
                if not metrics_available():
                    logging.getLogger("channelkit.observability").warning(
                        "GET /metrics answers 503: %s", MISSING_MESSAGE.strip()
                    )
                service = ChannelService(build_channels(config, bridge), bridge=bridge)
            except BaseException:
                bridge.close()
                raise
            app = create_wsgi_app(
                [*service.http_channels, metrics_route()],
                health=service.health,
                max_body_bytes=int(config.options.get("maxBodyBytes", MAX_BODY_BYTES)),
            )
            paths = ", ".join(path for path, _ in app.dispatcher.routes())
            _say(f"channelkit serve: {_summary(config)}; routes: {paths}")
            service.start()
            if args.admin_port is not None:  # pairing answers on 127.0.0.1 (web/admin.py)
                from channelkit.web.admin import AdminEndpoint

                admin = AdminEndpoint(service.channels, admin_token, port=args.admin_port)
                _say(f"channelkit serve: admin endpoint on {admin.url}")
            run_server(engine, app, host, port, threads)
        except KeyboardInterrupt:
            pass
        except ConfigurationError as exc:
            _say(f"channelkit serve: {exc}", err=True)
            status = 2
        finally:
            signals.stopping = True
            if admin is not None:
                admin.stop()
            if service is not None and not service.shutdown(grace):
                status = status or 1
    return status


def _serve_workers(args: argparse.Namespace, config: Any) -> int:
    """``serve --workers N`` (N > 1): N processes sharing ``state.redis`` and one port."""
    from channelkit.cluster_config import has_shared_store
    from channelkit.config import DEFAULT_SHUTDOWN_GRACE_S

    if not has_shared_store(config):
        print(
            f"channelkit serve: --workers {args.workers} needs a shared state store: set "
            "state.redis in the configuration (docs/deployment.md#several-processes)",
            file=sys.stderr,
        )
        return 2
    if args.engine == "gunicorn" or _pick_engine("waitress") is None:
        print(
            "channelkit serve: --workers runs waitress in each process: install it with "
            "python -m pip install 'channelkit[serve]'",
            file=sys.stderr,
        )
        return 3
    from channelkit.config import build_agent
    from channelkit.serve_workers import run_workers

    if not args.skip_startup_checks:
        bridge = build_agent(config)  # checked once here; the workers skip the checks
        try:
            if not _startup_checks_pass("serve", config, bridge, args.check_timeout, every=False):
                return EXIT_STARTUP_CHECK
        finally:
            bridge.close()
    grace = float(
        args.grace
        if args.grace is not None
        else config.server.get("shutdownGraceS", DEFAULT_SHUTDOWN_GRACE_S)
    )
    host = args.host or str(config.server.get("host", "127.0.0.1"))
    port = args.port if args.port is not None else int(config.server.get("port", 8000))
    argv = ["--config", args.config, "--engine", "waitress", "--grace", str(grace)]
    argv += ["--log-format", args.log_format]
    argv.append("--skip-startup-checks")
    try:
        return run_workers(argv, args.workers, host, port, grace)
    except OSError as exc:
        print(f"channelkit serve: {_bind_error(host, port, exc)}", file=sys.stderr)
        return 2


def _workers(text: str) -> int:
    """argparse type of ``--workers``: an integer 1-64."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of processes, got {text!r}") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"must be 1-64, got {value}")
    return value


def _cmd_check_config(args: argparse.Namespace) -> int:
    config = _config_or_error("check-config", args.config)
    if config is None:
        return 2
    if args.online:
        from channelkit.config import build_agent

        bridge = build_agent(config)
        try:
            if not _startup_checks_pass(
                "check-config", config, bridge, args.check_timeout, every=True
            ):
                return EXIT_STARTUP_CHECK
        finally:
            bridge.close()
    print(f"ok: {_summary(config)}")
    return 0


def _check_timeout(text: str) -> float:
    """argparse type of ``--check-timeout``: seconds, more than 0 and at most 300."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not 0 < value <= 300:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 300, got {text}")
    return value


def _check_timeout_option(parser: argparse.ArgumentParser) -> None:
    from channelkit.startup_checks import CREDENTIAL_CHECK_TIMEOUT_S

    parser.add_argument(
        "--check-timeout",
        type=_check_timeout,
        default=None,
        metavar="SECONDS",
        help="bound of each start-up check (default: "
        f"{CREDENTIAL_CHECK_TIMEOUT_S:g} for a platform's credential check, "
        "agent.requestTimeoutSeconds, else 60, for the agent's start)",
    )


def _cmd_config_schema(_: argparse.Namespace) -> int:
    from channelkit.config import schema_json

    print(schema_json())
    return 0


# -- send / pin / unpin / pins -------------------------------------------------------------

#: Exit statuses of ``send``, ``pin``, ``unpin`` and ``pins``.
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3
EXIT_PIN_FAILED = 4

_MESSAGE_EPILOG = (
    "exit status: 0 sent; 2 bad input (configuration, channel name, JSON, schema: the "
    "message names the field, e.g. presentation.blocks[1].buttons[0].label); 3 the "
    "platform refused or cannot do it; 4 the message was sent but a required pin "
    "failed (its id is printed on stdout)."
)


class _IdleAgent:
    """The agent of a channel built only to send: it never runs a turn."""

    def prompt(self, session_id: str, text: str, sink: Any) -> str:
        raise RuntimeError("channelkit send runs no agent")

    def cancel_session(self, session_id: str) -> bool:
        return False

    def respond_to_permission(self, request_id: str, response: Any) -> bool:
        return False

    def close(self) -> None:
        return None


@contextmanager
def _configured_channel(args: argparse.Namespace) -> Iterator[Any]:
    """The channel ``--channel`` names in ``--config`` (closed afterwards)."""
    from channelkit.config import build_channels, load_config

    try:
        config = load_config(args.config)
        channels = build_channels(config, _IdleAgent())
    except ConfigurationError as exc:
        raise ConfigurationError(f"invalid configuration: {exc}") from None
    try:
        names = [channel.name for channel in channels]
        if args.channel is None and len(channels) == 1:
            yield channels[0]
            return
        chosen = next((c for c in channels if c.name == args.channel), None)
        if chosen is None:
            wanted = (
                "--channel is required" if args.channel is None else f"no channel {args.channel!r}"
            )
            raise ConfigurationError(f"{wanted} (configured: {', '.join(names)})")
        yield chosen
    finally:
        for channel in channels:
            channel.close()


def _json_option(value: str, option: str) -> Any:
    text = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"{option}: cannot read {value[1:]}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigurationError(f"{option}: {value[1:]} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{option}: not valid JSON: {exc}") from None


def _send_payload(args: argparse.Namespace) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    if args.text is not None:
        payload["text"] = args.text
    if args.presentation is not None:
        payload["presentation"] = _json_option(args.presentation, "--presentation")
    if args.delivery is not None:
        payload["delivery"] = _json_option(args.delivery, "--delivery")
    if args.pin:
        delivery = payload.setdefault("delivery", {})
        if isinstance(delivery, dict) and not delivery.get("pin"):
            delivery["pin"] = True
    if "text" not in payload and "presentation" not in payload and not _send_files(args):
        raise ConfigurationError("nothing to send: give --text, --presentation, --file or --image")
    return payload


def _send_files(args: argparse.Namespace) -> list[tuple[str, bool]]:
    """``--file`` and ``--image`` paths in the order given: (path, as an image)."""
    return list(getattr(args, "files_in_order", None) or [])


class _FileOption(argparse.Action):
    """``--file`` / ``--image``: appended to one list, in the order given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        files = list(getattr(namespace, "files_in_order", None) or [])
        files.append((str(values), option_string == "--image"))
        namespace.files_in_order = files


def _run_message_command(name: str, args: argparse.Namespace, action: Any) -> int:
    from channelkit.errors import (
        AttachmentError,
        ChannelKitError,
        DeliveryPinError,
        FileNotDelivered,
    )

    try:
        with _configured_channel(args) as channel:
            return int(action(channel))
    except DeliveryPinError as exc:
        if exc.message_id:
            print(exc.message_id)
        print(f"channelkit {name}: sent, but the required pin failed: {exc}", file=sys.stderr)
        return EXIT_PIN_FAILED
    except ConfigurationError as exc:  # PresentationError included: names the field
        print(f"channelkit {name}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NotImplementedError as exc:
        print(f"channelkit {name}: not supported: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except FileNotDelivered as exc:
        told = " (the chat was told)" if exc.told else ""
        print(f"channelkit {name}: not delivered{told}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except AttachmentError as exc:  # refused before it was read: outside the root, too large
        print(f"channelkit {name}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ChannelKitError as exc:
        print(f"channelkit {name}: the platform refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED


def _cmd_send(args: argparse.Namespace) -> int:
    def send(channel: Any) -> int:
        payload = _send_payload(args)
        if "text" in payload or "presentation" in payload:
            result = channel.deliver_presentation(
                args.to, payload, thread_id=args.thread, silent=args.silent
            )
            if result.message_id is not None:
                print(result.message_id)
            else:
                print(
                    "channelkit send: sent (the platform returned no message id)", file=sys.stderr
                )
            if result.pin_warning:
                print(f"channelkit send: warning: {result.pin_warning}", file=sys.stderr)
        root = args.files_root if args.files_root is not None else os.getcwd()
        for path, image in _send_files(args):
            message_id = channel.send_file(
                args.to,
                path,
                image=image,
                caption=args.caption,
                thread_id=args.thread,
                root=root,
            )
            print(message_id)
        return 0

    return _run_message_command("send", args, send)


def _cmd_pin(args: argparse.Namespace) -> int:
    def pin(channel: Any) -> int:
        channel.pin_message(args.to, args.message, thread_id=args.thread, notify=args.notify)
        return 0

    return _run_message_command("pin", args, pin)


def _cmd_unpin(args: argparse.Namespace) -> int:
    def unpin(channel: Any) -> int:
        channel.unpin_message(args.to, args.message, thread_id=args.thread)
        return 0

    return _run_message_command("unpin", args, unpin)


def _cmd_pins(args: argparse.Namespace) -> int:
    def pins(channel: Any) -> int:
        for message_id in channel.pinned_messages(args.to, thread_id=args.thread):
            print(message_id)
        return 0

    return _run_message_command("pins", args, pins)


def _target_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, metavar="FILE", help="the JSON configuration file"
    )
    parser.add_argument(
        "--channel",
        default=None,
        metavar="NAME",
        help="the configured channel to use (its name; optional when only one is configured)",
    )
    parser.add_argument(
        "--to",
        required=True,
        metavar="CHAT",
        help=_chat_id_help(),
    )
    parser.add_argument(
        "--thread", default=None, metavar="ID", help="the thread (topic) inside the chat, if any"
    )


def _add_message_commands(sub: Any) -> None:
    send = sub.add_parser(
        "send",
        help="send a text, a presentation and/or files to a chat of a configured channel",
        description="Send a text and/or a presentation (title, tone, text, context, divider, "
        "buttons and select blocks) to a chat, then any --file / --image uploads. The "
        "presentation is validated against the published JSON Schema, adapted to what the "
        "platform renders and sent; each message id is printed on stdout, one per line. A "
        "platform that cannot upload files gets a line naming the file instead (exit 3).",
        epilog=_MESSAGE_EPILOG,
    )
    _target_options(send)
    send.add_argument(
        "--text", default=None, metavar="T", help="plain text sent before the presentation"
    )
    send.add_argument(
        "--presentation",
        default=None,
        metavar="JSON|@FILE",
        help='the presentation as JSON, e.g. {"title": "Deployed", "blocks": [{"type": "text", '
        '"text": "All green"}]}, or @path to read it from a file',
    )
    send.add_argument(
        "--delivery",
        default=None,
        metavar="JSON|@FILE",
        help='delivery metadata as JSON, e.g. {"pin": {"enabled": true, "required": true}}',
    )
    send.add_argument(
        "--pin",
        action="store_true",
        help="pin the message after sending it (a failed pin is a warning unless the delivery "
        "JSON says required)",
    )
    send.add_argument(
        "--file",
        action=_FileOption,
        metavar="PATH",
        help="upload a file (repeatable; after the text and presentation, in the order "
        "given); the platform's message id is printed; a path outside --files-root is "
        "refused before it is read",
    )
    send.add_argument(
        "--image",
        action=_FileOption,
        metavar="PATH",
        help="upload an image, shown as a photo where the platform can (repeatable)",
    )
    send.add_argument(
        "--caption",
        default=None,
        metavar="T",
        help="a caption shown with each uploaded file",
    )
    send.add_argument(
        "--files-root",
        default=None,
        metavar="DIR",
        help="the directory --file and --image paths must be inside (default: the current "
        "directory)",
    )
    send.add_argument(
        "--silent",
        action="store_true",
        help="send without a notification where the platform can (Telegram); ignored elsewhere",
    )
    send.set_defaults(func=_cmd_send)

    for name, summary in (
        ("pin", f"pin an existing message where the platform supports it ({_pinning()})"),
        ("unpin", "unpin a message where the platform supports it"),
    ):
        parser = sub.add_parser(
            name, help=summary, description=summary + ".", epilog=_MESSAGE_EPILOG
        )
        _target_options(parser)
        parser.add_argument(
            "--message",
            required=True,
            metavar="ID",
            help="the platform message id (as send printed it)",
        )
        if name == "pin":
            parser.add_argument(
                "--notify",
                action="store_true",
                help="notify the chat's members where the platform can",
            )
        parser.set_defaults(func=_cmd_pin if name == "pin" else _cmd_unpin)

    pins = sub.add_parser(
        "pins",
        help="list the pinned messages of a chat where the platform supports it",
        description="Print the ids of the pinned messages of a chat, one per line.",
        epilog=_MESSAGE_EPILOG,
    )
    _target_options(pins)
    pins.set_defaults(func=_cmd_pins)


def _log_format_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help=f"how log records are written to stderr ({what}; default text; see "
        "docs/operations.md)",
    )


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="channelkit",
        description=(
            "channelkit: connect an AI agent's runs to IM platforms with native "
            "interactions. Try it locally with 'channelkit playground'; serve real "
            "channels with 'channelkit serve --config channelkit.json'."
        ),
    )
    parser.add_argument("--version", action="version", version=channelkit.__version__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    info = sub.add_parser("info", help="print what channelkit has configured and installed")
    info.set_defaults(func=_cmd_info)

    play = sub.add_parser(
        "playground", help="run the local platform emulator, chat page and demo agent"
    )
    play.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (default: free)")
    play.add_argument("--host", default="127.0.0.1", help="address to listen on")
    play.add_argument(
        "--platform",
        default="dingtalk",
        choices=playground_platforms(),
        help="platform to emulate (default: dingtalk)",
    )
    play.add_argument(
        "--ingress",
        default=None,
        metavar="MODE",
        help=_ingress_help(),
    )
    play.add_argument(
        "--feishu-encrypt-key",
        default=None,
        metavar="KEY",
        help="Feishu only: the encrypt key callbacks are encrypted and signed with "
        '(default: a playground key; "" sends plain, unsigned callbacks)',
    )
    play.add_argument(
        "--agent",
        default=None,
        metavar="CMD",
        help='an ACP agent command, e.g. "qwen --acp"; cards are titled with its program '
        'name (default: the demo agent, titled "channelkit demo")',
    )
    play.add_argument(
        "--cwd",
        type=_directory,
        default=None,
        metavar="DIR",
        help="with --agent: the ACP agent's working directory, an existing directory "
        "(default: the current one; refused with the demo agent, which runs no program)",
    )
    play.add_argument(
        "--delay", type=float, default=0.06, help="demo agent pause between words (seconds)"
    )
    play.add_argument(
        "--question-expiry",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="how long a question stays answerable before it expires, seconds > 0 "
        "(default: the platform's, 270)",
    )
    play.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a setting of the emulated channel by its path in the configuration "
        "file, repeatable; VALUE is JSON when it parses, else a string (e.g. --set "
        "access.dm=allowlist --set 'access.allowUsers=[\"alice\"]')",
    )
    play.add_argument(
        "--stream-port",
        type=_port,
        default=None,
        metavar="N",
        help="dingtalk with --ingress stream (the default): port of the emulator's Stream "
        "gateway on 127.0.0.1 (default: free)",
    )
    play.add_argument(
        "--instances",
        type=_workers,
        default=1,
        metavar="N",
        help="dingtalk (http ingress): N SDK instances of the bot sharing a state store; "
        "the emulator sends callbacks to them in turn (default 1)",
    )
    play.add_argument(
        "--state",
        default=None,
        metavar="URL",
        help="with --instances: the Redis they share, e.g. redis://127.0.0.1:6379/0 "
        "(default: one in-memory store)",
    )
    _log_format_option(play, "text: warnings only; json: one JSON object per line, INFO")
    play.set_defaults(func=_cmd_playground)

    serve = sub.add_parser(
        "serve",
        help="serve configured channels on a production WSGI server",
        description="Serve every configured channel in one process: webhook channels on a "
        "production WSGI server, long-connection channels on their own threads, and "
        "GET /healthz. Before it starts, serve asks each channel's platform whether its "
        f"credentials work ({_credential_checks()}) and checks that the ACP agent's program "
        "exists and answers initialize, all at once and each within a bound; a failure is "
        "one line naming the channel and the field, and serve exits 4 without starting "
        "(see docs/deployment.md#start-up-checks). SIGTERM and SIGINT "
        "close every channel within the grace period (live runs cancelled, cards "
        "finalized, pending questions settled), then exit 0.",
        epilog="exit status: 0 stopped cleanly; 1 the grace period ran out; 2 invalid "
        "configuration or arguments; 3 no WSGI server installed; 4 a start-up check "
        "failed (a credential refused or not checkable, the agent missing or silent).",
    )
    serve.add_argument("--config", required=True, help="the JSON configuration file")
    serve.add_argument(
        "--host", default=None, help="listen address (default: server.host, else 127.0.0.1)"
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=None,
        help="listen port 0-65535, 0 for a free one (default: server.port, else 8000)",
    )
    serve.add_argument(
        "--engine",
        choices=["auto", *SERVER_ENGINES],
        default=None,
        help="WSGI server (default: server.engine, else auto: waitress, then gunicorn)",
    )
    serve.add_argument(
        "--grace",
        type=_grace,
        default=None,
        metavar="SECONDS",
        help="how long SIGTERM/SIGINT wait for channels to close (default: "
        "server.shutdownGraceS, else 10)",
    )
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="processes serving the bot on one port (default 1); N > 1 needs a shared "
        "state store (state.redis), see docs/deployment.md",
    )
    serve.add_argument(
        "--check",
        action="store_true",
        help="validate the configuration exactly as check-config does, then exit "
        "(offline: check-config --online makes the start-up checks too)",
    )
    _check_timeout_option(serve)
    serve.add_argument(
        "--admin-port",
        type=_port,
        default=None,
        metavar="N",
        help="also serve the local admin endpoint (answer pairing codes with channelkit "
        "pairing --admin-port N) on 127.0.0.1:N; its token is read from "
        "CHANNELKIT_ADMIN_TOKEN",
    )
    serve.add_argument(
        "--skip-startup-checks",
        action="store_true",
        help="start without checking the credentials and the agent first (a wrong one then "
        "shows only as failing calls)",
    )
    _log_format_option(serve, "text: one line per record; json: one JSON object per line")
    serve.set_defaults(func=_cmd_serve)

    check = sub.add_parser(
        "check-config",
        help="validate a configuration file",
        description="Validate a configuration file the way serve does: the schema, every "
        "adapter setting (unknown keys too), the environment variables it references and "
        "the agent's import. Errors name the JSON path. With --online it also makes "
        "serve's start-up checks: each channel's credentials with its platform and the "
        "ACP agent's start (program found, initialize answered).",
        epilog="exit status: 0 valid (and, with --online, every check passed); 2 invalid "
        "configuration or arguments; 4 a start-up check failed (one line each on stderr).",
    )
    check.add_argument("config", help="the JSON configuration file to validate")
    check.add_argument(
        "--online",
        action="store_true",
        help="also ask each platform whether the credentials work and start the ACP agent "
        "once (each check bounded; secrets are never printed)",
    )
    _check_timeout_option(check)
    check.set_defaults(func=_cmd_check_config)

    from channelkit.pairing_cli import add_pairing_parser

    add_pairing_parser(sub)

    schema = sub.add_parser("config-schema", help="print the configuration JSON Schema")
    schema.set_defaults(func=_cmd_config_schema)
    _add_message_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status. Errors are one line on stderr, never a traceback
    (set CHANNELKIT_DEBUG=1 to see the traceback of an unexpected error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    name = f"channelkit {args.command}"
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except ConfigurationError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if os.environ.get("CHANNELKIT_DEBUG"):
            raise
        reason = " ".join(str(exc).split())[:300]
        print(f"{name}: failed: {type(exc).__name__}: {reason}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
