"""A small PEP 440 version parser and ordering (no dependency on `packaging`).

The spec orders version directories by PEP 440 (section 4.2: "strictly
older versions (PEP 440 order; version names that do not parse are
skipped)"), and the data releases are ordered the same way. This module
implements the public-version grammar of PEP 440 with its normalisation
rules (case, separators, implicit numbers, alternative spellings) and the
comparison order of `packaging.version.Version`:

    epoch, release (trailing zeros ignored), pre-release, post-release,
    dev-release, local label

with the special cases that a bare dev release sorts before every
pre-release of the same release (``1.0.dev0 < 1.0a0``) and that a missing
local label sorts before any local label.
"""

from __future__ import annotations

import re
from functools import total_ordering
from typing import Iterable, Optional, Tuple

__all__ = ["Version", "parse", "sort_versions", "is_valid"]

# The regular expression of PEP 440 appendix B (also what `packaging` uses).
_VERSION_PATTERN = r"""
    v?
    (?:
        (?:(?P<epoch>[0-9]+)!)?                           # epoch
        (?P<release>[0-9]+(?:\.[0-9]+)*)                  # release segment
        (?P<pre>                                          # pre-release
            [-_\.]?
            (?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)
            [-_\.]?
            (?P<pre_n>[0-9]+)?
        )?
        (?P<post>                                         # post release
            (?:-(?P<post_n1>[0-9]+))
            |
            (?:
                [-_\.]?
                (?P<post_l>post|rev|r)
                [-_\.]?
                (?P<post_n2>[0-9]+)?
            )
        )?
        (?P<dev>                                          # dev release
            [-_\.]?
            (?P<dev_l>dev)
            [-_\.]?
            (?P<dev_n>[0-9]+)?
        )?
    )
    (?:\+(?P<local>[a-z0-9]+(?:[-_\.][a-z0-9]+)*))?       # local version
"""

_REGEX = re.compile(r"^\s*" + _VERSION_PATTERN + r"\s*$", re.VERBOSE | re.IGNORECASE)

_PRE_LETTERS = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "pre": "rc", "preview": "rc", "rc": "rc"}

# Sentinels for the comparison key: every key component is a tuple whose
# first element places it below (0) or above (2) any real value (1, ...).
_NEG_INF = (0,)
_POS_INF = (2,)


@total_ordering
class Version:
    """A parsed PEP 440 version; instances compare in PEP 440 order."""

    __slots__ = ("text", "epoch", "release", "pre", "post", "dev", "local", "_key")

    def __init__(self, text: str):
        match = _REGEX.match(text)
        if match is None:
            raise ValueError(f"invalid PEP 440 version: {text!r}")
        self.text = text
        self.epoch = int(match.group("epoch") or 0)
        self.release = tuple(int(part) for part in match.group("release").split("."))
        self.pre: Optional[Tuple[str, int]] = None
        if match.group("pre_l"):
            self.pre = (_PRE_LETTERS[match.group("pre_l").lower()], int(match.group("pre_n") or 0))
        self.post: Optional[int] = None
        if match.group("post_n1") is not None:
            self.post = int(match.group("post_n1"))
        elif match.group("post_l"):
            self.post = int(match.group("post_n2") or 0)
        self.dev: Optional[int] = None
        if match.group("dev_l"):
            self.dev = int(match.group("dev_n") or 0)
        self.local: Optional[Tuple[object, ...]] = None
        if match.group("local"):
            self.local = tuple(
                int(part) if part.isdigit() else part.lower() for part in re.split(r"[-_\.]", match.group("local"))
            )
        self._key = self._make_key()

    def _make_key(self) -> tuple:
        release = list(self.release)
        while len(release) > 1 and release[-1] == 0:  # 1.0.0 == 1.0 == 1
            release.pop()
        if self.pre is None and self.post is None and self.dev is not None:
            pre = _NEG_INF  # 1.0.dev0 sorts before 1.0a0
        elif self.pre is None:
            pre = _POS_INF  # a final release sorts after its pre-releases
        else:
            pre = (1, self.pre[0], self.pre[1])  # 'a' < 'b' < 'rc' as strings
        post = _NEG_INF if self.post is None else (1, self.post)
        dev = _POS_INF if self.dev is None else (1, self.dev)
        if self.local is None:
            local: tuple = _NEG_INF
        else:
            # Numeric segments sort above alphanumeric ones; alphanumerics
            # compare as strings.
            local = (1,) + tuple((1, part, "") if isinstance(part, int) else (0, 0, part) for part in self.local)
        return (self.epoch, tuple(release), pre, post, dev, local)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key == other._key

    def __lt__(self, other: "Version") -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key < other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    def __str__(self) -> str:
        return self.text


def parse(text: str) -> Optional[Version]:
    """The version, or None when `text` is not a PEP 440 version."""
    try:
        return Version(text)
    except ValueError:
        return None


def is_valid(text: str) -> bool:
    return parse(text) is not None


def sort_versions(names: Iterable[str]) -> list:
    """Names in ascending PEP 440 order; names that do not parse go last, by name.

    Ties between spellings of one version (``1.0`` and ``1.0.0``) keep name order,
    so the result is deterministic.
    """
    parsed = []
    invalid = []
    for name in names:
        version = parse(name)
        if version is None:
            invalid.append(name)
        else:
            parsed.append((version, name))
    parsed.sort(key=lambda pair: (pair[0]._key, pair[1]))
    return [name for _, name in parsed] + sorted(invalid)
