"""How a catalog document is written as YAML: the dumper's options, and the writer.

``dump`` is PyYAML (with libyaml's emitter when it is there) as every catalog text has been
written. ``Writer`` writes a document to the same bytes, whole (``document_text``, which
``catalog_io.catalog_dump`` uses) or a piece at a time as the export streams it, without
building PyYAML's node tree, which was most of a large dump's time and memory
(docs/performance.md): the structure (block mappings and sequences, ``[]`` and ``{}`` for
empty ones) is written directly, and so is each one-line string of printable characters
(folded at the width as libyaml folds it), null, booleans and integers. Every other value (a
multi-line string, one libyaml escapes, a float) is written by PyYAML itself, dumped
alone in a small document that puts it at the same column and indentation, so nothing here
guesses how libyaml escapes or indents a block. Anything else (a key that is not a short
printable-ASCII string, a value of another type) makes the whole entry, or the whole
top-level item, PyYAML's.

Only the rules a one-line printable string follows are restated here (when libyaml
writes it plain, and single-quoted otherwise, and where it folds it), and where libyaml
ends a document (``Writer``); ``tests/services/test_catalog_yaml.py`` holds them to PyYAML's
output over generated values and documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import yaml

WIDTH = 100  # columns: a longer plain or quoted string is folded
INDENT = 2

# libyaml's emitter when PyYAML has it: the same text as the pure-Python one, several times
# faster. Typed as the pure-Python class: both are a SafeRepresenter with a Resolver.
if TYPE_CHECKING:
    _SafeDumper = yaml.SafeDumper
else:
    _SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class CatalogDumper(_SafeDumper):
    """Writes multi-line strings (templates, instructions) as literal blocks, and a value at
    each place it appears, never as an alias: the file reads the same to any reader."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and value == value.strip(" ") and "\r" not in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


CatalogDumper.add_representer(str, _str_presenter)


def dump(value: Any) -> str:
    """``value`` as YAML text, as every catalog document is written."""
    return yaml.dump(value, Dumper=CatalogDumper, sort_keys=False, allow_unicode=True, width=WIDTH)


class _Unwritten(Exception):
    """The value holds something only PyYAML writes: the whole item or entry is dumped by it."""


# How libyaml ends a document whose last block scalar kept its trailing line breaks ("|+"):
# nothing else in the document writes this at its end.
_OPEN_END = "...\n"
# YAML 1.1's line breaks: libyaml writes the "..." at the start of a line, after any of them
# (a block scalar may end in a line or paragraph separator).
_LINE_BREAKS = frozenset("\n\r\x85\u2028\u2029")


def _ends_open(text: str) -> bool:
    """Whether ``text``, a document libyaml wrote, ends with the "..." of an open end."""
    return (
        text.endswith(_OPEN_END)
        and len(text) > len(_OPEN_END)
        and text[-len(_OPEN_END) - 1] in _LINE_BREAKS
    )


# A block scalar that keeps its breaks: written before a value, it tells whether the value
# writes a block scalar of its own (which ends the document's open end) or none.
_KEPT_BREAKS = "x\n\n"
_NONE = object()


