"""Grapheme-cluster boundaries, small and dependency-free (a subset of UAX #29).

A *grapheme cluster* is what a reader sees as one character: ``é`` written as ``e`` plus
a combining accent, ``👍🏽`` (emoji plus skin-tone modifier), ``👨‍👩‍👧`` (emoji joined
by ZERO WIDTH JOINERs), ``🇯🇵`` (a pair of regional indicators), ``1️⃣`` (a keycap:
digit, VARIATION SELECTOR-16, COMBINING ENCLOSING KEYCAP), ``🏴󠁧󠁢󠁳󠁣󠁴󠁿`` (a tag
sequence) or a Hangul syllable spelled with conjoining jamo. Cutting inside one leaves a
broken glyph, a stray modifier, or half a flag showing a different country.

The standard library has no grapheme segmentation and the SDK adds no dependency for
it, so `is_boundary()` implements the rules that matter for cutting text, using
only `unicodedata` categories and fixed code-point ranges:

- GB3/GB4/GB5: never between CR and LF; always after CR, LF and other controls
  (``Cc``, ``Zl``, ``Zp``) and before them.
- GB6-GB8: Hangul jamo sequences (L, V, T, LV, LVT) stay together.
- GB9/GB9a: never before an *extending* character: a combining mark (``Mn``, ``Me``,
  ``Mc``), ZERO WIDTH JOINER / NON-JOINER, a variation selector, an emoji modifier
  (U+1F3FB-U+1F3FF) or a tag character (U+E0020-U+E007F).
- GB11 (simplified): never right after a ZERO WIDTH JOINER, whatever follows.
- GB12/GB13: regional indicators pair up, two by two from the start of a run.
- Otherwise a boundary.

Deliberately left out (rare, and erring toward *fewer* boundaries is never unsafe for
cutting): Prepend characters (GB9b) and the Indic conjunct rule (GB9c).
"""

from __future__ import annotations

import unicodedata

__all__ = ["boundary_at_or_before", "grapheme_clusters", "is_boundary"]

_ZWJ = 0x200D
_CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
_MARK_CATEGORIES = frozenset({"Mn", "Me", "Mc"})


def _is_extend(cp: int) -> bool:
    """Never starts a cluster: it attaches to whatever precedes it (GB9, GB9a)."""
    if cp < 0x300:
        return False
    if cp in (0x200C, _ZWJ):
        return True
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:  # variation selectors
        return True
    if 0x1F3FB <= cp <= 0x1F3FF:  # emoji modifiers (skin tones)
        return True
    if 0xE0020 <= cp <= 0xE007F:  # tags (subdivision flags)
        return True
    return unicodedata.category(chr(cp)) in _MARK_CATEGORIES


def _is_control(cp: int) -> bool:
    if cp < 0x20 or 0x7F <= cp <= 0x9F:
        return True
    if cp < 0x2028:
        return False
    return unicodedata.category(chr(cp)) in _CONTROL_CATEGORIES


def _is_regional(cp: int) -> bool:
    return 0x1F1E6 <= cp <= 0x1F1FF


def _hangul(cp: int) -> str:
    """Hangul syllable type: L, V, T, LV, LVT or '' (none)."""
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return "L"
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return "V"
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return "T"
    if 0xAC00 <= cp <= 0xD7A3:
        return "LV" if (cp - 0xAC00) % 28 == 0 else "LVT"
    return ""


def is_boundary(text: str, index: int) -> bool:
    """True when ``text`` may be cut before ``text[index]`` without splitting a cluster.

    The start and the end of the text are boundaries.
    """
    if index <= 0 or index >= len(text):
        return True
    before = ord(text[index - 1])
    after = ord(text[index])
    if before < 0x300 and after < 0x300:  # fast path: Latin-1 and friends
        return not (before == 0x0D and after == 0x0A)
    if before == 0x0D and after == 0x0A:
        return False
    if _is_control(before) or _is_control(after):
        return True
    left, right = _hangul(before), _hangul(after)
    if left and right:
        if left == "L" and right in ("L", "V", "LV", "LVT"):
            return False
        if left in ("LV", "V") and right in ("V", "T"):
            return False
        if left in ("LVT", "T") and right == "T":
            return False
    if _is_extend(after):
        return False
    if before == _ZWJ:
        return False
    if _is_regional(before) and _is_regional(after):
        run = 0
        position = index - 1
        while position >= 0 and _is_regional(ord(text[position])):
            run += 1
            position -= 1
        return run % 2 == 0
    return True


def boundary_at_or_before(text: str, index: int) -> int:
    """The largest cluster boundary ``<= index`` (0 when the first cluster spans it)."""
    if index >= len(text):
        return len(text)
    while index > 0 and not is_boundary(text, index):
        index -= 1
    return max(index, 0)


def grapheme_clusters(text: str) -> list[str]:
    """``text`` split into grapheme clusters (joined they give ``text`` back)."""
    clusters: list[str] = []
    start = 0
    for index in range(1, len(text)):
        if is_boundary(text, index):
            clusters.append(text[start:index])
            start = index
    if text:
        clusters.append(text[start:])
    return clusters
