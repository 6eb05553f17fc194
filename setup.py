"""channelkit: put an AI agent in front of people on IM platforms."""

from setuptools import find_packages, setup

TEST_REQUIRES = [
    "pytest>=7.4",
    "requests-mock>=1.11",
    "freezegun>=1.4",
    "hypothesis>=6.90",
    # Test-only: cross-checks the pure-Python AES-256-CBC (Feishu event decryption)
    # against an independent implementation.
    "cryptography>=41",
    # The quickstarts' server start command (waitress-serve) runs in the tests.
    "waitress>=3.0",
    # The suite runs its test files in parallel worker processes: most of its time is
    # real waiting (processes starting, servers answering, bounded waits), not CPU.
    "pytest-xdist>=3.6",
]

#: The WSGI server the docs and `channelkit serve` use.
SERVE_REQUIRES = ["waitress>=3.0"]

#: Feishu's long connection (``"ingress": "websocket"``): its frames are protobuf
#: messages (built at run time from a descriptor: no generated code, no stubs needed).
#: An extra, because Feishu's default ingress is HTTP callbacks.
FEISHU_WS_REQUIRES = ["protobuf>=5.26"]

#: Several processes serving one bot share their state in Redis (channelkit.state's
#: RedisStore). An extra, because one process keeps its state in memory.
REDIS_REQUIRES = ["redis>=5"]

#: Prometheus metrics (`GET /metrics` on `channelkit serve` and the playground, counters
#: shared across `serve --workers N`): an extra, because an application embedding the SDK
#: may export its own metrics.
METRICS_REQUIRES = ["prometheus_client>=0.20"]

#: OpenTelemetry traces (one span per inbound message, run, agent turn, platform API
#: call and delivery): the API only; the application installs and configures the SDK
#: and its exporter. An extra: without it tracing costs nothing.
OTEL_REQUIRES = ["opentelemetry-api>=1.20"]

#: The tests read the spans back through the SDK's in-memory exporter.
OTEL_TEST_REQUIRES = [*OTEL_REQUIRES, "opentelemetry-sdk>=1.20"]

#: Discord's HTTP interactions endpoint verifies each request's Ed25519 signature
#: (cryptography: maintained, wheels everywhere, rejects non-canonical signatures).
DISCORD_REQUIRES = ["cryptography>=41"]

#: Every optional feature the README and ``channelkit playground --help`` offer, in one
#: extra: serve, Flask, Django, the Feishu long connection and the Redis store.
ALL_REQUIRES = sorted(
    {
        *SERVE_REQUIRES,
        *FEISHU_WS_REQUIRES,
        *REDIS_REQUIRES,
        *METRICS_REQUIRES,
        *OTEL_REQUIRES,
        *DISCORD_REQUIRES,
        "flask>=2.3",
        "django>=4.2",
    }
)

REPOSITORY = "https://github.com/channelkit/channelkit"
DOCUMENTATION = "https://channelkit.github.io/channelkit/"

setup(
    name="channelkit",
    version="0.1.0",
    description=(
        "Synchronous, thread-pool-backed SDK connecting AI agent runs to IM platforms "
        "with native cards, questions and indicators."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    author="The channelkit authors",
    url=REPOSITORY,
    project_urls={
        "Documentation": DOCUMENTATION,
        "Source": REPOSITORY,
        "Changelog": f"{REPOSITORY}/blob/main/CHANGELOG.md",
        "Issues": f"{REPOSITORY}/issues",
    },
    license="Apache-2.0",
    license_files=["LICENSE"],
    keywords=["chatbot", "agent", "dingtalk", "feishu", "lark", "telegram", "weixin", "wsgi"],
    python_requires=">=3.10",
    package_dir={"": "sdk"},
    # channelkit.playground.static holds only the chat page (no __init__.py): a data package.
    packages=[*find_packages(where="sdk"), "channelkit.playground.static"],
    include_package_data=False,
    package_data={
        "channelkit": ["py.typed"],
        "channelkit.presentation": ["schema.json"],
        "channelkit.playground.static": ["*.html", "*.js", "*.css"],
    },
    zip_safe=False,
    install_requires=[
        "requests>=2.31",
        "urllib3>=2.0",
        "dataclasses-json>=0.6.4",
        "jsonschema>=4.20",
        "cachetools>=5.3",
        # DingTalk Stream mode (the default ingress): the client connection, and the
        # playground emulator's gateway (synchronous API, websockets.sync.*).
        "websockets>=13",
        # Agent answers are Markdown: parsed once (CommonMark with markdown-it-py's own
        # GFM table and strikethrough rules) and rendered in each platform's dialect.
        "markdown-it-py>=3.0",
    ],
    extras_require={
        "flask": ["flask>=2.3"],
        "django": ["django>=4.2"],
        "acp": [],
        "serve": SERVE_REQUIRES,
        "feishu-ws": FEISHU_WS_REQUIRES,
        "redis": REDIS_REQUIRES,
        "metrics": METRICS_REQUIRES,
        "otel": OTEL_REQUIRES,
        "discord": DISCORD_REQUIRES,
        "all": ALL_REQUIRES,
        "test": TEST_REQUIRES
        + FEISHU_WS_REQUIRES
        + REDIS_REQUIRES
        + METRICS_REQUIRES
        + OTEL_TEST_REQUIRES
        + ["flask>=2.3", "django>=4.2"],
        "dev": TEST_REQUIRES
        + FEISHU_WS_REQUIRES
        + REDIS_REQUIRES
        + METRICS_REQUIRES
        + OTEL_TEST_REQUIRES
        + [
            "flask>=2.3",
            "django>=4.2",
            "tox>=4.11",
            "tox-uv>=1.29",
            "ruff==0.8.6",
            "mypy==2.4.1",
            "types-requests",
            "types-jsonschema",
            "types-cachetools",
        ],
    },
    entry_points={"console_scripts": ["channelkit=channelkit.cli:main"]},
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Framework :: Django",
        "Framework :: Flask",
        "Intended Audience :: Developers",
        "Operating System :: OS Independent",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Communications :: Chat",
        "Topic :: Internet :: WWW/HTTP :: WSGI :: Application",
        "Topic :: Software Development :: Libraries :: Python Modules",
        "Typing :: Typed",
    ],
)
