"""Model text is data: one escaping function per place it is shown.

Names of inputs, outputs, tensors and nodes, producer strings, file names and
page-address parameters come from strangers. Each renderer interprets some
characters: Streamlit Markdown turns ``![x](url)`` into an image fetched from
any server and ``[x](url)`` into a link; plotly labels are pseudo-HTML
(``<a href>``, ``<span style>``); a Markdown report is read by renderers that
pass raw HTML through; a spreadsheet runs a CSV cell that starts with ``=``;
a terminal obeys escape sequences (clear the screen, set the window title,
hyperlinks). Every function here returns text that its renderer shows
literally, so whatever a model contains is displayed, never acted on:

============================  =============================================
:func:`streamlit_markdown`    ``st.markdown``, ``st.caption``, ``st.info``/``warning``/``error``/``success``,
                              widget labels and help (all render Markdown)
:func:`plotly_label`          plotly titles, annotations, tick and hover labels (pseudo-HTML)
:func:`markdown_text`         prose in the Markdown report
:func:`markdown_code`         names in the Markdown report, as inline code
:func:`csv_cell`              a CSV text cell (formula neutralisation)
:func:`terminal`              text printed to a terminal (control characters shown escaped)
``html.escape``               the HTML report (already escaped everywhere)
============================  =============================================

Pure functions of a string; no Streamlit or plotly import.
"""

from __future__ import annotations

import html
import re
import unicodedata

# ---------------------------------------------------------------- control characters

#: C0 and C1 control characters, DEL, and the bidirectional overrides and isolates that
#: reorder what a reader sees ("Trojan Source"), plus line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def _escape_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """Control, bidi-override and separator characters as ``\\x1b``/``\\u202e`` escapes; the rest unchanged."""
    return _CONTROL.sub(_escape_control, str(text))


def one_line(text: object) -> str:
    """Whitespace runs (newlines and tabs included) as one space, then :func:`visible`."""
    return visible(" ".join(str(text).split()))


# ---------------------------------------------------------------- terminal


def terminal(text: object) -> str:
    """Text for a terminal: escape sequences, carriage returns, backspaces and bidi controls are shown
    escaped (``\\x1b[2J``), so a name cannot clear the screen, set the title, or hide text. Newlines
    are kept: callers print several lines."""
    return "\n".join(visible(line) for line in str(text).split("\n"))


# ---------------------------------------------------------------- Streamlit Markdown

#: Characters that would start a link or image (``[``, ``]``), raw HTML or an autolink (``<``, ``>``),
#: emphasis or strikethrough (``*``, ``_``, ``~``), a code span, a formula (``$``), a table cell (``|``),
#: an entity (``&``) or an e-mail autolink (``@``); the backslash itself so none of these can be undone.
#: CommonMark lets any ASCII punctuation be backslash-escaped; the rest of the text stays as it is, so a
#: message such as "Loading model.onnx failed: ..." reads the same in the page source.
_ST_SPECIAL = re.compile(r"[\\`*_~\[\]<>$|&@]")
#: ``:red[...]`` colour directives, ``:material/icon:`` and ``:emoji:`` shortcodes start with a colon
#: and a letter; headings, quotes and list markers only count at the start of the text.
_ST_COLON = re.compile(r":(?=[A-Za-z])")
_ST_LINE_START = re.compile(r"^(\s*)(\d*)([#>+\-.)])")


def _escape_line_start(match: re.Match[str]) -> str:
    """``# x`` -> ``\\# x``, ``1. x`` -> ``1\\. x``; a ``.`` or ``)`` without digits before it is left alone."""
    space, digits, mark = match.groups()
    if mark in ".)" and not digits or mark not in ".)" and digits:
        return match.group(0)
    return f"{space}{digits}\\{mark}"


#: Streamlit (1.67) turns bare URLs and e-mail addresses into links *after* reading escapes: in Chromium,
#: ``https\\:\\/\\/evil.example``, ``www\\.evil.example``, ``a\\@evil.example`` and ``https&#58;//`` all became
#: links, in ``st.markdown``, captions, alerts, expander and metric labels, metric values, radio options and
#: ``st.table`` cells alike. A WORD JOINER (U+2060: no width, nothing shown, kept in the rendered text) between
#: the scheme and ``://``, between ``www`` and its dot, and before ``@`` is what stops it.
WORD_JOINER = "\u2060"
_ST_AUTOLINK = re.compile(r"(?i)://|www\.|\\@")


