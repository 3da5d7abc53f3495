"""Suite versions and tags as an evaluation team keeps them: the version a scenario came in is the tag
``version:<name>`` (the generator and the import write it), and a team adds tags of its own (``autorater suite tag``).

Example:
    >>> version_tag("v2")
    'version:v2'
    >>> scenario_version(["GoToLocal", "version:v2"], default="v3")
    'v2'
    >>> sorted(["v10", "v2", "v1"], key=version_key)
    ['v1', 'v2', 'v10']
"""

from __future__ import annotations

import re
from typing import Iterable

VERSION_PREFIX = "version:"
MAX_TAG_LENGTH = 200
_BAD_TAG = re.compile(r"[\x00-\x1f\x7f,]")


def version_tag(version: str) -> str:
    """The tag that says a scenario came in ``version``."""
    return VERSION_PREFIX + check_tag(version, what="version")


def scenario_version(tags: Iterable[str], default: str | None = None) -> str | None:
    """The version a scenario came in: its first ``version:`` tag, else ``default``."""
    for tag in tags:
        if isinstance(tag, str) and tag.startswith(VERSION_PREFIX) and len(tag) > len(VERSION_PREFIX):
            return tag[len(VERSION_PREFIX):]
    return default


def with_version_tag(tags: Iterable[str], version: str) -> list[str]:
    """``tags`` with ``version:<version>`` appended unless a version tag is already there (that one is kept)."""
    tags = list(tags)
    return tags if scenario_version(tags) is not None else tags + [version_tag(version)]


def version_key(version: str) -> tuple:
    """A sort key that orders versions as people number them: v1 < v2 < v10 < v10b."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.findall(r"\d+|\D+", version))


def next_version(versions: Iterable[str]) -> str:
    """The version after the highest of ``versions`` whose name ends in a number (``v2`` -> ``v3``); ``v1`` if none."""
    numbered = [(version_key(v), v) for v in versions if re.search(r"\d+$", v)]
    if not numbered:
        return "v1"
    last = max(numbered)[1]
    digits = re.search(r"\d+$", last).group(0)
    return last[:-len(digits)] + str(int(digits) + 1)


def check_tag(tag: str, what: str = "tag") -> str:
    """``tag`` if it is a usable tag (a non-empty string, no comma, no control character, no outer spaces, at most
    ``MAX_TAG_LENGTH`` characters); a ValueError that says what to fix otherwise."""
    if not isinstance(tag, str) or not tag.strip():
        raise ValueError(f"the {what} is empty (fix: pass a name such as hard-cases or version:v2)")
    if tag != tag.strip():
        raise ValueError(f"the {what} {tag!r} starts or ends with a space (fix: pass {tag.strip()!r})")
    if _BAD_TAG.search(tag):
        raise ValueError(f"the {what} {tag!r} holds a comma or a control character (fix: one name per tag; tables "
                         f"list tags separated by commas)")
    if len(tag) > MAX_TAG_LENGTH:
        raise ValueError(f"the {what} is {len(tag)} characters long (fix: at most {MAX_TAG_LENGTH})")
    return tag


__all__ = ["MAX_TAG_LENGTH", "VERSION_PREFIX", "check_tag", "next_version", "scenario_version", "version_key",
           "version_tag", "with_version_tag"]
