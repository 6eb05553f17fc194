"""Runtime support for the generated models: ``UNSET``, open enums, codecs and ``Model``.

Generated models are stdlib dataclasses deriving `Model`, which offers the
``dataclasses_json.DataClassJsonMixin`` interface (``to_json``/``from_json``/``schema`` work
as usual) without importing dataclasses-json until one of those is first called. Each
field carries its wire name (the dataclasses-json ``field_name`` alias) and a *codec*
describing its JSON shape. ``Model.from_dict``/``Model.to_dict`` walk those codecs instead of
dataclasses-json's reflection so that

- an absent field is `UNSET` (distinct from ``None``, which is JSON ``null``) and is
  left out of ``to_dict``;
- unknown wire fields land in ``extra_fields`` and are written back by ``to_dict``;
- enums are *open*: a value the SDK has not seen is kept as its raw string/int;
- bad data raises `DeserializationError` naming the field path,
  e.g. ``result.deliverResults[0].success``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

from channelkit.errors import ConfigurationError, DeserializationError

if TYPE_CHECKING:
    from dataclasses_json import DataClassJsonMixin

__all__ = [
    "ANY",
    "BOOLEAN",
    "INTEGER",
    "NUMBER",
    "STRING",
    "UNSET",
    "Codec",
    "EnumCodec",
    "ListCodec",
    "MapCodec",
    "Model",
    "ModelCodec",
    "NullableCodec",
    "OpenEnum",
    "PrimitiveCodec",
    "UnionCodec",
    "UnsetType",
    "encode_value",
    "wire",
]

M = TypeVar("M", bound="Model")


class UnsetType(enum.Enum):
    """Type of `UNSET`: the value of an optional field that is absent on the wire."""

    UNSET = "UNSET"

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = UnsetType.UNSET
"""Marks an optional field as absent (not sent, not received); ``None`` means JSON null."""


class OpenEnum(enum.Enum):
    """Base of generated enums, which are open: an unlisted value decodes to the raw
    string or integer instead of failing (see `EnumCodec`)."""

    @classmethod
    def decode(cls, value: Any) -> Any:
        """Return the member for ``value``, or ``value`` itself when it is not a known member."""
        try:
            return cls(value)
        except ValueError:
            return value


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


class Codec:
    """Converts one JSON value to its Python form (``decode``) and back (``encode``).

    ``decode`` raises `DeserializationError`; ``encode`` raises
    `ConfigurationError`; both name ``path``.
    """

    description = "any value"

    def decode(self, value: Any, path: str) -> Any:
        return value

    def encode(self, value: Any, path: str) -> Any:
        return encode_value(value)

    def accepts(self, value: Any) -> bool:
        """True when ``encode`` would accept ``value`` (used by unions)."""
        return True


class PrimitiveCodec(Codec):
    """A JSON string, integer, number or boolean."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.description = kind

    def accepts(self, value: Any) -> bool:
        if self.kind == "string":
            return isinstance(value, str)
        if isinstance(value, bool):
            return self.kind == "boolean"
        if self.kind == "integer":
            return isinstance(value, int)
        if self.kind == "number":
            return isinstance(value, int | float)
        return False

    def decode(self, value: Any, path: str) -> Any:
        if not self.accepts(value):
            raise DeserializationError(path, value, f"expected {self.kind}, got {_kind(value)}")
        return value

    def encode(self, value: Any, path: str) -> Any:
        if isinstance(value, enum.Enum) and self.accepts(value.value):
            return value.value
        if not self.accepts(value):
            raise ConfigurationError(f"expected {self.kind}, got {_kind(value)}", path)
        return value


class _AnyCodec(Codec):
    pass


ANY: Final[Codec] = _AnyCodec()
STRING: Final = PrimitiveCodec("string")
INTEGER: Final = PrimitiveCodec("integer")
NUMBER: Final = PrimitiveCodec("number")
BOOLEAN: Final = PrimitiveCodec("boolean")


class NullableCodec(Codec):
    """``inner`` or JSON null."""

    def __init__(self, inner: Codec) -> None:
        self.inner = inner
        self.description = f"{inner.description} or null"

    def accepts(self, value: Any) -> bool:
        return value is None or self.inner.accepts(value)

    def decode(self, value: Any, path: str) -> Any:
        return None if value is None else self.inner.decode(value, path)

    def encode(self, value: Any, path: str) -> Any:
        return None if value is None else self.inner.encode(value, path)