def _break_autolink(match: re.Match[str]) -> str:
    found = match.group(0)
    if found == "://":
        return WORD_JOINER + ":\\/\\/"
    if found == "\\@":
        return WORD_JOINER + found
    return found[:3] + WORD_JOINER + "\\."  # www. / WWW.


def streamlit_markdown(text: object) -> str:
    """Text that ``st.markdown`` (and every Streamlit element that renders Markdown) shows literally.

    One line; each character that could form a link, image, HTML, emphasis,
    code, formula, colour directive, icon or heading backslash-escaped, and
    ``://``, ``www.`` and ``@`` broken by an invisible :data:`WORD_JOINER` so no bare URL or address is
    autolinked (escapes alone do not stop Streamlit's autolinking). Letters, digits,
    spaces, ``.``, ``,``, ``(``, ``)``, ``'``, ``=`` and ``:`` before a space
    stay as they are.
    """
    escaped = _ST_SPECIAL.sub(lambda m: "\\" + m.group(0), one_line(text))
    escaped = _ST_COLON.sub(r"\\:", escaped)
    escaped = _ST_LINE_START.sub(_escape_line_start, escaped)
    return _ST_AUTOLINK.sub(_break_autolink, escaped)


# ---------------------------------------------------------------- plotly


def plotly_label(text: object) -> str:
    """Text for a plotly title, annotation, axis tick, legend entry or hover label.

    Plotly renders those as pseudo-HTML (``<a href>``, ``<span style>``,
    ``<b>``, ``<br>``) and decodes entities, so escaping ``&``, ``<`` and ``>``
    shows the name literally. Control characters are shown escaped.
    """
    return html.escape(visible(text), quote=False)


# ---------------------------------------------------------------- Markdown report

#: What must not reach a Markdown renderer raw: raw HTML (``<script>``, ``<img>``), entities, code spans,
#: table pipes, math; a ``]`` that would close a link, image or reference definition (followed by ``(``,
#: ``[`` or ``:``), a ``!`` that would open an image; and autolinked URLs. Emphasis (``*``, ``_``) is left
#: alone: it can only restyle text, and names like ``input_ids`` stay readable in the ``.md`` file.
_REPORT_SPECIAL = re.compile(r"([\\`<>&|$])|(\](?=\s*[(\[:]))|(!(?=\[))")
_AUTOLINK = re.compile(r"(?i)(://|www\.)")


def markdown_text(text: object) -> str:
    """Prose for a Markdown report (a paragraph, list item or table cell): one line, shown literally.

    Lighter than :func:`streamlit_markdown` so the ``.md`` file stays readable
    (``features [4, 64] float32`` is unchanged): no HTML, link, image, code
    span, math or table cell boundary can form, and ``://`` / ``www.`` are
    broken so no bare URL becomes a link.
    """
    escaped = _REPORT_SPECIAL.sub(lambda m: "\\" + m.group(0), one_line(text))
    return _AUTOLINK.sub(lambda m: m.group(1).replace("/", "\\/").replace(".", "\\."), escaped)


def markdown_code(text: object) -> str:
    """A name as inline code in a Markdown report (and in a table cell): nothing inside is interpreted.

    The fence is longer than any run of backticks in the name; pipes are escaped
    (GitHub tables split cells on them even inside code spans).
    """
    value = one_line(text).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") or not value.strip() else ""
    return f"{fence}{pad}{value}{pad}{fence}"


# ---------------------------------------------------------------- CSV

#: A spreadsheet treats a cell starting with one of these as a formula (OWASP CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "|", "%")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def csv_cell(text: object) -> str:
    """A CSV text cell that a spreadsheet shows as text, never runs as a formula.

    A cell that starts (after any spaces) with ``=``, ``+``, ``-``, ``@``, a tab,
    a carriage return, ``|`` or ``%`` gets a leading apostrophe, unless it is a
    plain number (``-0.5`` stays a number). Control characters are shown escaped.
    """
    value = visible(text)
    stripped = value.lstrip(" ")
    if stripped.startswith(_FORMULA_START) and not _NUMBER.fullmatch(stripped):
        return "'" + value
    return value


def printable_name(text: object, limit: int = 200) -> str:
    """A name for any one-line place: :func:`one_line`, cut to ``limit`` characters (NFC-normalised)."""
    value = one_line(unicodedata.normalize("NFC", str(text)))
    return value if len(value) <= limit else value[: limit - 1] + "…"


__all__ = [
    "csv_cell",
    "markdown_code",
    "markdown_text",
    "one_line",
    "plotly_label",
    "printable_name",
    "streamlit_markdown",
    "terminal",
    "visible",
]
