"""Every text the SDK shows a person comes from the message catalog, and every locale of
the catalog is complete (issue 27, "Language").

* each locale holds every key of ``en``, with the same named placeholders, and no key
  ``en`` lacks;
* every public ``MSG_*`` / ``TEXT_*`` / label constant of the core and the adapters is
  the English text of a catalog entry (a new person-facing constant outside the catalog
  fails here);
* the Feishu card label tables are the catalog's texts, unchanged in each language;
* locale resolution, fallback to ``en``, and errors for an unknown key or placeholder.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
from types import SimpleNamespace

import pytest
from channelkit.core import catalog
from channelkit.core.catalog import (
    CATALOG,
    LOCALES,
    Message,
    check_locale,
    messages,
    placeholders,
    resolve_locale,
)
from channelkit.errors import ConfigurationError

#: the Discord modules that show a person texts (messages, buttons, notices, forms)
DISCORD_MODULES = ("adapter", "approvals", "output", "questions", "indicators")
#: modules whose upper-case string constants are person-facing texts
TEXT_MODULES = (
    "channelkit.core.text",
    "channelkit.core.queue_notices",
    "channelkit.platforms.common.run_journal",
    "channelkit.platforms.dingtalk.adapter",
    "channelkit.platforms.dingtalk.cluster",
    "channelkit.platforms.dingtalk.output",
    "channelkit.platforms.dingtalk.questions",
    "channelkit.platforms.telegram.adapter",
    "channelkit.platforms.telegram.approvals",
    "channelkit.platforms.telegram.questions",
    "channelkit.platforms.telegram.output",
    "channelkit.platforms.slack.adapter",
    "channelkit.platforms.slack.approvals",
    "channelkit.platforms.slack.questions",
    "channelkit.platforms.slack.output",
    "channelkit.platforms.weixin.adapter",
    "channelkit.platforms.dingtalk.markdown",
    "channelkit.platforms.common.text",
    *(f"channelkit.platforms.discord.{name}" for name in DISCORD_MODULES),
)
#: name prefixes of person-facing constants in those modules (and the suffix ``_TEXT``)
TEXT_PREFIXES = (
    "MSG_",
    "TEXT_",
    "LABEL_",
    "FAILED_",
    "FORBIDDEN_",
    "INTERRUPTED_",
    "CANCELLED_",
    "STOPPED_",
    "REPLY_WITH",
)
#: constants with those prefixes that are no text a person reads
NOT_SHOWN = {"MSG_KEY"}  # DingTalk's message type name ("sampleMarkdown")


def _shown_constants() -> list[tuple[str, str]]:
    found = []
    for name in TEXT_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr in NOT_SHOWN or not (attr.startswith(TEXT_PREFIXES) or attr.endswith("_TEXT")):
                continue
            if isinstance(value, str):
                found.append((f"{name}.{attr}", value))
            elif isinstance(value, dict):
                found += [(f"{name}.{attr}[{k!r}]", v) for k, v in value.items()]
    return found


#: modules whose person-facing texts all come from the catalog: no string literal in
#: their code (docstrings aside) may be the English text of a catalog entry
CATALOG_ONLY_MODULES = (
    "channelkit.platforms.dingtalk.questions",
    "channelkit.platforms.dingtalk.approvals",
    "channelkit.platforms.dingtalk.markdown",
    "channelkit.platforms.slack.questions",
    "channelkit.platforms.telegram.adapter",
    "channelkit.platforms.common.text",
    *(f"channelkit.platforms.discord.{name}" for name in DISCORD_MODULES),
)
#: modules whose person-facing constants must localize: each is a catalog `Message`
#: (carrying its key), never a plain English ``str``
LOCALIZED_MODULES = tuple(f"channelkit.platforms.discord.{name}" for name in DISCORD_MODULES)


def _literals(module_name: str) -> list[tuple[int, str]]:
    """The string literals of a module's code, without its docstrings."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


@pytest.mark.parametrize("module_name", CATALOG_ONLY_MODULES)
def test_no_shown_text_is_written_outside_the_catalog(module_name: str) -> None:
    # a lower-case word ("deny") is also a command name: not a text to look for
    english = {t.strip() for t in CATALOG["en"].values() if not (t.isidentifier() and t.islower())}
    inline = [(line, text) for line, text in _literals(module_name) if text.strip() in english]
    assert inline == [], f"{module_name}: texts to take from the catalog (core/catalog.py)"


