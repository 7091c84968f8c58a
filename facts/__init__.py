"""Custom pyinfra facts for GPU LLM hosts. Parsers are plain functions for unit tests."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pyinfra.api import FactBase

T = TypeVar("T")


class ListFact(FactBase[list[T]], Generic[T]):
    """A fact whose command prints nothing where there is nothing: then an empty list."""

    @staticmethod
    def default() -> list[Any]:
        return []


class DictFact(FactBase[dict[str, T]], Generic[T]):
    """A fact whose command prints nothing where there is nothing: then an empty dict."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}
