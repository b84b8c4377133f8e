"""Hydra's override grammar, both ways: a ``key=value`` override read as hydra-core 1.3 reads it (the lexer and parser
of ``hydra/grammar/OverrideLexer.g4`` and ``OverrideParser.g4``, the values of ``hydra/core/override_parser/
overrides_visitor.py``), and a value written back as an override verl's ``main_ppo`` reads unchanged (the launch
scripts and override files of :mod:`flopplan.engines.verl`). A value is not YAML: ``off`` and ``010`` are strings,
``tRuE`` a bool, ``1_000`` an int, ``key=`` the empty string, and ``a,b`` a sweep (refused, as compose refuses it)."""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

from flopplan.errors import UserError

_IU = r"(?:0|[1-9](?:_?[0-9])*)"  # INT_UNSIGNED: no leading zero, one _ between digits
_POINT = rf"(?:{_IU}?\.[0-9](?:_?[0-9])*|{_IU}\.)"  # POINT_FLOAT (the longer alternative first)
_TOKENS = [(name, re.compile(pattern, re.DOTALL)) for name, pattern in (  # VALUE_MODE, in the lexer's order
    ("POPEN", r"[ \t]*\([ \t]*"), ("COMMA", r"[ \t]*,[ \t]*"), ("PCLOSE", r"[ \t]*\)"), ("BRACKET_OPEN", r"\[[ \t]*"),
    ("BRACKET_CLOSE", r"[ \t]*\]"), ("BRACE_OPEN", r"\{[ \t]*"), ("BRACE_CLOSE", r"[ \t]*\}"),
    ("COLON", r"[ \t]*:[ \t]*"), ("EQUAL", r"[ \t]*=[ \t]*"),
    ("FLOAT", rf"[+-]?(?:(?:{_POINT}|{_IU})[eE][+-]?[0-9](?:_?[0-9])*|{_POINT}|[Ii][Nn][Ff]|[Nn][Aa][Nn])"),
    ("INT", rf"[+-]?{_IU}"), ("BOOL", r"[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]"), ("NULL", r"[Nn][Uu][Ll][Ll]"),
    ("UNQUOTED_CHAR", r"[/\-\\+.$%*@?|]"), ("ID", r"[a-zA-Z_][a-zA-Z0-9_-]*"),
    ("ESC", r"(?:\\\\|\\[()\[\]{}:=, \t])+"), ("WS", r"[ \t]+"),
    ("QUOTED_VALUE", r"\"(?:(?:\\\\)*|.*?[^\\](?:\\\\)*)\"|'(?:(?:\\\\)*|.*?[^\\](?:\\\\)*)'"),
    ("INTERPOLATION", r"\$\{[^}]+\}"))]
_PRIMITIVE = {"ID", "NULL", "INT", "FLOAT", "BOOL", "INTERPOLATION", "UNQUOTED_CHAR", "COLON", "ESC", "WS"}
_DICT_KEY = _PRIMITIVE - {"COLON", "INTERPOLATION"}
_KEY_PART = rf"(?:[A-Za-z_$][A-Za-z0-9_$-]*|{_IU})"
_KEY = re.compile(rf"{_KEY_PART}(?:\.{_KEY_PART})*")  # KEY_SPECIAL / DOT_PATH (DEFAULT_MODE)


class Override(NamedTuple):
    """One parsed override: ``prefix`` '' (change), '+' (append), '++' (force) or '~' (delete)."""

    prefix: str
    key: str
    value: Any


class _Token(NamedTuple):
    kind: str
    text: str


