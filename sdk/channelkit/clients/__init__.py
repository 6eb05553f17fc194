"""Platform HTTP clients GENERATED from ``openapi/<platform>.json`` by ``python -m codegen``.

One package per platform (``channelkit.clients.dingtalk``, ``.feishu``, ``.telegram``,
``.weixin``, ...), each exporting a ``<Platform>Client`` and its models. Never edit these
files by hand: change the OpenAPI document and regenerate (docs/regenerating-clients.md).
"""
