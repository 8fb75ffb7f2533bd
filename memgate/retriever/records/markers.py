"""Markers derived at forget time: the secret-shaped parts of a text being forgotten, so that
forgetting "Alice's passport number is X99812345" also refuses a later "X99812345" on its own.

:func:`derived_markers` reads the text (and its decoded / displayed readings,
:mod:`memgate.contract.text_views`) *before* it is erased; the markers become suppression
entries of kind ``marker`` (keyed hashes, like a caller's markers: never stored as text) and
are matched inside any later field (:mod:`memgate.retriever.records.suppression`). What counts
as secret-shaped, after the normalisation of :mod:`memgate.contract.text_normal`:

- an identifier that mixes letters and digits, at least :data:`MIN_IDENTIFIER` characters
  (``X99812345``, ``AB12CD``; hyphens and underscores inside it allowed); the number inside it
  is part of it, not a marker of its own (forgetting ``X99812345`` refuses ``x-99812345``, not
  ``99812345`` alone, as for a caller's marker);
- a run of at least :data:`MIN_DIGITS` digits (digit groups joined by spaces, dots, hyphens or
  underscores count as one run, as matching reads them: ``33 90`` is ``3390``), except a year
  1900-2099 (so forgetting "In 2024 I moved" does not refuse every later "2024"; a PIN that reads
  as a year is a documented miss) and a date (``2024-06-01``);
- an e-mail address;
- a phone or card number: digit groups joined by spaces, dots, hyphens or parentheses, 7 to 19
  digits in all, not shaped like a date (``2024-06-01``, ``01/06/2024``).

Forget directives written before markers were derived keep what they had: entries of the text
(and the caller's markers) only; the text is gone, so nothing can be derived from it later.
"""

from __future__ import annotations

import re

from memgate.contract.text_normal import fold
from memgate.contract.text_views import matching_views

MIN_IDENTIFIER = 6
MIN_DIGITS = 4
YEARS = range(1900, 2100)
PHONE_DIGITS = (7, 19)
_IDENTIFIER = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"\+?\(?\d+\)?(?:[ .\-]?\(?\d+\)?)+")
_RUN = re.compile(r"\d+(?:[ .\-_]+\d+)*")
_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}")


def _identifiers(folded: str) -> list[re.Match[str]]:
    out = []
    for match in _IDENTIFIER.finditer(folded):
        chars = match.group(0).replace("-", "").replace("_", "")
        if (len(chars) >= MIN_IDENTIFIER and any(c.isdigit() for c in chars)
                and any(c.isalpha() for c in chars)):
            out.append(match)
    return out


def _masked(text: str, matches: list[re.Match[str]]) -> str:
    """``text`` with the matched spans blanked (their digits belong to them, not to a number)."""
    for m in matches:
        text = text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():]
    return text


def _digit_runs(folded: str) -> list[str]:
    """Digit groups joined by spaces, dots, hyphens or underscores, as one number (matching
    ignores those separators: ``33 90`` is ``3390``), when 4+ digits, not a year, not a date."""
    out = []
    for match in _RUN.finditer(folded):
        digits = re.sub(r"\D", "", match.group(0))
        if len(digits) >= MIN_DIGITS and not (len(digits) == 4 and int(digits) in YEARS) \
                and not _DATE.fullmatch(match.group(0)):
            out.append(digits)
    return out


def _phones(folded: str) -> list[str]:
    out = []
    for match in _PHONE.finditer(folded):
        shape = match.group(0).strip(" .-")
        digits = re.sub(r"\D", "", shape)
        if PHONE_DIGITS[0] <= len(digits) <= PHONE_DIGITS[1] and not _DATE.fullmatch(shape) \
                and re.search(r"\d[ .\-()]+\d", shape):
            out.append(digits)
    return out


def derived_markers(text: str | None) -> list[str]:
    """The secret-shaped parts of ``text`` (module doc), each once, in order of appearance."""
    if not text:
        return []
    found: list[str] = []
    for view in matching_views(text):
        folded = fold(view)
        emails = list(_EMAIL.finditer(folded))
        idents = _identifiers(_masked(folded, emails))
        rest = _masked(folded, emails + idents)  # a number inside an address or identifier is theirs
        found += [m.group(0) for m in emails + idents] + _phones(rest) + _digit_runs(rest)
    return list(dict.fromkeys(m.strip(".") for m in found if m.strip(".")))


__all__ = ["MIN_DIGITS", "MIN_IDENTIFIER", "PHONE_DIGITS", "YEARS", "derived_markers"]
