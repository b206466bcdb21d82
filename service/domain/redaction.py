"""Credentials out of every text Reckon prints, logs, stores or serves. Pure text, no I/O.

A tracking URI may carry a secret in three places, and users write all three in forms no
URL parser accepts: `http://user:pass@host`, the same with an unencoded `@` or `/` in the
password (`http://user:Ab@Cd@host`, `http://user:p4ss/w0rd@host`), the same without its
scheme (`user:pass@host:5000`), and a query-string token (`?token=...`). So redaction is
decided by the shape of the text, erring on the side of hiding:

- in a URL with a scheme, everything from `://` to the last `@` before the next
  whitespace or quote becomes `***@` (an `@` in a path loses the path before it: a safe
  loss);
- in a word without a scheme, `name:anything@` at the start of the word becomes `***@`;
- the value of a query parameter whose name says it is a secret (token, key, secret,
  password, signature, auth, credential) becomes `***`.

`public_url(uri)` is the other direction: the address to show or link to, built from what
parses (scheme, host, port, path), or None when nothing safe can be built."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

HIDDEN = "***"
# MLflow's client prints "View run NAME at: URL", credentials included, unless told not to:
# every Reckon process and the command `reckon launch` runs get this, whatever was exported.
QUIET_MLFLOW = {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
_STOP = "\\s'\"<>`"  # what ends a URL inside a message
_WITH_SCHEME = re.compile(rf"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^{_STOP}]*@")
_WITHOUT_SCHEME = re.compile(
    rf"(?<![^{_STOP}(=,\[])(?![^{_STOP}]*://)[^{_STOP}/@:]+:[^{_STOP}]*@(?=[^{_STOP}@])"
)
_SECRET_PARAMETER = re.compile(
    rf"(?P<name>[?&;][^=&;{_STOP}#]*(?:token|key|secret|passw|pwd|sig|auth|credential)"
    rf"[^=&;{_STOP}#]*=)[^&;#{_STOP}]*",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """`text` with every credential in a URL (or URL-like word) replaced by ***."""
    if "@" in text:
        text = _WITH_SCHEME.sub(lambda match: f"{match['scheme']}{HIDDEN}@", text)
        text = _WITHOUT_SCHEME.sub(f"{HIDDEN}@", text)
    if "=" in text:
        text = _SECRET_PARAMETER.sub(lambda match: f"{match['name']}{HIDDEN}", text)
    return text


def public_url(uri: str) -> str | None:
    """The http(s) address of `uri` without credentials, query or fragment (what a link or
    a message may show), or None when it is not an http(s) URL with a host and a numeric
    port."""
    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host or "@" in parts.path:
        return None  # an `@` left in the path: the authority held a `/` in a password
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port is None else f"{shown}:{port}"
    return urlunsplit((parts.scheme, netloc, redact(parts.path.rstrip("/")), "", ""))


# Characters a terminal acts on instead of showing: C0 and C1 controls (escape sequences
# recolour or rewrite the screen) and the invisible and bidirectional marks (which reorder
# what is shown). Newline and tab are kept.
_UNSHOWABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with every character a terminal would act on written as an escape (`\x1b`),
    for what the CLI prints: a run id from MLflow or a label is data, not a command."""
    return _UNSHOWABLE.sub(lambda found: ascii(found.group())[1:-1], text)


def one_line(text: object, limit: int = 300) -> str:
    """`text` (an exception, say) as one line of at most `limit` characters, redacted,
    with nothing a terminal would act on."""
    line = terminal_safe(" ".join(redact(str(text)).split()))
    return line if len(line) <= limit else line[: limit - 3] + "..."
