"""One normalisation of free text, for matching forgotten content on every surface and store.

A forgotten detail is kept only as keyed hashes of its *normalised* form
(:mod:`memgate.retriever.records.suppression`), so every write path, every store and every surface must
normalise the same way: they all call this module. Each normalisation has a version; a hash
records the version it was made under, and a text is checked under every version present,
because a hash cannot be recomputed under a new version (the content is gone).

**Version 2** (the current one), applied in this order:

1. Unicode NFKC (full-width forms, ligatures, mathematical letters, superscripts, ``Ⅸ`` ...);
2. default-ignorable code points removed (zero-width space and joiners, soft hyphen, word
   joiner, bidi controls, variation selectors, tag characters, Hangul fillers: the
   ``Default_Ignorable_Code_Point`` property, Unicode 17.0);
3. NFD, then every combining mark removed (``é`` = ``e``; in scripts written with vowel signs,
   words that differ only in them become one);
4. each character mapped: a decimal digit of any script to its ASCII digit (Arabic-Indic
   ``٤٤١٧`` = ``4417``); ASCII kept; anything else to its confusable prototype (Unicode TR39,
   the vendored ``confusables.txt`` 17.0.0) when that is ASCII, else to that of its lowercase
   or uppercase form when that is (Cyrillic ``к`` -> ``К`` -> ``K``: its own prototype is the
   Latin kra ``ĸ``); TR39 gives capital I and small l the one prototype ``l``, so an uppercase
   character with that prototype becomes ``I`` (Cyrillic ``І``); a character without an ASCII
   prototype stays;
5. case folding, then NFD and marks removed again;
6. tokens: runs of letters; runs of digits; every East-Asian wide letter (Han, kana, Hangul) on
   its own. Everything else (spaces, punctuation, underscores, symbols) separates.

Letters glued to digits split (``X4417`` -> ``x 4417``). Matching (the suppression module)
compares the tokens' characters with the separators removed, aligned on token boundaries, so
spacing and punctuation inside a word or a number do not matter either (``44-17`` = ``4417``),
while a longer number is another number (``14417`` does not hold ``4417``).

Not caught, by design: paraphrase, translation, spelled-out numbers (``four four one seven``),
ASCII look-alikes within ASCII (``0``/``O``, ``1``/``l``, ``rn``/``m``), characters whose
confusable prototype is not ASCII, and content split across fields or writes. Steps 1, 3 and 5
use the running Python's Unicode database: characters assigned after its version may normalise
differently under another Python.

**Version 1** (stores written before version 2): NFKC, case folding, ``\\w+`` tokens. It is kept
as it was (its hashes are in existing stores); :func:`v1_views` also gives the version-1 tokens
of the text after version 2's character folding, so those entries also catch the rewrites of
version 2 when the forgotten content was plain ASCII.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache
from importlib import resources

CURRENT_NORMALISATION = 2
NORMALISATION_VERSIONS = (1, 2)

CONFUSABLES_VERSION = "17.0.0"
CONFUSABLES_SHA256 = "091c7f82fc39ef208faf8f94d29c244de99254675e09de163160c810d13ef22a"
CONFUSABLES_FILE = "unicode_data/confusables.txt"

# Default_Ignorable_Code_Point, DerivedCoreProperties.txt of Unicode 17.0.0 (inclusive ranges).
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
_IGNORABLE = re.compile("[" + "".join(
    re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
    for a, b in DEFAULT_IGNORABLE) + "]")
_V1_TOKEN = re.compile(r"\w+")
_DIGITS = frozenset("0123456789")


class NormalisationDataError(RuntimeError):
    """The vendored Unicode data is missing or differs from the recorded checksum."""


@lru_cache(maxsize=1)
def confusable_prototypes() -> dict[str, str]:
    """Character -> its TR39 prototype (NFD), from the vendored ``confusables.txt`` (checked
    against :data:`CONFUSABLES_SHA256` first)."""
    source = resources.files("memgate.contract").joinpath(CONFUSABLES_FILE)
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise NormalisationDataError(f"memgate/contract/{CONFUSABLES_FILE}: cannot read it ({exc})") from None
    if hashlib.sha256(raw).hexdigest() != CONFUSABLES_SHA256:
        raise NormalisationDataError(
            f"memgate/contract/{CONFUSABLES_FILE}: sha256 differs from {CONFUSABLES_SHA256} "
            "(unicode_data/SOURCE.md); a changed table is a new normalisation version")
    table: dict[str, str] = {}
    for line in raw.decode("utf-8-sig").splitlines():
        data = line.split("#", 1)[0].strip()
        if not data:
            continue
        source_cp, target, _ = (part.strip() for part in data.split(";"))
        table[chr(int(source_cp, 16))] = "".join(chr(int(cp, 16)) for cp in target.split())
    return table


def _strip_marks(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.category(c).startswith("M"))


def _digit(c: str):
    value = unicodedata.decimal(c, None)
    if value is None:
        value = unicodedata.digit(c, None)
    return None if value is None else str(value)


def _map_char(c: str, table: dict[str, str]) -> str:
    if c.isascii():
        return c
    digit = _digit(c)
    if digit is not None:
        return digit
    own = table.get(c, c)
    if own.isascii():
        # TR39 gives capital I and small l one prototype, "l": an uppercase look-alike is an I
        return "I" if own == "l" and c.isupper() else own
    for variant in (c.lower(), c.upper()):
        if len(variant) == 1 and variant != c:
            proto = table.get(variant, variant)
            if proto.isascii():
                return proto
    return own


def fold(text: str) -> str:
    """Version 2's character folding (steps 1-5 of the module doc); separators are kept."""
    table = confusable_prototypes()
    text = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
    text = "".join(_map_char(c, table) for c in _strip_marks(text))
    return _strip_marks(text.casefold())


