# The decorator of the per-request records (requests and replies): a
# slotted dataclass that type checkers treat as frozen. At run time it is
# not frozen, because a frozen dataclass sets each field through
# object.__setattr__ and costs three times as much to build, and one request
# builds several records (docs/performance.md). Nothing assigns to a record
# after construction; mypy enforces it.
from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def record(cls: type[T]) -> type[T]:
    return dataclass(slots=True)(cls)
