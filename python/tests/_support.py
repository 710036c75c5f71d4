"""Helpers the spec tests share."""

from __future__ import annotations

import pytest


def require(condition: bool, what: str):
    """Missing data or goldens fail the tests (the test command fetches the
    data and CI has the goldens); a skip would pass with the feature absent."""

    def mark(test):
        if condition:
            return test

        def missing(*_args, **_kwargs):
            pytest.fail(what)

        missing.__name__ = test.__name__
        return missing

    return mark


def have_data(open_tree) -> bool:
    """Whether the data cache mounts (`open_tree` raises ValueError if not)."""
    try:
        open_tree()
        return True
    except ValueError:
        return False
