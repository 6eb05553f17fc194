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
]

setup(
    name="channelkit",
    version="0.1.0",
    description=(
        "Synchronous, thread-pool-backed SDK connecting AI agent runs to IM platforms "
        "with native cards, questions and indicators."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    package_dir={"": "sdk"},
    packages=find_packages(where="sdk"),
    include_package_data=True,
    package_data={"channelkit": ["py.typed", "**/*.json", "**/*.html", "**/*.js", "**/*.css"]},
    install_requires=[
        "requests>=2.31",
        "urllib3>=2.0",
        "dataclasses-json>=0.6.4",
        "jsonschema>=4.20",
        "cachetools>=5.3",
    ],
    extras_require={
        "flask": ["flask>=2.3"],
        "django": ["django>=4.2"],
        "acp": [],
        "test": TEST_REQUIRES + ["flask>=2.3", "django>=4.2"],
        "dev": TEST_REQUIRES
        + [
            "flask>=2.3",
            "django>=4.2",
            "tox>=4.11",
            "ruff==0.8.6",
            "mypy==2.4.1",
            "types-requests",
            "types-jsonschema",
            "types-cachetools",
        ],
    },
    entry_points={"console_scripts": ["channelkit=channelkit.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Typing :: Typed",
    ],
)
