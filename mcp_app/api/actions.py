"""DRF's ``@action`` decorator, typed: a method it marks keeps its signature for mypy.

DRF has no types, so to mypy its ``action`` is ``Any`` and every view method it decorates
would lose its annotations (``disallow_untyped_decorators``). This hands back DRF's own
decorator unchanged, under a type that says it returns the method it was given (as it does:
it sets attributes on the method and returns it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rest_framework import decorators

F = TypeVar("F", bound=Callable[..., Any])


def action(**kwargs: Any) -> Callable[[F], F]:
    """``rest_framework.decorators.action(**kwargs)``."""
    decorator: Callable[[F], F] = decorators.action(**kwargs)
    return decorator
