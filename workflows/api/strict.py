"""Request bodies that refuse what they do not declare.

A misspelt field (``feedbak``) silently ignored would let a client believe it was
heard; here it is a 400 ``validation_error`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from workflows.api.ids import uuid_id


class StrictSerializer(serializers.Serializer):
    """A request body whose unknown fields are a validation error, one per field."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["this field is not accepted here"] for name in unknown}
                )
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A JSON string as sent: DRF's ``CharField`` turns ``1`` into ``"1"``, which would
    let a number select the option whose value is that string. Whitespace is kept."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictUUIDField(serializers.UUIDField):
    """A run id as the API hands it out, hyphenated: DRF's ``UUIDField`` also reads
    braces, ``urn:uuid:`` and bare hex, so one run would have many spellings
    (:mod:`workflows.api.ids`)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str) or uuid_id(data) is None:
            self.fail("invalid", value=data)
        return super().to_internal_value(data)