class UnionCodec(Codec):
    """One of several codecs (``oneOf``/``anyOf`` of primitives, or a list of types)."""

    def __init__(self, *options: Codec) -> None:
        self.options = options
        self.description = " or ".join(o.description for o in options)

    def accepts(self, value: Any) -> bool:
        return any(o.accepts(value) for o in self.options)

    def decode(self, value: Any, path: str) -> Any:
        for option in self.options:
            if option.accepts(value):
                return option.decode(value, path)
        raise DeserializationError(path, value, f"expected {self.description}, got {_kind(value)}")

    def encode(self, value: Any, path: str) -> Any:
        for option in self.options:
            if option.accepts(value):
                return option.encode(value, path)
        raise ConfigurationError(f"expected {self.description}, got {_kind(value)}", path)


class ListCodec(Codec):
    """A JSON array whose items use ``item``."""

    def __init__(self, item: Codec) -> None:
        self.item = item
        self.description = f"array of {item.description}"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list | tuple)

    def decode(self, value: Any, path: str) -> Any:
        if not isinstance(value, list):
            raise DeserializationError(path, value, f"expected array, got {_kind(value)}")
        return [self.item.decode(v, f"{path}[{i}]") for i, v in enumerate(value)]

    def encode(self, value: Any, path: str) -> Any:
        if not isinstance(value, list | tuple):
            raise ConfigurationError(f"expected array, got {_kind(value)}", path)
        return [self.item.encode(v, f"{path}[{i}]") for i, v in enumerate(value)]


class MapCodec(Codec):
    """A JSON object with arbitrary keys whose values use ``value``."""

    def __init__(self, value: Codec) -> None:
        self.value = value
        self.description = f"object of {value.description}"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, Mapping)

    def decode(self, value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise DeserializationError(path, value, f"expected object, got {_kind(value)}")
        return {k: self.value.decode(v, _join(path, str(k))) for k, v in value.items()}

    def encode(self, value: Any, path: str) -> Any:
        if not isinstance(value, Mapping):
            raise ConfigurationError(f"expected object, got {_kind(value)}", path)
        return {str(k): self.value.encode(v, _join(path, str(k))) for k, v in value.items()}


class EnumCodec(Codec):
    """An open enum: known values become members, unseen ones stay raw (never an error)."""

    def __init__(self, enum_type: Callable[[], type[OpenEnum]], base: PrimitiveCodec) -> None:
        self._enum_type = enum_type
        self.base = base
        self.description = base.description

    def accepts(self, value: Any) -> bool:
        if isinstance(value, enum.Enum):
            return isinstance(value, self._enum_type())
        return self.base.accepts(value)

    def decode(self, value: Any, path: str) -> Any:
        return self._enum_type().decode(self.base.decode(value, path))

    def encode(self, value: Any, path: str) -> Any:
        if isinstance(value, enum.Enum):
            if not isinstance(value, self._enum_type()):
                raise ConfigurationError(
                    f"expected {self._enum_type().__name__}, got {type(value).__name__}", path
                )
            return value.value
        return self.base.encode(value, path)


class ModelCodec(Codec):
    """A nested generated model; ``model`` is a thunk so forward references work."""

    description = "object"

    def __init__(self, model: Callable[[], type[Model]]) -> None:
        self._model = model

    @property
    def model(self) -> type[Model]:
        return self._model()

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.model | Mapping)

    def decode(self, value: Any, path: str) -> Any:
        return self.model._decode(value, path)

    def encode(self, value: Any, path: str) -> Any:
        if isinstance(value, Model):
            if not isinstance(value, self.model):
                raise ConfigurationError(
                    f"expected {self.model.__name__}, got {type(value).__name__}", path
                )
            return value._encode(path)
        if isinstance(value, Mapping):
            return encode_value(value)
        raise ConfigurationError(f"expected {self.model.__name__} object, got {_kind(value)}", path)


def encode_value(value: Any) -> Any:
    """Turn models, enums, tuples and mappings into plain JSON values (no type checks)."""
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): encode_value(v) for k, v in value.items() if v is not UNSET}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    return value


_META_KEY = "channelkit"