def _lex(text: str) -> list[_Token]:
    """The tokens of a value: the longest match at each point, a tie to the rule listed first (ANTLR's lexer)."""
    tokens, pos = [], 0
    while pos < len(text):
        best: _Token | None = None
        for kind, pattern in _TOKENS:
            if (match := pattern.match(text, pos)) and match.end() > pos and (
                    best is None or match.end() - pos > len(best.text)):
                best = _Token(kind, match.group())
        if best is None:
            raise UserError(f"token recognition error at: {text[pos]!r}")
        tokens.append(best)
        pos += len(best.text)
    return tokens


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens, self.pos = tokens, 0

    def peek(self) -> str:
        return self.tokens[self.pos].kind if self.pos < len(self.tokens) else "EOF"

    def take(self, kind: str) -> _Token:
        if self.peek() != kind:
            got = self.tokens[self.pos].text if self.pos < len(self.tokens) else "<EOF>"
            raise UserError(f"mismatched input {got!r}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def element(self) -> Any:
        if self.peek() == "BRACKET_OPEN":
            self.take("BRACKET_OPEN")
            items = []
            while self.peek() != "BRACKET_CLOSE":
                items.append(self.element())
                if self.peek() != "BRACKET_CLOSE":
                    self.take("COMMA")
                    if self.peek() == "BRACKET_CLOSE":
                        self.take("ELEMENT")
            self.take("BRACKET_CLOSE")
            return items
        if self.peek() == "BRACE_OPEN":
            self.take("BRACE_OPEN")
            pairs: dict[Any, Any] = {}
            while self.peek() != "BRACE_CLOSE":
                key = _primitive(self.run(_DICT_KEY))
                self.take("COLON")
                pairs[key] = self.element()
                if self.peek() != "BRACE_CLOSE":
                    self.take("COMMA")
                    if self.peek() == "BRACE_CLOSE":
                        self.take("KEY")
            self.take("BRACE_CLOSE")
            return pairs
        if self.peek() == "ID" and self.pos + 1 < len(self.tokens) and self.tokens[self.pos + 1].kind == "POPEN":
            raise UserError(f"the function {self.tokens[self.pos].text}(...) is not read by flopplan (Hydra's casts "
                            "and sweeps): write the value itself")
        if self.peek() == "QUOTED_VALUE":
            return _primitive([self.take("QUOTED_VALUE")])
        return _primitive(self.run(_PRIMITIVE))

    def run(self, kinds: set[str]) -> list[_Token]:
        start = self.pos
        while self.peek() in kinds:
            self.pos += 1
        if self.pos == start:
            self.take("ELEMENT")  # nothing where a value belongs: the error names what is there
        return self.tokens[start:self.pos]


def _unescape_quoted(text: str) -> str:
    """A QUOTED_VALUE's text: each run of backslashes before a quote halved, the closing quote dropped
    (overrides_visitor.py:311-358)."""
    pattern, text, out = re.compile(rf"(\\)+{re.escape(text[0])}"), text[1:], []
    while match := pattern.search(text):
        out += [text[:match.start()], text[match.start() + 1:match.end():2]]
        text = text[match.end():]
    return "".join(out) + text[:-1]


def _primitive(tokens: list[_Token]) -> Any:
    """A primitive's value (overrides_visitor.py:244-309): one token typed, several joined as text, the outer
    whitespace dropped and escapes (``\\,``) undone."""
    if tokens and tokens[0].kind == "WS":
        if len(tokens) == 1:
            raise UserError("Trying to parse a primitive that is all whitespaces")
        tokens = tokens[1:]
    if tokens[-1].kind == "WS":
        tokens = tokens[:-1]
    if len(tokens) > 1:
        return "".join(t.text[1::2] if t.kind == "ESC" else t.text for t in tokens)
    kind, text = tokens[0]
    if kind == "QUOTED_VALUE":
        return _unescape_quoted(text)
    if kind == "INT":
        return int(text)
    if kind == "FLOAT":
        return float(text)
    if kind in ("NULL", "BOOL"):
        return None if kind == "NULL" else text.lower() == "true"
    return text[1::2] if kind == "ESC" else text


def parse_value(text: str) -> Any:
    """A Hydra override value (what follows ``key=``) as compose reads it; a syntax error or a sweep (``a,b``) is a
    UserError in Hydra's words."""
    if text == "":
        return ""  # key= : the empty string (overrides_visitor.py:170-172)
    parser = _Parser(_lex(text))
    value = parser.element()
    if parser.peek() == "COMMA":
        raise UserError("Ambiguous value (a sweep a,b: a list is [a,b], a string 'a,b')")
    if parser.peek() != "EOF":
        parser.take("EOF")  # raises, naming what follows the value
    return value


def parse_override(text: str) -> Override:
    """``key=value``, ``+key=value``, ``++key=value`` or ``~key[=value]`` (OverrideParser.g4's ``override``)."""
    prefix = "~" if text.startswith("~") else "++" if text.startswith("++") else "+" if text.startswith("+") else ""
    key, sep, value = text[len(prefix):].partition("=")
    if (not sep and prefix != "~") or not key:
        shown = f"{text[:80]!r}{' ...' if len(text) > 80 else ''}"  # a whole file on one line stays short
        raise UserError(f"not a key=value override: {shown}")
    if not _KEY.fullmatch(key):
        raise UserError("a config group (a/b, key@package) or a key outside Hydra's grammar: flopplan reads "
                        "key=value overrides of verl's config" if re.fullmatch(r"[\w$./@-]+", key) else
                        f"{key!r} is not a Hydra override key")
    try:
        return Override(prefix, key, parse_value(value.lstrip(" \t")) if sep else None)
    except UserError as exc:
        raise UserError(f"{exc} in {text!r} (Hydra's override grammar)") from None


def format_override(key: str, value: Any) -> str:
    """``key=value`` in Hydra's override grammar (strings quoted when they would read as something else)."""
    if isinstance(value, float) and not math.isfinite(value):
        text = "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"  # json.dumps: Infinity, an ID
    elif value is None or isinstance(value, (bool, int, float, list, tuple)):
        text = json.dumps(value, separators=(",", ":")) if not isinstance(value, (list, tuple)) else "[" + ",".join(
            format_override("", v)[1:] for v in value) + "]"
    elif not (re.fullmatch(r"[\w./:+-]+", text := str(value)) and _reads_as(text, text)):
        text = "'" + re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + "\\" * len(m.group(2)) + m.group(2), text) + "'"
    return f"{key}={text}"


def _reads_as(text: str, value: Any) -> bool:
    try:
        return bool(parse_value(text) == value)
    except UserError:
        return False
