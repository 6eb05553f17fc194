"""Weixin (WeChat iLink bot): plain text plus typing via getconfig + sendtyping.

``WeixinChannel`` supports neither streaming output nor native input and inherits the
text behaviour of ``ChannelBase``; see ``docs/platforms/weixin.md``.
"""

from channelkit.platforms.weixin.adapter import WeixinChannel
from channelkit.platforms.weixin.config import WeixinConfig

__all__ = ["WeixinChannel", "WeixinConfig"]