def test_the_card_labels_menus_and_markers_are_catalog_texts_that_localize() -> None:
    from channelkit.platforms.common.text import TRUNCATION_MARKER, truncation_marker
    from channelkit.platforms.dingtalk import questions as dq
    from channelkit.platforms.dingtalk.markdown import (
        IMAGE_PENDING,
        delivery_failure_text,
        sanitize_image_markers,
    )
    from channelkit.platforms.slack.questions import TEXT_QUESTION
    from channelkit.platforms.telegram.adapter import BOT_COMMANDS, command_menu

    zh = CATALOG["zh-CN"]
    # the English texts are what they always were
    assert TRUNCATION_MARKER == "[Earlier output truncated]\n"
    assert IMAGE_PENDING == "[Image pending]" and TEXT_QUESTION == "Question"
    assert (dq.TEXT_OTHER, dq.TEXT_SUBMIT) == ("Other", "Submit")
    assert dict(BOT_COMMANDS)["cancel"] == "Cancel the running request"
    # and each is a catalog message that has its text in every locale
    for value in (TRUNCATION_MARKER.rstrip("\n"), IMAGE_PENDING, TEXT_QUESTION, dq.TEXT_OTHER):
        assert isinstance(value, Message) or value in CATALOG["en"].values()
    assert all(isinstance(d, Message) for _, d in BOT_COMMANDS)
    assert dict(command_menu(messages("zh-CN")))["cancel"] == zh["menu.cancel"]
    assert truncation_marker(messages("de")) == CATALOG["de"]["marker.truncated"] + "\n"
    assert sanitize_image_markers("a [IMAGE: /x.png]", messages("zh-CN")) == (
        "a " + zh["marker.image_pending"]
    )
    assert delivery_failure_text((), messages("zh-CN")) == zh["dingtalk.delivery_failed"]
    question = SimpleNamespace(
        answer_key="0", header="Region", question="Which?", options=("A",), multi_select=False
    )
    card = dq.build_question_card_data("r", (question,), messages("zh-CN"))
    assert card["form_btn_text"] == zh["button.submit"]
    other = card["form"]["fields"][0]["options"][-1]
    assert other == {"value": dq.OTHER_OPTION_VALUE, "text": zh["button.other"]}
    end = dq.terminal_param_map("expired", texts=messages("zh-CN"))
    assert (end["question_desc"], end["form_btn_text"]) == (
        zh["dingtalk.q_expired"],
        zh["label.expired_plain"],
    )


def test_every_locale_has_every_key_with_the_same_placeholders() -> None:
    assert LOCALES[0] == "en" and {"en", "zh-CN", "de"} <= set(LOCALES)
    english = CATALOG["en"]
    for locale in LOCALES:
        table = CATALOG[locale]
        assert sorted(set(english) - set(table)) == [], f"{locale} misses keys"
        assert sorted(set(table) - set(english)) == [], f"{locale} has keys en lacks"
        for key, text in table.items():
            assert text.strip(), (locale, key)
            assert placeholders(text) == placeholders(english[key]), (locale, key)
            # formatting with the English placeholders works in every locale
            messages(locale).get(key, **{p: "x" for p in placeholders(english[key])})


def test_the_other_locales_are_translated_not_copied() -> None:
    english = CATALOG["en"]
    for locale in LOCALES[1:]:
        same = [k for k, v in CATALOG[locale].items() if v == english[k]]
        # a few words are spelled alike (none today); most must differ
        assert len(same) <= len(english) // 20, (locale, same)


@pytest.mark.parametrize("module_name", LOCALIZED_MODULES)
def test_every_shown_constant_of_a_localized_module_is_a_catalog_message(
    module_name: str,
) -> None:
    module = importlib.import_module(module_name)
    constants = [
        (attr, value)
        for attr, value in vars(module).items()
        if attr not in NOT_SHOWN and (attr.startswith(TEXT_PREFIXES) or attr.endswith("_TEXT"))
    ]
    plain = [
        (attr, text)
        for attr, value in constants
        for text in (value.values() if isinstance(value, dict) else [value])
        if isinstance(text, str) and not isinstance(text, Message)
    ]
    assert plain == [], f"{module_name}: English texts that cannot localize (use catalog.en)"


def test_every_shown_constant_is_a_catalog_text() -> None:
    english = set(CATALOG["en"].values())
    constants = _shown_constants()
    assert len(constants) > 40  # the scan sees the modules' texts
    missing = [(where, text) for where, text in constants if text not in english]
    assert missing == [], "person-facing constants outside the catalog (core/catalog.py)"


