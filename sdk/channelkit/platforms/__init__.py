"""channelkit.platforms: one package per platform, and `PLATFORMS`, the registry every
entry point reads (`channelkit serve`, `check-config`, `config-schema`, the playground,
`channelkit send`, the front door, the token providers).

`PLATFORMS["telegram"]` is a frozen `PlatformSpec` (see `channelkit.platforms.registry`):
the config and channel classes as lazily loaded `Ref`s, the credentials schema, the
ingress modes (default first), the capabilities, the presentation renderer and sender
and the playground emulator. Importing this package loads no platform package.

A new platform is its own folders plus one entry in `BUILTIN_PLATFORMS` below (or a
`register_platform(spec)` call from outside the package; docs/architecture.md,
"Adding a platform").
"""

from __future__ import annotations

from channelkit.platforms.registry import (
    CAPABILITIES,
    CHAT,
    KINDS,
    PLATFORMS,
    PRESENTATION_ONLY,
    SECRET_SCHEMA,
    SHARED_STORE_MODES,
    PlatformSpec,
    PlaygroundDefaults,
    Ref,
    Registration,
    chat_platforms,
    get_platform,
    platform_offers,
    register_platform,
    secret_credentials,
)

__all__ = [
    "BUILTIN_PLATFORMS",
    "CAPABILITIES",
    "CHAT",
    "KINDS",
    "PLATFORMS",
    "PRESENTATION_ONLY",
    "SECRET_SCHEMA",
    "SHARED_STORE_MODES",
    "PlatformSpec",
    "PlaygroundDefaults",
    "Ref",
    "Registration",
    "chat_platforms",
    "get_platform",
    "platform_offers",
    "register_platform",
    "secret_credentials",
]

_P = "channelkit.platforms"
_EMU = "channelkit.playground"


def _renderer(name: str) -> Ref:
    return Ref(f"{_P}.{name}.renderer:render")


def _check(name: str) -> Ref:
    return Ref(f"{_P}.{name}.api:check_credentials")


def _sender(name: str, cls: str) -> Ref:
    return Ref(f"{_P}.{name}.sender:{cls}")


