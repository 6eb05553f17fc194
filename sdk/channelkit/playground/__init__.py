"""channelkit.playground: a local platform emulator, a chat page and a demo agent.

``channelkit playground`` (or `Playground` from code) runs everything in one
process on 127.0.0.1 without credentials. Tests start just the emulator with
`EmulatorServer`. See docs/playground.md.
"""

from __future__ import annotations

from channelkit.playground.app import PLATFORMS, Playground
from channelkit.playground.demo import DEMO_QUESTIONS, DemoAgent, demo_agent
from channelkit.playground.dingtalk import (
    DingtalkEmulator,
    dingtalk_card_signature,
    dingtalk_robot_sign,
)
from channelkit.playground.emulator import CallbackDelivery, EmulatorBase, http_deliver
from channelkit.playground.feishu import FeishuEmulator, feishu_encrypt, feishu_signature
from channelkit.playground.server import EmulatorServer, LocalServer, free_port
from channelkit.playground.telegram import TelegramEmulator

__all__ = [
    "DEMO_QUESTIONS",
    "PLATFORMS",
    "CallbackDelivery",
    "DemoAgent",
    "DingtalkEmulator",
    "EmulatorBase",
    "EmulatorServer",
    "FeishuEmulator",
    "LocalServer",
    "Playground",
    "TelegramEmulator",
    "demo_agent",
    "dingtalk_card_signature",
    "dingtalk_robot_sign",
    "feishu_encrypt",
    "feishu_signature",
    "free_port",
    "http_deliver",
]