class Writer:
    """A catalog document's YAML, written a piece at a time: ``dump(document)`` to the byte
    once the pieces are joined. Each top-level key with its value (``item``), or with a list
    written an entry at a time as the entries come (``section``), then ``end``.

    Each piece is context-free but for one thing, which the writer carries: libyaml ends the
    document with "..." when the last block scalar written in it kept its trailing breaks
    ("|+"), however much else follows. A piece dumped alone would carry that "..." in the
    middle of the document, ending it there.
    """

    def __init__(self) -> None:
        self._open_ended = False

    def item(self, key: Any, value: Any) -> str:
        """``key`` and its ``value``, as a top-level mapping writes them."""
        open_ended = self._open_ended
        try:
            parts = [_key(key), ":"]
            self._value(parts, value, indent=0, column=len(parts[0]) + 1, in_mapping=True)
        except _Unwritten:
            self._open_ended = open_ended
            return self._pyyaml({key: value})
        parts.append("\n")
        return "".join(parts)

    def section(self, key: Any, entries: Iterable[Any]) -> Iterator[str]:
        """``key`` and the list of its ``entries``, as a top-level mapping writes them: the
        key's line once the first entry is read, then each entry as it is read (a block
        sequence under a top-level key is written at column 0, as a top-level one is);
        ``key: []`` if there is none."""
        entries = iter(entries)
        first = next(entries, _NONE)
        if first is _NONE:
            yield self.item(key, [])
            return
        try:
            opening = _key(key) + ":\n"
        except _Unwritten:  # a key PyYAML writes otherwise: the whole list is its
            yield self.item(key, [first, *entries])
            return
        yield opening
        yield self.entry(first)
        for entry in entries:
            yield self.entry(entry)

    def entry(self, entry: Any) -> str:
        """One entry of a section: ``dump([entry])`` (a one-item block sequence), without
        the document's end."""
        open_ended = self._open_ended
        parts: list[str] = ["-"]
        try:
            self._value(parts, entry, indent=0, column=1, in_mapping=False)
        except _Unwritten:
            self._open_ended = open_ended
            return self._pyyaml([entry])
        parts.append("\n")
        return "".join(parts)

    def end(self) -> str:
        """What follows the last piece: "..." after a block scalar that kept its breaks."""
        return _OPEN_END if self._open_ended else ""

    def _pyyaml(self, value: Any) -> str:
        """``value`` (a one-key mapping or a one-item list) dumped by PyYAML, its end cut
        off and remembered."""
        text = dump(value)
        if _ends_open(text):
            self._open_ended = True
            return text[: -len(_OPEN_END)]
        if self._open_ended and not _ends_open(dump([_KEPT_BREAKS, value])):
            self._open_ended = False  # it wrote a block scalar of its own: the end is closed
        return text

    def _mapping(
        self, parts: list[str], value: dict[Any, Any], *, indent: int, inline: bool
    ) -> None:
        """A non-empty block mapping whose keys sit at column ``indent``; ``inline``: its
        first key follows a sequence's "-" on the same line."""
        margin = "\n" + " " * indent
        for key, item in value.items():
            text = _key(key)
            parts.append(" " if inline else margin)
            inline = False
            parts.append(text)
            parts.append(":")
            self._value(parts, item, indent=indent, column=indent + len(text) + 1, in_mapping=True)

    def _sequence(self, parts: list[str], value: list[Any], *, indent: int, inline: bool) -> None:
        """A non-empty block sequence whose "-" sit at column ``indent``."""
        margin = "\n" + " " * indent
        for item in value:
            parts.append(" " if inline else margin)
            inline = False
            parts.append("-")
            self._value(parts, item, indent=indent, column=indent + 1, in_mapping=False)

    def _value(
        self, parts: list[str], value: Any, *, indent: int, column: int, in_mapping: bool
    ) -> None:
        """``value`` after a key's ":" (``in_mapping``) or a sequence's "-", which ends at
        ``column``; ``indent``: that mapping's or sequence's column."""
        kind = type(value)
        if kind is dict or kind is list:
            if not value:
                parts.append(" {}" if kind is dict else " []")
            elif kind is dict:
                # Under a key: on the next lines, indented. After "-": on the same line.
                self._mapping(parts, value, indent=indent + INDENT, inline=not in_mapping)
            elif in_mapping:
                self._sequence(parts, value, indent=indent, inline=False)  # not indented
            else:
                self._sequence(parts, value, indent=indent + INDENT, inline=True)
            return
        if value is None:
            parts.append(" null")
        elif kind is bool:
            parts.append(" true" if value else " false")
        elif kind is int:
            parts.append(" " + str(value))
        elif kind is str:
            text = _line(value)
            if text is None:
                parts.append(
                    self._placed(value, indent=indent, column=column, in_mapping=in_mapping)
                )
            elif column + 1 + len(text) <= WIDTH:  # ends within the width: nothing to fold
                parts.append(" " + text)
            else:
                parts.append(_folded(value, quoted=text != value, indent=indent, column=column))
        elif kind is float:
            parts.append(self._placed(value, indent=indent, column=column, in_mapping=in_mapping))
        else:
            raise _Unwritten

    def _placed(self, value: Any, *, indent: int, column: int, in_mapping: bool) -> str:
        """``value`` as PyYAML writes it where it stands: dumped in a document that puts it
        at the same column with the same indentation (under a key of the same length, or
        after a "-" at the same column), and cut out of it."""
        if indent % INDENT:
            raise _Unwritten
        probe: Any
        if in_mapping:
            probe = {"k" * (column - indent - 1): value}
            prefix = " " * indent + "k" * (column - indent - 1) + ":"
        else:
            probe = {"k": [value]}
            prefix = " " * indent + "k:\n" + " " * indent + "-"
        for depth in range(indent // INDENT - 1, -1, -1):
            probe = {"k": probe}
            prefix = " " * (depth * INDENT) + "k:\n" + prefix
        text = dump(probe)
        if not text.startswith(prefix):
            raise _Unwritten
        open_end = _ends_open(text)
        if open_end:
            text = text[: -len(_OPEN_END)]
        # What follows the value starts a line after its "\n"; a block that ends in another
        # line break (a line separator) is followed by nothing: the entry is PyYAML's.
        if not text.endswith("\n"):
            raise _Unwritten
        # The value is the probe's one scalar that is not a key "k...": a block scalar
        # ("|" or ">" first) sets the document's end, "..." if it kept its breaks.
        if open_end:
            self._open_ended = True
        elif text.startswith((" |", " >"), len(prefix)):
            self._open_ended = False
        return text[len(prefix) : -1]


def document_text(document: Any) -> str:
    """``dump(document)``: a catalog document (a mapping) written by ``Writer``, a list under
    a top-level key an entry at a time."""
    if type(document) is not dict or not document:
        return dump(document)
    writer = Writer()
    parts: list[str] = []
    for key, value in document.items():
        if type(value) is list:
            parts.extend(writer.section(key, value))
        else:
            parts.append(writer.item(key, value))
    parts.append(writer.end())
    return "".join(parts)


def entry_text(entry: Any) -> str:
    """``dump([entry])``: one entry of a section as a document of its own."""
    writer = Writer()
    return writer.entry(entry) + writer.end()


# Keys written lately: an export's entries repeat a few dozen. At most so many, so what an
# export holds stays bounded whatever its keys.
_KEYS: dict[str, str] = {}
_KEYS_KEPT = 512


def _key(key: Any) -> str:
    # ASCII only: a simple key's limit counts its UTF-8 bytes.
    if type(key) is not str or not key.isascii():
        raise _Unwritten
    if (text := _KEYS.get(key)) is not None:
        return text
    # A simple key is never folded; past 128 characters it is not simple any more.
    text = _line(key) if len(key) <= WIDTH else None
    if text is None:
        raise _Unwritten
    if len(_KEYS) >= _KEYS_KEPT:
        _KEYS.clear()
    _KEYS[key] = text
    return text


# What libyaml writes as it is, on one line: printable ASCII, and the printable characters of
# the Basic Multilingual Plane (not a byte-order mark, nor the line and paragraph separators,
# which break lines). No tab, no control character, nothing beyond U+FFFF: those it escapes.
_PRINTABLE_LINE = re.compile("[ -~\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*\\Z")
# A first character that is an indicator wherever it stands.
_NEVER_PLAIN_FIRST = frozenset("#,[]{}&*!|>'\"%@`")
# First characters some implicit resolver (bool, int, float, null, ...) may claim.
_RESOLVED_FIRST = frozenset(CatalogDumper.yaml_implicit_resolvers)
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


def _line(text: str) -> str | None:
    """A one-line printable string as libyaml writes it in a block when nothing folds it
    (plain, or single-quoted where plain would read as something else); None for any other
    string."""
    if not _PRINTABLE_LINE.match(text):
        return None
    if _plain(text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _plain(text: str) -> bool:
    if not text or text[0] == " " or text[-1] == " ":
        return False
    first = text[0]
    if first in _NEVER_PLAIN_FIRST:
        return False
    # "-", "?" and ":" start an indicator when a space (or the end) follows.
    if first in "-?:" and (len(text) == 1 or text[1] == " "):
        return False
    if ": " in text or text[-1] == ":" or " #" in text or text.startswith(("---", "...")):
        return False
    if first not in _RESOLVED_FIRST and None not in _RESOLVED_FIRST:
        return True
    # Plain only if it reads back as a string: "true", "1.5", "null", "~" are quoted.
    tag: str = _RESOLVER.resolve(  # type: ignore[no-untyped-call]  # unannotated in types-PyYAML
        yaml.ScalarNode, text, (True, False)
    )
    return tag == _STR_TAG


def _folded(value: str, *, quoted: bool, indent: int, column: int) -> str:
    """A one-line printable string (``_line``) that reaches past the width, folded as
    libyaml folds it: at a single space met once the column is past the width (in quotes,
    neither the first nor the last character), the next line indented under its key."""
    margin = "\n" + " " * (indent + INDENT)
    out = [" '" if quoted else " "]
    column += len(out[0])
    last = len(value) - 1
    spaces = False  # the previous character was a space: never folded after one
    for index, char in enumerate(value):
        if char != " ":
            text = "''" if quoted and char == "'" else char
            out.append(text)
            column += len(text)
            spaces = False
            continue
        if (
            not spaces
            and column > WIDTH
            and not (index < last and value[index + 1] == " ")
            and not (quoted and index in (0, last))
        ):
            out.append(margin)  # the space becomes the line break
            column = indent + INDENT
        else:
            out.append(" ")
            column += 1
        spaces = True
    if quoted:
        out.append("'")
    return "".join(out)