def test_the_core_messages_are_catalog_messages_that_localize() -> None:
    from channelkit.core import text

    names = [n for n in vars(text) if n.startswith("MSG_") or n == "REPLY_WITH"]
    not_messages = [n for n in names if not isinstance(getattr(text, n), Message)]
    assert not_messages == [], "MSG_* constants that do not resolve through the catalog"
    assert messages("zh-CN").text(text.MSG_CANCELLED) == CATALOG["zh-CN"]["command.cancelled"]
    assert messages("en").text(text.MSG_CANCELLED) == "Cancelled current request."
    assert text.format_queued(2, messages("de")) == CATALOG["de"]["queue.ahead"].format(ahead=2)
    assert text.format_queued(0) == text.MSG_QUEUED_NEXT


def test_feishu_card_labels_are_the_catalog_texts_unchanged() -> None:
    from channelkit.platforms.feishu.approvals import TEXTS
    from channelkit.platforms.feishu.cards import STRINGS

    # the texts Feishu cards showed before the catalog, a sample per table and language
    assert STRINGS["zh"]["failed"] == "已失败，请重试"
    assert STRINGS["zh"]["toast_not_owner"] == "只有任务发起人可以操作此卡片。"
    assert STRINGS["en"]["stop"] == "Stop" and STRINGS["de"]["stop"] == "Stopp"
    assert TEXTS["zh"]["title"] == "需要授权" and TEXTS["en"]["sent"] == "Answer sent."
    for language, locale in (("zh", "zh-CN"), ("en", "en"), ("de", "de")):
        for name, value in STRINGS[language].items():
            assert value == CATALOG[locale][f"card.{name}"], (language, name)
    for language, locale in (("zh", "zh-CN"), ("en", "en")):
        for name, value in TEXTS[language].items():
            assert value == CATALOG[locale][f"approval.{name}"], (language, name)


@pytest.mark.parametrize(
    ("tag", "locale"),
    [
        ("en", "en"),
        ("en-US", "en"),
        ("zh-CN", "zh-CN"),
        ("zh_cn", "zh-CN"),
        ("zh", "zh-CN"),
        ("zh-Hans", "zh-CN"),
        ("de", "de"),
        ("de-AT", "de"),
        ("zh-TW", None),
        ("zh-Hant", None),
        ("fr", None),
        ("", None),
        (None, None),
        (3, None),
    ],
)
def test_a_language_tag_resolves_to_the_locale_of_its_language(
    tag: object, locale: str | None
) -> None:
    assert resolve_locale(tag) == locale


def test_an_unknown_locale_falls_back_to_english() -> None:
    assert messages("fr").locale == "en"
    assert messages(None).locale == "en"
    assert messages("zh-TW").get("button.stop") == "Stop"


def test_a_missing_key_or_placeholder_is_an_error() -> None:
    with pytest.raises(KeyError):
        messages("en").get("no.such.key")
    with pytest.raises(KeyError):
        messages("zh-CN").get("queue.ahead")  # {ahead} not given
    with pytest.raises(KeyError):
        catalog.en("no.such.key")


def test_a_configured_locale_must_resolve_and_the_error_names_the_field() -> None:
    assert check_locale("zh", "locale") == "zh-CN"
    with pytest.raises(ConfigurationError, match=r"^options\.locale: must be one of en"):
        check_locale("klingon", "options.locale")


def test_a_message_survives_pickling_with_its_key() -> None:
    message = catalog.en("notice.failed")
    copy = pickle.loads(pickle.dumps(message))
    assert isinstance(copy, Message) and copy.key == "notice.failed" and copy == message


def test_the_text_permission_prompt_is_in_the_persons_language() -> None:
    from channelkit.agents.base import PermissionOption, PermissionRequest
    from channelkit.core.text import format_permission_request, without_reply_commands

    request = PermissionRequest(
        request_id="r1",
        session_id="s1",
        tool_call={"title": "Run ls", "kind": "execute", "rawInput": {"command": "ls"}},
        options=(
            PermissionOption(option_id="proceed_once", name="", kind="allow_once"),
            PermissionOption(option_id="cancel", name="", kind="reject_once"),
        ),
    )
    english = format_permission_request(request)
    german = format_permission_request(request, messages("de"))
    assert english.startswith("Permission required to run a tool\n")
    assert german.startswith(CATALOG["de"]["prompt.title"] + "\n")
    assert CATALOG["de"]["prompt.allow_once"] in german and "/approve" in german
    # the settled prompt drops the reply block in any language
    assert CATALOG["de"]["prompt.reply_with"] not in without_reply_commands(german)
    assert "/approve" not in without_reply_commands(german)
