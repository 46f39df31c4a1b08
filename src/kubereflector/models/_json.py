"""The type of a free-form JSON value in the models. Private to :mod:`kubereflector.models`."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONValue"]

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
"""Any JSON value, as msgspec and ``json`` decode it (``dict`` and ``list``, never a tuple).

The models use it where the OpenAPI schema leaves a value free-form: ``RawExtension``,
``FieldsV1``, apiextensions' ``JSON`` (a CRD's ``default``, ``enum`` and ``example``).
Narrow it with ``isinstance`` before reading into it."""