def wire(name: str, codec: Codec, *, required: bool = False) -> dict[str, Any]:
    """Field metadata for a generated model: the wire name (a dataclasses-json alias) and codec.

    The ``dataclasses_json`` entry is what ``dataclasses_json.config(field_name=name,
    exclude=...)`` returns, built here so defining a model does not import dataclasses-json.
    """

    def letter_case(_: str, _field_name: str = name) -> str:
        return _field_name

    meta: dict[str, Any] = {
        "dataclasses_json": {"letter_case": letter_case, "exclude": _is_unset},
        _META_KEY: (name, codec, required),
    }
    return meta


def _is_unset(value: Any) -> bool:
    return value is UNSET


def _mixin() -> type[DataClassJsonMixin]:
    """dataclasses-json's mixin, imported on first use; `Model` is registered as its
    virtual subclass so dataclasses-json treats nested models as its own."""
    from dataclasses_json import DataClassJsonMixin

    if not issubclass(Model, DataClassJsonMixin):
        DataClassJsonMixin.register(Model)
    return DataClassJsonMixin


@dataclasses.dataclass(frozen=True)
class _FieldInfo:
    attr: str
    wire: str
    codec: Codec
    required: bool


class Model:
    """Base of every generated model (a dataclass with aliased, codec-described fields).

    Construct with keyword arguments using the Python attribute names; ``from_dict`` and
    ``to_dict`` use the wire names. ``to_json``, ``from_json`` and ``schema`` are
    dataclasses-json's (``DataClassJsonMixin``), loaded when first called.

    Every generated model ends with an ``extra_fields`` dict (not shown in ``repr``): the
    wire fields its schema does not list, by wire name, as decoded JSON. ``from_dict`` fills
    it and ``to_dict`` writes it back after the known fields (a known field wins a clash),
    so a platform field the SDK has not seen yet survives a round trip.
    """

    dataclass_json_config: ClassVar[dict[str, Any] | None] = None
    extra_fields: dict[str, Any]
    _fields_cache: ClassVar[tuple[_FieldInfo, ...] | None] = None

    @classmethod
    def _wire_fields(cls) -> tuple[_FieldInfo, ...]:
        cached = cls.__dict__.get("_fields_cache")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        infos = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            meta = f.metadata.get(_META_KEY)
            if meta is not None:
                infos.append(_FieldInfo(f.name, meta[0], meta[1], meta[2]))
        result = tuple(infos)
        cls._fields_cache = result
        return result

    @classmethod
    def _decode(cls: type[M], data: Any, path: str) -> M:
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise DeserializationError(
                path or "<root>", data, f"expected {cls.__name__} object, got {_kind(data)}"
            )
        kwargs: dict[str, Any] = {}
        known: set[str] = set()
        for info in cls._wire_fields():
            known.add(info.wire)
            sub = _join(path, info.wire)
            if info.wire not in data:
                if info.required:
                    raise DeserializationError(sub, None, "required field is missing")
                continue
            kwargs[info.attr] = info.codec.decode(data[info.wire], sub)
        kwargs["extra_fields"] = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs)

    def _encode(self, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for info in self._wire_fields():
            value = getattr(self, info.attr)
            if value is UNSET:
                continue
            out[info.wire] = info.codec.encode(value, _join(path, info.wire))
        for key, value in self.extra_fields.items():
            if key not in out:
                out[key] = encode_value(value)
        return out

    @classmethod
    def from_dict(cls: type[M], kvs: Any, *, infer_missing: bool = False) -> M:
        """Build the model from its JSON (wire-name) form; unknown fields are kept.

        Raises `DeserializationError` naming the bad field's path.
        """
        return cls._decode(kvs, "")

    def to_dict(self, encode_json: bool = False) -> dict[str, Any]:
        """The JSON (wire-name) form: UNSET fields left out, unknown fields written back.

        Raises `ConfigurationError` naming a field of the wrong type.
        """
        return self._encode("")

    def to_json(self, **kw: Any) -> str:
        """JSON text of `to_dict()` (dataclasses-json's ``to_json``; same keywords)."""
        mixin: Any = _mixin()
        text: str = mixin.to_json(self, **kw)
        return text

    @classmethod
    def from_json(cls: type[M], s: str | bytes | bytearray, **kw: Any) -> M:
        """Parse JSON text and `from_dict()` it (dataclasses-json's ``from_json``)."""
        mixin: Any = _mixin()
        model: M = mixin.from_json.__func__(cls, s, **kw)
        return model

    @classmethod
    def schema(cls, **kw: Any) -> Any:
        """A marshmallow schema for the model (dataclasses-json's ``schema``)."""
        mixin: Any = _mixin()
        return mixin.schema.__func__(cls, **kw)