#: The platforms channelkit ships, registered in this order when the package is imported.
BUILTIN_PLATFORMS: tuple[PlatformSpec, ...] = (
    PlatformSpec(
        name="dingtalk",
        display_name="DingTalk",
        kind=CHAT,
        docs="platforms/dingtalk.md",
        config_class=Ref(f"{_P}.dingtalk:DingtalkConfig"),
        channel_class=Ref(f"{_P}.dingtalk:DingtalkChannel"),
        credentials_schema=secret_credentials(
            "clientId", "clientSecret", optional=("cardCallbackSecret",)
        ),
        ingress=("stream", "http"),
        parse_config=Ref(f"{_P}.dingtalk:DingtalkConfig.from_dict"),
        name_setting="name",
        shared_store="cluster",  # run ownership, routed card callbacks, leases, recovery
        check_credentials=_check("dingtalk"),
        capabilities=frozenset(
            {
                "streaming",
                "cards",
                "stop_button",
                "forms",
                "approval_buttons",
                "typing",
                "presentation",
                "files_out",
            }
        ),
        renderer=_renderer("dingtalk"),
        sender=_sender("dingtalk", "DingtalkSender"),
        token_provider=Ref("channelkit.http.auth:DingTalkTokenProvider"),
        chat_id_help="an openConversationId (cid...), or user:<userId> for a 1:1 chat",
        playground=PlaygroundDefaults(
            emulator=Ref(f"{_EMU}.dingtalk:DingtalkEmulator"),
            credentials={
                "clientId": "playground-app",
                "clientSecret": "playground-secret",
                "cardCallbackSecret": "playground-card-secret",
            },
            emulator_credentials={
                "app_key": "clientId",
                "app_secret": "clientSecret",
                "api_secret": "cardCallbackSecret",
            },
        ),
    ),
    PlatformSpec(
        name="feishu",
        display_name="Feishu / Lark",
        kind=CHAT,
        docs="platforms/feishu.md",
        config_class=Ref(f"{_P}.feishu:FeishuConfig"),
        channel_class=Ref(f"{_P}.feishu:FeishuChannel"),
        # verificationToken: required by the config with "ingress": "http" (the default)
        credentials_schema=secret_credentials(
            "appId", "appSecret", optional=("verificationToken", "encryptKey")
        ),
        ingress=("http", "websocket"),
        parse_config=Ref(f"{_P}.feishu:FeishuConfig.from_dict"),
        settings_case="snake",
        shared_store="dedup",  # event_id dedup across instances
        check_credentials=_check("feishu"),
        capabilities=frozenset(
            {
                "streaming",
                "cards",
                "stop_button",
                "forms",
                "approval_buttons",
                "pins",
                "typing",
                "presentation",
                "threads",
                "files_out",
            }
        ),
        renderer=_renderer("feishu"),
        sender=_sender("feishu", "FeishuSender"),
        token_provider=Ref("channelkit.http.auth:FeishuTokenProvider"),
        chat_id_help="a chat_id (oc_...)",
        playground=PlaygroundDefaults(
            emulator=Ref(f"{_EMU}.feishu:FeishuEmulator"),
            credentials={
                "appId": "cli_playground",
                "appSecret": "playground-secret",
                "verificationToken": "playground-verification-token",
                "encryptKey": "playground-encrypt-key",
            },
            emulator_credentials={
                "app_id": "appId",
                "app_secret": "appSecret",
                "verification_token": "verificationToken",
                "encrypt_key": "encryptKey",
            },
            api_base_url_option="baseUrl",
        ),
    ),
    PlatformSpec(
        name="telegram",
        display_name="Telegram",
        kind=CHAT,
        docs="platforms/telegram.md",
        config_class=Ref(f"{_P}.telegram:TelegramConfig"),
        channel_class=Ref(f"{_P}.telegram:TelegramChannel"),
        credentials_schema=secret_credentials("botToken", optional=("webhookSecret",)),
        ingress=("polling", "webhook"),
        name_setting="channelName",
        shared_store="dedup",  # update_id dedup across instances
        check_credentials=_check("telegram"),
        capabilities=frozenset(
            {
                "streaming",
                "forms",
                "approval_buttons",
                "pins",
                "typing",
                "presentation",
                "threads",  # forum topics
                "files_out",
            }
        ),
        renderer=_renderer("telegram"),
        sender=_sender("telegram", "TelegramSender"),
        chat_id_help="a chat id (a number; negative for groups)",
        playground=PlaygroundDefaults(
            emulator=Ref(f"{_EMU}.telegram:TelegramEmulator"),
            credentials={
                "botToken": "123456:playground-bot-token",
                "webhookSecret": "playground-webhook-secret",
            },
            emulator_credentials={"bot_token": "botToken", "secret_token": "webhookSecret"},
        ),
    ),
    PlatformSpec(
        name="slack",
        display_name="Slack",
        kind=CHAT,
        docs="platforms/slack.md",
        config_class=Ref(f"{_P}.slack:SlackConfig"),
        channel_class=Ref(f"{_P}.slack:SlackChannel"),
        # signingSecret: required by the config with "ingress": "events" (the default);
        # appToken (xapp-...): required with "ingress": "socket" (Socket Mode)
        credentials_schema=secret_credentials("botToken", optional=("signingSecret", "appToken")),
        ingress=("events", "socket"),
        name_setting="channelName",
        shared_store="dedup",  # event_id dedup and rate-limit buckets across instances
        check_credentials=_check("slack"),
        capabilities=frozenset(
            {
                "streaming",
                "stop_button",
                "forms",
                "approval_buttons",
                "pins",
                "typing",
                "presentation",
                "threads",
                "files_out",
            }
        ),
        renderer=_renderer("slack"),
        sender=_sender("slack", "SlackSender"),
        chat_id_help="a channel id (C..., or D... for a direct message)",
        playground=PlaygroundDefaults(
            emulator=Ref(f"{_EMU}.slack:SlackEmulator"),
            credentials={
                "botToken": "xoxb-playground-bot-token",
                "signingSecret": "playground-signing-secret",
                "appToken": "xapp-1-playground-app-token",
            },
            emulator_credentials={
                "bot_token": "botToken",
                "signing_secret": "signingSecret",
                "app_token": "appToken",
            },
            emulator_options={"events_url": "", "interactivity_url": ""},
        ),
    ),
    PlatformSpec(
        name="weixin",
        display_name="Weixin (WeChat iLink)",
        kind=CHAT,
        docs="platforms/weixin.md",
        config_class=Ref(f"{_P}.weixin:WeixinConfig"),
        channel_class=Ref(f"{_P}.weixin:WeixinChannel"),
        credentials_schema=secret_credentials("botToken"),
        ingress=("polling",),
        name_setting="channelName",
        shared_store="dedup",  # message_id dedup across instances
        # no check_credentials: iLink has no read-only call that tests the token alone
        # (getconfig needs a person's id, getupdates would take their messages)
        capabilities=frozenset({"typing", "files_out"}),
        chat_id_help="the person's iLink user id (...@im.wechat)",
        playground=PlaygroundDefaults(
            emulator=Ref(f"{_EMU}.weixin:WeixinEmulator"),
            credentials={"botToken": "playground-weixin-bot-token"},
            emulator_credentials={"bot_token": "botToken"},
            api_base_url_option="baseUrl",
        ),
    ),
    PlatformSpec(
        name="discord",
        display_name="Discord",
        kind=CHAT,
        docs="platforms/discord.md",
        config_class=Ref(f"{_P}.discord:DiscordConfig"),
        channel_class=Ref(f"{_P}.discord:DiscordChannel"),
        # publicKey: required by the config with "ingress": "interactions"
        credentials_schema=secret_credentials("botToken", "applicationId", optional=("publicKey",)),
        ingress=("gateway", "interactions"),
        name_setting="channelName",
        shared_store="dedup",  # message id dedup across instances
        check_credentials=_check("discord"),
        capabilities=frozenset(
            {
                "streaming",
                "stop_button",
                "forms",
                "approval_buttons",
                "pins",
                "typing",
                "presentation",
                "threads",
                "files_out",
            }
        ),
        renderer=_renderer("discord"),
        sender=_sender("discord", "DiscordSender"),
        chat_id_help="a channel id (a thread's id for a thread; a DM channel's id)",
        playground=PlaygroundDefaults(
            emulator=Ref(f"{_EMU}.discord:DiscordEmulator"),
            credentials={
                "botToken": "playground-discord-bot-token",
                "applicationId": "1100000000000000001",
                "publicKey": "0" * 64,  # the emulator's own key replaces it
            },
            emulator_credentials={"bot_token": "botToken"},
        ),
    ),
    PlatformSpec(
        name="msteams",
        display_name="Microsoft Teams",
        kind=PRESENTATION_ONLY,
        docs="platforms/msteams.md",
        capabilities=frozenset({"presentation"}),
        renderer=_renderer("msteams"),
        sender=_sender("msteams", "MsteamsSender"),
        token_provider=Ref("channelkit.http.auth:BotFrameworkTokenProvider"),
        chat_id_help="a conversation id",
    ),
    PlatformSpec(
        name="mattermost",
        display_name="Mattermost",
        kind=PRESENTATION_ONLY,
        docs="platforms/mattermost.md",
        capabilities=frozenset({"pins", "presentation"}),
        renderer=_renderer("mattermost"),
        sender=_sender("mattermost", "MattermostSender"),
        chat_id_help="a channel id",
    ),
    PlatformSpec(
        name="line",
        display_name="LINE",
        kind=PRESENTATION_ONLY,
        docs="platforms/line.md",
        capabilities=frozenset({"presentation"}),
        renderer=_renderer("line"),
        sender=_sender("line", "LineSender"),
        chat_id_help="a user, group or room id",
    ),
)

for _spec in BUILTIN_PLATFORMS:
    register_platform(_spec)
del _spec
