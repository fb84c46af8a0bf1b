"""Stored text shown as text. Streamlit renders Markdown in st.markdown, st.caption, st.error/warning/info,
subheaders, labels: a stored string (possibly imported) with `[x](https://...)`, `![](https://...)`, a bare URL or
address, HTML, `:red[...]` or `$...$` would become a live link, an image fetch or styled text. Every stored value
that goes into Markdown passes `md` (or `code`); st.code, st.text and dataframes show text as it is.
"""

from __future__ import annotations

import html
import re

# Any ASCII punctuation may be backslash-escaped in CommonMark: escaping every character that can start or
# shape a construct (link, image, autolink, emphasis, heading, HTML, entity, Streamlit's :directive[...], math)
# leaves none to parse. Quotes, commas, `/`, `;`, `%` and `?` start none and stay as they are, readable.
_PUNCTUATION = re.compile(r"([!#$&()*+\-.:<=>@\[\\\]^_`{|}~])")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# Escapes do not stop the browser's autolinks of bare URLs and addresses (GFM's literal autolinks, seen in
# Chromium on the Run, Compare and Lineage pages): a zero-width space after what starts one does.
_AUTOLINK = re.compile(r"(://|www(?=\.)|@)", re.IGNORECASE)  # "www" before its dot: after it, www.x still linked


def md(text: object) -> str:
    """`text` made literal inside Markdown; its line breaks stay line breaks."""
    text = _AUTOLINK.sub("\\1\u200b", _CONTROLS.sub("", str(text)))
    escaped = _PUNCTUATION.sub(r"\\\1", text)
    return escaped.replace("\r\n", "\n").replace("\n", "  \n")


NOTE_HEAD_CHARS = 400  # a knob variant's note carries its family's whole docstring (thousands of characters)


def head_and_rest(text: str, limit: int = NOTE_HEAD_CHARS) -> tuple[str, str]:
    """A long text split for showing: its head (at most `limit` characters, ended at a sentence or line end where
    one falls in the second half of them, else at a word's end) and the rest, "" for a text that fits."""
    if len(text) <= limit:
        return text, ""
    end = max(text.rfind(". ", limit // 2, limit), text.rfind("\n", limit // 2, limit))
    if end < 0:
        end = text.rfind(" ", limit // 2, limit)
    end = end + 1 if end > 0 else limit
    return text[:end].rstrip(), text[end:].lstrip()


def code(text: object) -> str:
    """`text` as an inline code span (nothing inside one is Markdown), or escaped text if it cannot be one."""
    text = str(text)
    if "`" in text or "\n" in text or "\r" in text or _CONTROLS.search(text):
        return md(text)
    return f"`{text}`"


def plain(text: object) -> str:
    """`text` for a Plotly label (trace name, hover, tick): Plotly reads a subset of HTML there (`<a href>`
    makes a link), and shows entities as the characters they stand for."""
    return html.escape(str(text), quote=False)
