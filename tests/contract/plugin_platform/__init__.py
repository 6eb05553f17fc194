"""A chat platform defined inside the test suite, to prove that a platform is a plug-in.

"Tinychat" is a deliberately small platform: a signed JSON POST per person's message or
button press (``ingress``), messages the bot posts and edits (its output surface), inline
buttons (Stop, question choices). Its channel extends `ChannelBase` and fills the
contract's seams with the shared types and rules (`Interaction` / `Decision` /
`InteractionRouter`, `OutputSurface`, `QuestionSurface`, `native_input`); its emulator is
an `EmulatorBase`; nothing of it lives in the package. `SPEC` is its registry entry
(`register_platform(SPEC)`), `pytest_plugin` registers it and its contract driver.
"""

from __future__ import annotations

from channelkit.platforms import CHAT, PlatformSpec, PlaygroundDefaults, secret_credentials

NAME = "tinychat"

#: The registry entry: every `Ref` points into this test package.
SPEC = PlatformSpec(
    name=NAME,
    display_name="Tinychat (the contract suite's plug-in platform)",
    kind=CHAT,
    docs="architecture.md",
    config_class="plugin_platform.api:TinychatConfig",
    channel_class="plugin_platform.channel:TinychatChannel",
    credentials_schema=secret_credentials("botToken", "signingSecret"),
    ingress=("webhook",),
    name_setting="channelName",
    capabilities=frozenset({"streaming", "stop_button", "forms", "approval_buttons"}),
    chat_id_help="a chat id (chat-...)",
    playground=PlaygroundDefaults(
        emulator="plugin_platform.emulator:TinychatEmulator",
        credentials={"botToken": "tiny-bot-token", "signingSecret": "tiny-signing-secret"},
        emulator_credentials={"bot_token": "botToken", "signing_secret": "signingSecret"},
    ),
)
