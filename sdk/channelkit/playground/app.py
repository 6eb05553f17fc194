"""``Playground``: emulator + channel + agent + page, in one process on 127.0.0.1.

::

    with Playground() as pg:          # DingTalk emulation, demo agent, free port
        print(pg.url)                 # open it in a browser
        pg.send("hello")              # what the page's Send button does
        pg.emulator.calls()           # every API call the SDK made

    Playground(platform="feishu")     # or "telegram", "slack", "weixin"
    Playground(platform="slack", ingress="socket")  # default: the Events API (signed POSTs)
    Playground(platform="discord", ingress="interactions")  # default: clicks on the Gateway
    Playground(platform="telegram", ingress="webhook")  # default: getUpdates polling
    Playground(ingress="http")        # DingTalk HTTP callbacks (default: Stream mode)
    Playground(clock=FakeClock(...))  # timers (question expiry, flushes) on a fake clock

One HTTP server serves everything: the channel's ingress (``/dingtalk/robot``,
``/dingtalk/card``; ``/feishu/events``, ``/feishu/card``; ``/telegram/webhook``), the
emulated platform API the SDK's clients call (``/v1.0/...``, ``/open-apis/...``,
``/bot<token>/...``), the emulator controls (``/_emulator/...``) and the page (``/``).
Telegram's channel long-polls ``getUpdates`` on the emulator by default; with
``ingress="webhook"`` the emulator POSTs updates to ``/telegram/webhook`` instead.
Weixin's channel always long-polls ``/ilink/bot/getupdates`` (iLink's only ingress).
DingTalk's channel connects in Stream mode by default: its connection opens a WebSocket
to the emulator's gateway (another port on 127.0.0.1) and user messages and card actions
arrive as frames; with ``ingress="http"`` they are signed POSTs to ``/dingtalk/robot``
and ``/dingtalk/card``. Slack's channel receives signed Events API POSTs at
``/slack/events`` and ``/slack/interactivity`` by default; with ``ingress="socket"`` it
opens a Socket Mode connection (``apps.connections.open``) to the emulator's gateway.
Discord's channel connects to the emulator's Gateway (another port on 127.0.0.1) and
receives messages there; button and menu clicks arrive there too by default, and with
``ingress="interactions"`` as Ed25519-signed POSTs to ``/discord/interactions`` (the
emulator's generated public key is in the channel's config).
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from channelkit.agents.base import AgentBridge
from channelkit.errors import ConfigurationError
from channelkit.observability.metrics import metrics_route
from channelkit.platforms import PLATFORMS as REGISTRY
from channelkit.platforms.common.connection import start_connections
from channelkit.playground.demo import demo_agent
from channelkit.playground.dingtalk import DingtalkEmulator
from channelkit.playground.emulator import CallbackDelivery, EmulatorBase
from channelkit.playground.feishu import FeishuEmulator
from channelkit.playground.server import LocalServer
from channelkit.playground.slack import SlackEmulator
from channelkit.playground.telegram import TelegramEmulator
from channelkit.runtime.clock import Clock
from channelkit.web import create_wsgi_app

__all__ = ["DEMO_TITLE", "INGRESS", "PLATFORMS", "Playground", "agent_title"]

logger = logging.getLogger(__name__)

#: Platforms the playground can emulate: the registered ones with an emulator
#: (``channelkit.platforms.PLATFORMS``, read when this module is imported).
PLATFORMS: tuple[str, ...] = tuple(
    name for name, spec in REGISTRY.items() if spec.playground is not None
)
#: The ingress modes a platform's channel offers, its default first (from the registry).
INGRESS: dict[str, tuple[str, ...]] = {name: REGISTRY[name].ingress for name in PLATFORMS}


def _emulated() -> tuple[str, ...]:
    """The platforms registered now that have an emulator (``PLATFORMS`` is the same
    list as it was when this module was imported)."""
    return tuple(name for name, spec in REGISTRY.items() if spec.playground is not None)


_APP_KEY = "playground-app"
_APP_SECRET = "playground-secret"
_CARD_SECRET = "playground-card-secret"
_ROUTE_KEY = "channelkit-playground"
_FEISHU_APP_ID = "cli_playground"
_FEISHU_TOKEN = "playground-verification-token"
_FEISHU_ENCRYPT_KEY = "playground-encrypt-key"
_TELEGRAM_TOKEN = "123456:playground-bot-token"
_TELEGRAM_SECRET = "playground-webhook-secret"
_SLACK_BOT_TOKEN = "xoxb-playground-bot-token"
_SLACK_APP_TOKEN = "xapp-1-playground-app-token"
_SLACK_SECRET = "playground-signing-secret"
_WEIXIN_TOKEN = "playground-weixin-bot-token"
_DISCORD_TOKEN = "playground-discord-bot-token"


#: The card title when the built-in demo agent runs.
DEMO_TITLE = "channelkit demo"


def _acp_bridge(command: str | Sequence[str], cwd: str | None) -> AgentBridge:
    from channelkit.agents.acp import AcpBridge

    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ConfigurationError("must name a command", path="agent")
    bridge: Any = AcpBridge(argv, cwd=cwd)
    return bridge  # type: ignore[no-any-return]


def agent_title(agent: AgentBridge | str | Sequence[str] | None) -> str:
    """The name cards show for ``agent``: ``"channelkit demo"`` for the demo agent (None),
    the program name of an ACP command (``"qwen --acp"`` -> ``"qwen"``); for a bridge
    object, the program name of its ``command`` (an `AcpBridge`), else its non-blank
    ``name``, else its class name."""
    if agent is None:
        return DEMO_TITLE
    if isinstance(agent, AgentBridge):
        command = getattr(agent, "command", None)
        if isinstance(command, tuple | list) and command and isinstance(command[0], str):
            return os.path.basename(command[0]) or command[0]
        name = getattr(agent, "name", None)
        return name.strip() if isinstance(name, str) and name.strip() else type(agent).__name__
    try:
        argv = shlex.split(agent) if isinstance(agent, str) else list(agent)
    except ValueError:
        argv = []
    return (os.path.basename(argv[0]) or argv[0]) if argv else DEMO_TITLE


def _check_question_expiry(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError("must be a number of seconds", path="question_expiry")
    if not math.isfinite(value) or value < 0.001:
        raise ConfigurationError(
            f"must be a finite number of seconds > 0 (got {value!r})", path="question_expiry"
        )
    return float(value)


def _check_cwd(cwd: str | os.PathLike[str] | None, agent: object) -> str | None:
    if cwd is None:
        return None
    path = os.fspath(cwd)
    if agent is None:
        raise ConfigurationError(
            "needs --agent: the built-in demo agent runs no program", path="cwd"
        )
    if not isinstance(agent, str | list | tuple):
        raise ConfigurationError("is for an ACP command agent, not a bridge object", path="cwd")
    if not os.path.isdir(path):
        raise ConfigurationError(f"is not an existing directory: {path!r}", path="cwd")
    return os.path.abspath(path)


class Playground:
    """The playground process.

    ``platform``: ``"dingtalk"`` (default), ``"feishu"``, ``"telegram"``, ``"slack"``,
    ``"weixin"``, or any platform registered with an emulator (``register_platform``; the
    registry is read when the playground is built). ``agent``:
    None (the demo agent), an ACP command line (``"qwen --acp"``; run through
    ``AcpBridge``) or any `AgentBridge`. ``port`` 0 picks a free port.
    ``demo_delay`` paces the demo agent's streaming. ``clock`` is given to the channel: with a
    `FakeClock` whose wall time starts at the real time,
    timers (question expiry, card flushes, typing keep-alive) fire only when the test
    advances it. ``feishu_encrypt_key`` (Feishu only; None = plain callbacks) encrypts
    and signs the emulator's callbacks. ``ingress``: how the channel receives (see
    `INGRESS`; None = the platform's default). ``instances`` > 1 (DingTalk, HTTP
    ingress): that many SDK instances of the bot share a state store (``state``, a
    ``redis://`` URL, else one MemoryStore) and receive the callbacks in turn
    (`channelkit.playground.instances`). ``channel_options`` overrides fields of the
    channel's `ChannelConfig` (e.g. ``{"max_concurrent_runs": 1}`` to see runs queue).
    ``question_expiry`` (seconds > 0; None = the platform's default, 270 s) is how long a
    question stays answerable: the question card's lifetime (DingTalk, Feishu, Telegram,
    Slack; the permission lifetime is raised to match when it is longer), Weixin's text
    prompt's permission lifetime. ``cwd`` (an existing directory) is the working
    directory of an ACP command agent (``AcpBridge(cwd=...)``; refused with the demo
    agent, which runs no program). ``stream_port`` (DingTalk, Stream ingress) is the
    port of the emulator's Stream gateway (None = a free one). ``title`` is the name the
    cards show (`agent_title`): ``"channelkit demo"`` for the demo, the program name of
    an ACP command. ``dingtalk_cards=False`` (DingTalk) turns interactive cards off:
    every reply, notice and prompt is a robot Markdown message.
    """

    def __init__(
        self,
        *,
        platform: str = "dingtalk",
        agent: AgentBridge | str | Sequence[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        demo_delay: float = 0.06,
        model: str | None = None,
        clock: Clock | None = None,
        feishu_encrypt_key: str | None = _FEISHU_ENCRYPT_KEY,
        ingress: str | None = None,
        instances: int = 1,
        state: str | None = None,
        channel_options: Mapping[str, Any] | None = None,
        question_expiry: float | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stream_port: int | None = None,
        dingtalk_cards: bool = True,
    ) -> None:
        self.question_expiry = _check_question_expiry(question_expiry)
        if not dingtalk_cards and platform != "dingtalk":
            raise ConfigurationError("is for --platform dingtalk only", path="dingtalk_cards")
        self.dingtalk_cards = dingtalk_cards
        agent_cwd = _check_cwd(cwd, agent)
        self.title = agent_title(agent)
        if instances > 1 or state is not None:  # several SDK instances of one DingTalk bot
            if platform != "dingtalk" or ingress == "stream":
                raise ConfigurationError("needs --platform dingtalk --ingress http", "instances")
            if instances < 2:
                raise ConfigurationError("needs --instances 2 or more", "state")
            ingress = "http"
        emulated = _emulated()
        if platform not in emulated:
            raise ConfigurationError(
                f"must be one of {', '.join(emulated)} (got {platform!r})", path="platform"
            )
        modes = REGISTRY[platform].ingress
        if ingress is not None and ingress not in modes:
            raise ConfigurationError(
                f"{platform} offers {', '.join(modes) or 'no choice'} (got {ingress!r})",
                path="ingress",
            )
        self.ingress = ingress if ingress is not None else (modes[0] if modes else None)
        if stream_port is not None:
            if platform != "dingtalk" or self.ingress != "stream":
                raise ConfigurationError(
                    "is for --platform dingtalk with --ingress stream only", path="stream_port"
                )
            if isinstance(stream_port, bool) or not 0 <= stream_port <= 65535:
                raise ConfigurationError(
                    f"must be a port number 0-65535 (got {stream_port!r})", path="stream_port"
                )
        if self.question_expiry is not None and platform not in (
            "dingtalk",
            "feishu",
            "telegram",
            "slack",
            "weixin",
            "discord",
        ):
            raise ConfigurationError(
                f"the playground cannot set it for {platform}", path="question_expiry"
            )
        self.platform = platform
        self._server = LocalServer(host, port)
        self.url = self._server.url
        self.clock = clock
        self._channel_options = dict(channel_options or {})
        if self._channel_options:
            from dataclasses import fields

            from channelkit.core import ChannelConfig

            known = {f.name for f in fields(ChannelConfig)}
            for key in self._channel_options:
                if key not in known or key == "name":
                    raise ConfigurationError(
                        "is not a ChannelConfig field the playground can set",
                        path=f"channel_options.{key}",
                    )
        self._owns_agent = not isinstance(agent, AgentBridge)
        if agent is None:
            self.agent: AgentBridge = demo_agent(delay=demo_delay)
        elif isinstance(agent, AgentBridge):
            self.agent = agent
        else:
            self.agent = _acp_bridge(agent, agent_cwd)
        self.emulator: EmulatorBase
        self.channel: Any
        self.instances: Any = None
        if instances > 1:
            from channelkit.playground.instances import Instances

            self.instances = Instances(instances, state, host)
        if platform == "feishu":
            self._build_feishu(feishu_encrypt_key)
        elif platform == "telegram":
            self._build_telegram(model)
        elif platform == "slack":
            self._build_slack(model)
        elif platform == "weixin":
            self._build_weixin(model)
        elif platform == "discord":
            self._build_discord(model)
        elif platform == "dingtalk":
            self._build_dingtalk(model, self.ingress, stream_port or 0)
        else:
            self._build_registered(model)
        # the channel's own word on waiting requests (a text permission prompt has no card)
        self.emulator.request_pending = lambda: bool(self.channel.pending_request_ids())
        # GET /metrics beside the channel's routes (Prometheus text; see docs/operations.md)
        self.app = create_wsgi_app([self.channel, metrics_route()], fallback=self.emulator)
        self._started = False

    def _permission_lifetime(self, default: float) -> float:
        """The permission lifetime that lets a question live ``question_expiry``."""
        expiry = self.question_expiry
        return default if expiry is None else max(default, expiry)

    def _build_dingtalk(self, model: str | None, ingress: str | None, stream_port: int) -> None:
        from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig

        emulator = DingtalkEmulator(
            app_key=_APP_KEY,
            app_secret=_APP_SECRET,
            api_secret=_CARD_SECRET,
            robot_callback_url=f"{self.url}/dingtalk/robot",
            card_callback_url=f"{self.url}/dingtalk/card",
            ingress=ingress,
            stream_port=stream_port,
        )
        emulator.base_url = self.url
        if stream_port:  # bind it now: a taken port is an error at startup
            try:
                emulator.stream.listen()
            except OSError as exc:
                self._server.stop()
                raise ConfigurationError(
                    f"cannot listen on 127.0.0.1:{stream_port}: {exc}", path="stream_port"
                ) from exc
        question_card: dict[str, Any] = {"enabled": True}
        if self.question_expiry is not None:
            ms = max(1, round(self.question_expiry * 1000))
            question_card["timeoutMs"] = ms
        options: dict[str, Any] = {
            "clientId": _APP_KEY,
            "clientSecret": _APP_SECRET,
            "apiBaseUrl": self.url,
            "model": model,
            "interactiveCards": {"enabled": self.dingtalk_cards, "questionCard": question_card},
            "ingress": ingress,
        }
        if self.question_expiry is not None:
            options["hostPermissionTimeoutMs"] = max(300_000, question_card["timeoutMs"])
        if ingress == "http":
            options.update({"cardCallbackSecret": _CARD_SECRET, "cardCallbackRouteKey": _ROUTE_KEY})
        config = DingtalkConfig.from_dict(options)
        self.emulator = emulator
        if self.instances is None:
            channel_config = None
            if self._channel_options:  # the channel's own defaults, then the overrides
                from channelkit.core import ChannelConfig

                channel_config = self._channel_config(
                    ChannelConfig(
                        name=config.name,
                        model=config.model,
                        permission_timeout=config.host_permission_timeout_s,
                    )
                )
            self.channel = DingtalkChannel(
                config, self.agent, clock=self.clock, channel_config=channel_config
            )
            return
        group = self.instances  # instance 0 here; the others on their own ports

        def make(store: Any) -> Any:
            return DingtalkChannel(
                config, self.agent, clock=self.clock, store=store, cluster_options=group.options
            )

        self.channel = make(group.store())
        emulator.instance_urls = [self.url, *group.serve(make)]

    def _build_feishu(self, encrypt_key: str | None) -> None:
        from channelkit.core import ChannelConfig
        from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
        from channelkit.platforms.feishu.config import FeishuFormsConfig

        emulator = FeishuEmulator(
            app_id=_FEISHU_APP_ID,
            app_secret=_APP_SECRET,
            verification_token=_FEISHU_TOKEN,
            encrypt_key=encrypt_key,
            events_url=f"{self.url}/feishu/events",
            card_url=f"{self.url}/feishu/card",
            ingress=self.ingress,
        )
        emulator.base_url = self.url
        forms: dict[str, Any] = {}
        if self.question_expiry is not None:
            forms["forms"] = FeishuFormsConfig(
                timeout_ms=max(1, round(self.question_expiry * 1000))
            )
        config = FeishuConfig(
            app_id=_FEISHU_APP_ID,
            app_secret=_APP_SECRET,
            verification_token=_FEISHU_TOKEN,
            encrypt_key=encrypt_key,
            language="en",
            base_url=self.url,
            title=self.title,
            ingress="websocket" if self.ingress == "websocket" else "http",
            **forms,
        )
        self.emulator = emulator
        self.channel = FeishuChannel(
            config,
            self.agent,
            channel_config=self._channel_config(ChannelConfig(name="feishu")),
            clock=self.clock,
        )

    def _build_telegram(self, model: str | None) -> None:
        from channelkit.core import ChannelConfig
        from channelkit.platforms.telegram import TelegramChannel, TelegramConfig

        webhook = self.ingress == "webhook"
        emulator = TelegramEmulator(
            bot_token=_TELEGRAM_TOKEN,
            webhook_url=f"{self.url}/telegram/webhook" if webhook else "",
            secret_token=_TELEGRAM_SECRET,
        )
        emulator.base_url = self.url
        config = TelegramConfig(
            bot_token=_TELEGRAM_TOKEN,
            webhook_secret=_TELEGRAM_SECRET,
            api_base_url=self.url,
            ingress=self.ingress or "polling",
            bot_username=emulator.bot_username,  # group mentions of it address the bot
            **self._question_timeout_s(),
        )
        self.emulator = emulator
        self.channel = TelegramChannel(
            config,
            self.agent,
            channel_config=self._channel_config(ChannelConfig(name="telegram", model=model)),
            clock=self.clock,
        )

    def _build_slack(self, model: str | None) -> None:
        from channelkit.core import ChannelConfig
        from channelkit.platforms.slack import SlackChannel, SlackConfig

        ingress = self.ingress or "events"
        emulator = SlackEmulator(
            bot_token=_SLACK_BOT_TOKEN,
            app_token=_SLACK_APP_TOKEN,
            signing_secret=_SLACK_SECRET,
            events_url=f"{self.url}/slack/events",
            interactivity_url=f"{self.url}/slack/interactivity",
            ingress=ingress,
        )
        emulator.base_url = self.url
        config = SlackConfig(
            bot_token=_SLACK_BOT_TOKEN,
            signing_secret=_SLACK_SECRET,
            app_token=_SLACK_APP_TOKEN,
            ingress=ingress,
            api_base_url=self.url,
            **self._question_timeout_s(),
        )
        self.emulator = emulator
        self.channel = SlackChannel(
            config,
            self.agent,
            channel_config=self._channel_config(ChannelConfig(name="slack", model=model)),
            clock=self.clock,
        )

    def _build_weixin(self, model: str | None) -> None:
        from channelkit.core import ChannelConfig
        from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
        from channelkit.playground.weixin import CDN_PATH, WeixinEmulator

        emulator = WeixinEmulator(bot_token=_WEIXIN_TOKEN)
        emulator.base_url = self.url
        config = WeixinConfig(
            bot_token=_WEIXIN_TOKEN,
            base_url=self.url,
            ingress="polling",
            cdn_base_url=f"{self.url}{CDN_PATH}",
        )
        self.emulator = emulator
        self.channel = WeixinChannel(
            config,
            self.agent,
            channel_config=self._channel_config(ChannelConfig(name="weixin", model=model)),
            clock=self.clock,
        )

    def _build_discord(self, model: str | None) -> None:
        from channelkit.core import ChannelConfig
        from channelkit.platforms.discord import DiscordChannel, DiscordConfig
        from channelkit.platforms.discord.adapter import INTERACTIONS_PATH
        from channelkit.playground.discord import APPLICATION_ID, DiscordEmulator

        ingress = self.ingress or "gateway"
        emulator = DiscordEmulator(
            bot_token=_DISCORD_TOKEN,
            interactions_url=f"{self.url}{INTERACTIONS_PATH}",
            ingress=ingress,
            clock=self.clock,
        )
        emulator.base_url = self.url
        config = DiscordConfig(
            bot_token=_DISCORD_TOKEN,
            application_id=APPLICATION_ID,
            public_key=emulator.public_key,  # the emulator's generated Ed25519 key pair
            ingress=ingress,
            api_base_url=f"{self.url}/api/v10",
            gateway_url=emulator.gateway.url,
            **self._question_timeout_s(),
        )
        self.emulator = emulator
        self.channel = DiscordChannel(
            config,
            self.agent,
            channel_config=self._channel_config(ChannelConfig(name="discord", model=model)),
            clock=self.clock,
        )
        # the emulated people use a Discord client in the channel's language (their
        # clicks say so), so `--set locale=zh-CN` shows Chinese after a click too
        locale = self.channel.locales.configured
        if locale is not None:
            emulator.default_locale = "en-US" if locale == "en" else locale

    def _build_registered(self, model: str | None) -> None:
        """A platform registered from outside the package (``register_platform``), built
        from its registry entry alone: the emulator class with the playground
        credentials (``emulator_kwargs()``; its ``base_url`` is this server, where it
        sends its callbacks), the config from those credentials plus
        ``{api_base_url_option: url}`` (and ``ingress`` when the platform offers more
        than one mode), then ``channel_class(config, agent, channel_config=...,
        clock=...)``."""
        from channelkit.core import ChannelConfig

        spec = REGISTRY[self.platform]
        defaults = spec.playground
        assert defaults is not None and spec.channel_class is not None  # _emulated()
        emulator = defaults.emulator.load()(**defaults.emulator_kwargs())
        emulator.base_url = self.url
        settings: dict[str, Any] = dict(defaults.credentials)
        settings[defaults.api_base_url_option] = self.url
        if len(spec.ingress) > 1 and self.ingress is not None:
            settings["ingress"] = self.ingress
        config = spec.build_config(settings, name=spec.name)
        self.emulator = emulator
        self.channel = spec.channel_class.load()(
            config,
            self.agent,
            channel_config=self._channel_config(ChannelConfig(name=spec.name, model=model)),
            clock=self.clock,
        )

    def _question_timeout_s(self) -> dict[str, Any]:
        """``question_timeout_s`` for configs that have one (Telegram, Slack)."""
        return {} if self.question_expiry is None else {"question_timeout_s": self.question_expiry}

    def _channel_config(self, base: Any) -> Any:
        """``base`` (a `ChannelConfig`) with the permission lifetime ``question_expiry``
        needs (Weixin's text prompts live exactly that long) and the ``channel_options``
        overrides."""
        if self.question_expiry is not None:
            lifetime = (
                self.question_expiry
                if self.platform == "weixin"
                else self._permission_lifetime(base.permission_timeout)
            )
            base = replace(base, permission_timeout=lifetime)
        return replace(base, **self._channel_options) if self._channel_options else base

    def _setup_platform(self) -> None:
        """What a deployment does once at startup: Telegram's setWebhook (or start polling)
        and command menu; then the channel's long connections (Telegram's polling)."""
        if self.platform == "telegram":
            try:
                if self.ingress == "webhook":
                    self.channel.api.client.set_webhook(
                        body={
                            "url": f"{self.url}/telegram/webhook",
                            "secret_token": _TELEGRAM_SECRET,
                        }
                    )
                self.channel.register_command_menus()
            except Exception:
                logger.exception("registering the Telegram bot with the emulator failed")
        start_connections([self.channel])

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> Playground:
        """Serve in a background thread (returns at once)."""
        if not self._started:
            self._server.start(self.app)
            self._started = True
            self._setup_platform()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (Ctrl+C), then close."""
        try:
            self._started = True
            threading.Thread(
                target=self._setup_platform, name="channelkit-playground-setup", daemon=True
            ).start()
            self._server.serve_forever(self.app)
        except KeyboardInterrupt:
            pass
        finally:
            self.close()

    def close(self) -> None:
        """Stop the demo, the channel and the server."""
        demo = getattr(self.agent, "demo", None)
        if demo is not None:
            demo.stop()
        try:
            self.channel.close()
        except Exception:
            logger.exception("closing the playground channel failed")
        if self.instances is not None:
            self.instances.close()
        if self._owns_agent:
            close = getattr(self.agent, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    logger.exception("closing the playground agent failed")
        self.emulator.close()
        self._server.stop()

    def __enter__(self) -> Playground:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- driving it from code ---------------------------------------------------------------
    def send(self, text: str) -> tuple[str, CallbackDelivery]:
        """The person types ``text`` (a signed callback to the channel)."""
        emulator: Any = self.emulator
        result: tuple[str, CallbackDelivery] = emulator.send_user_message(text)
        return result
