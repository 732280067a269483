"""Matching URIs against RFC 6570 URI templates (levels 1-3), for ``resources/read``.

Expansion turns variables into a URI; matching goes the other way: given a template such as
``file:///{+path}`` or ``db://{table}/rows{?limit,offset}`` and a concrete URI, recover the
variables (percent-decoded), or ``None`` when the URI is not an expansion of the template.

Supported: every level 1-3 operator (``{var}``, ``{+var}``, ``{#var}``, ``{.var}``,
``{/var}``, ``{;var}``, ``{?a,b}``, ``{&a}``). Of level 4, the prefix modifier ``{var:3}``
is accepted (it caps the value length); the explode modifier ``{var*}`` is rejected, since
its composite values have no single-string form to hand to a reader.

Matching follows the expansion rules: a simple variable cannot contain ``/``, ``?`` or
``#`` (they would have been percent-encoded), ``{+var}`` may span path segments, undefined
variables are omitted from the expansion so they may be absent from the URI (and then from
the result), and query variables (``{?a,b}``, ``{&a}``) may come in any order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

# operator -> (first character, separator between variables, named (name=value) form,
# characters a value cannot contain)
_OPERATORS: Mapping[str, tuple[str, str, bool, str]] = {
    "": ("", ",", False, "/?#,"),
    "+": ("", ",", False, ","),
    "#": ("#", ",", False, ","),
    ".": (".", ".", False, "/?#."),
    "/": ("/", "/", False, "/?#"),
    ";": (";", ";", True, "/?#;,"),
    "?": ("?", "&", True, "#&"),
    "&": ("&", "&", True, "#&"),
}
_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARCHAR = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_VARSPEC = re.compile(rf"(?P<name>{_VARCHAR}(?:\.?{_VARCHAR})*)(?::(?P<prefix>[1-9][0-9]{{0,3}}))?")


@dataclass(frozen=True, slots=True)
class _Query:
    group: str
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UriTemplate:
    """A parsed template: a regex plus how its groups map back to variable names."""

    template: str
    pattern: re.Pattern[str]
    groups: tuple[tuple[str, str, bool], ...]  # (regex group, variable name, ";" named form)
    queries: tuple[_Query, ...]
    variables: tuple[str, ...]

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        if found is None:
            return None
        result: dict[str, str] = {}
        for group, name, named in self.groups:
            value = found.group(group)
            if value is not None:
                result[name] = unquote(value[1:] if named and value else value)
        for query in self.queries:
            text = found.group(query.group)
            if not text:
                continue
            for pair in re.split(r"[&]", text):
                name, eq, value = pair.partition("=")
                if name in query.names and name not in result:
                    result[name] = unquote(value) if eq else ""
        return result


def _value_pattern(forbidden: str, prefix: str | None, reserved: bool) -> str:
    chars = "[^" + re.escape(forbidden) + "]" if forbidden else "."
    if prefix is not None:
        # A prefix caps *characters* of the value; a percent-encoded triplet counts as one.
        unit = f"(?:%[0-9A-Fa-f]{{2}}|{chars})"
        return f"{unit}{{0,{prefix}}}"
    return chars + ("*?" if reserved else "*")


def _compile_expression(
    body: str, index: int, groups: list[tuple[str, str, bool]], queries: list[_Query]
) -> str:
    if not body:
        raise ValueError("empty expression {}")
    if body[0] in "=,!@|":
        raise ValueError(f"reserved operator {body[0]!r} in expression {{{body}}}")
    operator = body[0] if body[0] in "+#./;?&" else ""
    specs = body[len(operator) :].split(",")
    first, separator, named, forbidden = _OPERATORS[operator]
    reserved = operator in ("+", "#")
    parsed: list[tuple[str, str | None]] = []
    for spec in specs:
        if spec.endswith("*"):
            raise ValueError(f"explode modifier is not supported: {{{body}}}")
        found = _VARSPEC.fullmatch(spec)
        if found is None:
            raise ValueError(f"invalid variable {spec!r} in expression {{{body}}}")
        parsed.append((found.group("name"), found.group("prefix")))
    if operator in ("?", "&"):
        group = f"q{index}"
        queries.append(_Query(group=group, names=tuple(name for name, _ in parsed)))
        # Query variables are read leniently: any order, any subset, extra pairs ignored.
        return f"(?:{re.escape(first)}(?P<{group}>[^#]*))?"
    parts: list[str] = []
    for position, (name, prefix) in enumerate(parsed):
        group = f"v{index}_{position}"
        groups.append((group, name, named))
        value = _value_pattern(forbidden, prefix, reserved)
        lead = first if position == 0 else separator
        if named:
            # The group keeps the "=" so `;name` (empty value) differs from an absent name.
            item = f"{re.escape(lead)}{re.escape(name)}(?P<{group}>(?:={value})?)"
        else:
            item = f"{re.escape(lead)}(?P<{group}>{value})"
        # Undefined variables vanish from an expansion, so every item may be absent; a
        # simple or reserved first variable can only be empty (its lead is empty anyway).
        parts.append(f"(?:{item})?" if lead else item)
    return "".join(parts)


class TemplateCache:
    """The parsed templates a process matches against, by template text.

    The protocol layer keeps no state of its own: whoever serves requests owns one of these
    (``services/context_factory.py`` gives every ``RequestContext`` the process's) and passes it in.
    """

    __slots__ = ("_parsed", "_size")

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._parsed: dict[str, UriTemplate] = {}

    def parse(self, template: str) -> UriTemplate:
        """``parse_template(template)``, parsed once.

        Raises:
            ValueError: the template is not valid RFC 6570 level 1-3 syntax (not kept).
        """
        parsed = self._parsed.get(template)
        if parsed is None:
            parsed = parse_template(template)
            if len(self._parsed) >= self._size:
                self._parsed.clear()
            self._parsed[template] = parsed
        return parsed


def parse_template(template: str) -> UriTemplate:
    """Parse ``template`` (``TemplateCache`` keeps what it parses).

    Raises:
        ValueError: the template is not valid RFC 6570 level 1-3 syntax.
    """
    groups: list[tuple[str, str, bool]] = []
    queries: list[_Query] = []
    pattern: list[str] = []
    position = 0
    for index, expression in enumerate(_EXPRESSION.finditer(template)):
        literal = template[position : expression.start()]
        if "{" in literal or "}" in literal:
            raise ValueError(f"unbalanced braces in URI template {template!r}")
        pattern.append(re.escape(literal))
        pattern.append(_compile_expression(expression.group(1), index, groups, queries))
        position = expression.end()
    tail = template[position:]
    if "{" in tail or "}" in tail:
        raise ValueError(f"unbalanced braces in URI template {template!r}")
    pattern.append(re.escape(tail))
    names = [name for _, name, _ in groups] + [n for q in queries for n in q.names]
    return UriTemplate(
        template=template,
        pattern=re.compile("".join(pattern), re.DOTALL),
        groups=tuple(groups),
        queries=tuple(queries),
        variables=tuple(dict.fromkeys(names)),
    )


def match(template: str, uri: str, cache: TemplateCache | None = None) -> dict[str, str] | None:
    """Return the percent-decoded variables of ``uri`` under ``template``, or ``None``.

    ``template`` is parsed once in ``cache`` (None: afresh).

    Raises:
        ValueError: the template itself is invalid.
    """
    parsed = cache.parse(template) if cache is not None else parse_template(template)
    return parsed.match(uri)


def variables(template: str, cache: TemplateCache | None = None) -> tuple[str, ...]:
    """Return the variable names of ``template`` in order of first appearance."""
    parsed = cache.parse(template) if cache is not None else parse_template(template)
    return parsed.variables
