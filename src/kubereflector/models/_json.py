"""The type of a free-form JSON value in the models. Private to :mod:`kubereflector.models`."""

from __future__ import annotations

from typing import TYPE_CHECKING, ForwardRef, TypeAlias

__all__ = ["JSONValue"]

if TYPE_CHECKING:
    JSONValue: TypeAlias = (
        bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
    )
    """Any JSON value, as msgspec and ``json`` decode it (``dict`` and ``list``, never tuples).

    The models use it where the OpenAPI schema leaves a value free-form: ``RawExtension``,
    ``FieldsV1``, apiextensions' ``JSON`` (a CRD's ``default``, ``enum`` and ``example``).
    Narrow it with ``isinstance`` before reading into it."""
else:  # the same, its references resolvable by typing.get_type_hints from any module
    _JSON_VALUE = ForwardRef("JSONValue", module=__name__)
    JSONValue = bool | int | float | str | list[_JSON_VALUE] | dict[str, _JSON_VALUE] | None
