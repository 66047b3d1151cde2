"""Base class of every generated model: the wire rules the spec states once.

- Unknown fields are refused (`extra="forbid"`).
- An optional field is absent, never null: JSON input carrying `null` is refused with the field's
  name, and Python input with `None` is treated as absent. No schema in the spec admits null.
- Arrays the spec marks `uniqueItems` (listed per class in `__unique_items__`, at the end of
  models.py) refuse a repeated item.
- Fields are snake_case in Python and camelCase on the wire; either name validates, the wire name
  serialises.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator


class WireModel(BaseModel):
    """A JSON object of the Understudy wire protocol."""

    model_config = ConfigDict(
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )
    __unique_items__: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _absent_not_null(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        nulls = [key for key, value in data.items() if value is None]
        if not nulls:
            return data
        if info.mode == "json":
            raise ValueError(f"omit optional fields instead of sending null: {', '.join(nulls)}")
        return {key: value for key, value in data.items() if value is not None}

    @model_validator(mode="after")
    def _unique_items(self) -> Self:
        for name in self.__unique_items__:
            items = getattr(self, name)
            if items is not None and len(set(items)) != len(items):
                wire = type(self).model_fields[name].alias or name
                raise ValueError(f"{wire}: list each item once (uniqueItems)")
        return self

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict: wire names, optional fields absent when unset."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_wire_json(self) -> str:
        """The compact JSON text of `to_wire()`."""
        return self.model_dump_json(by_alias=True, exclude_none=True)