def _wide(c: str) -> bool:
    return unicodedata.east_asian_width(c) in ("W", "F")


def tokens_v2(text: str) -> list[str]:
    """Version 2's tokens: letter runs, digit runs, single wide letters."""
    out: list[str] = []
    run: list[str] = []
    kind = ""  # of the run: "d" digits, "a" letters
    for c in fold(text):
        if c.isalnum() and c not in _DIGITS and _wide(c):
            if run:
                out.append("".join(run))
                run = []
            out.append(c)
            continue
        this = "d" if c in _DIGITS else "a" if c.isalnum() else ""
        if run and this != kind:
            out.append("".join(run))
            run = []
        if this:
            run.append(c)
            kind = this
    if run:
        out.append("".join(run))
    return out


def tokens_v1(text: str) -> list[str]:
    """Version 1's tokens: NFKC, case-folded ``\\w+`` runs (unchanged since stores hold them)."""
    return _V1_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def normal_tokens(text: str, version: int = CURRENT_NORMALISATION) -> list[str]:
    """The tokens of ``text`` under normalisation ``version``."""
    if version == 2:
        return tokens_v2(text)
    if version == 1:
        return tokens_v1(text)
    raise ValueError(f"normalisation version must be one of {NORMALISATION_VERSIONS}, got {version!r}")


def v1_views(text: str) -> list[list[str]]:
    """The token sequences a text is checked under for version-1 entries: its version-1 tokens,
    and those of its version-2 folding with separators, underscores and letter/digit boundaries
    as spaces (digit runs kept whole, as version 1 tokenised them)."""
    raw = tokens_v1(text)
    runs: list[str] = []
    for c in fold(text):
        kind = "d" if c in _DIGITS else "a" if c.isalnum() else ""
        if kind and runs and runs[-1][0] == kind:
            runs[-1] += c
        elif kind:
            runs.append(kind + c)
        elif runs and runs[-1] != " ":
            runs.append(" ")
    spaced = tokens_v1(" ".join(r[1:] for r in runs if r != " "))
    return [raw] if spaced == raw else [raw, spaced]


__all__ = ["CONFUSABLES_SHA256", "CONFUSABLES_VERSION", "CURRENT_NORMALISATION", "DEFAULT_IGNORABLE",
           "NORMALISATION_VERSIONS", "NormalisationDataError", "confusable_prototypes", "fold",
           "normal_tokens", "tokens_v1", "tokens_v2", "v1_views"]
