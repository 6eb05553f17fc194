"""Identifier helpers: snake_case/PascalCase conversion and collision-free names."""

from __future__ import annotations

import re

_CAMEL_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")
_NON_IDENT = re.compile(r"[^0-9a-zA-Z_]+")

# Python's hard keywords, fixed here (not read from the running interpreter's ``keyword``
# module) so the generated code is byte-for-byte the same on every Python version. Soft
# keywords (``match``, ``case``, ``type``, ``_``) are valid identifiers and are kept.
KEYWORDS = frozenset(
    {
        "False", "None", "True", "and", "as", "assert", "async", "await", "break",
        "class", "continue", "def", "del", "elif", "else", "except", "finally", "for",
        "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or",
        "pass", "raise", "return", "try", "while", "with", "yield",
    }
)  # fmt: skip

# Names a generated model's class body or a generated method must not shadow.
RESERVED = frozenset(
    {
        "ANY",
        "Any",
        "BOOLEAN",
        "EnumCodec",
        "INTEGER",
        "ListCodec",
        "MapCodec",
        "Mapping",
        "Model",
        "ModelCodec",
        "NUMBER",
        "NullableCodec",
        "OpenEnum",
        "STRING",
        "UNSET",
        "UnionCodec",
        "UnsetType",
        "bool",
        "body",
        "dataclass",
        "dataclass_json_config",
        "dict",
        "extra_fields",
        "field",
        "float",
        "from_dict",
        "from_json",
        "int",
        "list",
        "object",
        "schema",
        "self",
        "str",
        "timeout",
        "to_dict",
        "to_json",
        "wire",
    }
)


def snake(name: str) -> str:
    """``createAndDeliverCard`` -> ``create_and_deliver_card``; ``x-tt-logid`` -> ``x_tt_logid``."""
    text = _CAMEL_1.sub(r"\1_\2", name)
    text = _CAMEL_2.sub(r"\1_\2", text)
    text = _NON_IDENT.sub("_", text).strip("_").lower()
    text = re.sub(r"_+", "_", text)
    if not text:
        text = "field"
    if text[0].isdigit():
        text = "n_" + text
    return text


def safe_attr(name: str) -> str:
    """A snake_case attribute/argument name that is no keyword and shadows nothing."""
    text = snake(name)
    if text in KEYWORDS or text in RESERVED:
        text += "_"
    return text


def pascal(name: str) -> str:
    """``receive_id_type`` -> ``ReceiveIdType``; ``callbackType`` -> ``CallbackType``."""
    parts = [p for p in snake(name).split("_") if p]
    text = "".join(p[:1].upper() + p[1:] for p in parts)
    if not text or text[0].isdigit():
        text = "T" + text
    return text


def enum_member(value: object) -> str:
    """The member name for an enum value: ``open_id`` -> ``OPEN_ID``, ``1`` -> ``VALUE_1``."""
    if isinstance(value, str):
        text = snake(value).upper() if value else "EMPTY"
    else:
        text = "VALUE_" + _NON_IDENT.sub("_", str(value)).strip("_")
    if not text or text[0].isdigit():
        text = "VALUE_" + text
    if text in KEYWORDS:
        text += "_"
    return text


def unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... whichever is not in ``taken``; adds it."""
    candidate = name
    n = 2
    while candidate in taken:
        candidate = f"{name}_{n}"
        n += 1
    taken.add(candidate)
    return candidate
