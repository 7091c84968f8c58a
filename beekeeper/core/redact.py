"""
Secrets in URLs, found and written `***`: user information (`user:password@`, a token as the
user name, one holding a raw `#`, `?`, `/` or `@`) and secret query or fragment parameters
(`?token=`). What a refusal, a log or an operation's name may quote of a URL goes through
redact(); host data refuses a URL with a secret through has_credentials() (hostdata.py).
"""

from __future__ import annotations

import re

# a URL's scheme and authority up to its last `@`: the user information before it
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#\s]*)@")
# what the kit's refusals quote of a URL: the user information written ***
_USERINFO_ANYWHERE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s'\"]*@")
# a URL in a line of text, up to a space or a quote
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
# a query or fragment parameter: its separator, name and value
_PARAM = re.compile(r"([?&;#])([^=&;#?\s'\"]+)=([^&;#\s'\"]*)")
# the words of a parameter's name that make its value a secret (token=, access_token=,
# key=, api_key=, apikey=, X-Amz-Signature=, password=, sig= ...)
_SECRET_WORDS = frozenset(
    "token accesstoken authtoken apitoken apikey key secret password passwd pwd pass "
    "passphrase sig signature auth authorization credential credentials session sessionid "
    "jwt bearer".split())


def secret_param(name: str) -> bool:
    """A query or fragment parameter whose value is a secret, by its name (percent-decoded:
    `%74oken` is `token`): one of _SECRET_WORDS whole, or as a word of it (`access_token`,
    `X-Amz-Signature`, `hf-token`)."""
    from urllib.parse import unquote

    low = unquote(name).lower()
    return low in _SECRET_WORDS or any(w in _SECRET_WORDS for w in re.split(r"[-_.]", low))


# what userinfo_kind finds: user information a URL parser cannot see
RAW, AMBIGUOUS = "raw", "ambiguous"


def userinfo_kind(url: str) -> str:
    """User information a URL parser does not see, because it holds a raw `#`, `?` or `/`
    (the parser ends the authority there and reads the rest of the password as the port,
    path, query or fragment): RAW where nothing else can be meant (`https://u:pa#ss@h/`: an
    authority `u:pa` is no host:port; `https://u:1?2@h`: a query of no parameter that an
    `@` ends), AMBIGUOUS where the URL reads as well with a path holding an `@`
    (`https://user:12/34@host/`, `https://tok/en@host/` read as `https://host:8080/pkg@1.0`
    does: an `@` after the authority with no `=` or `&` before it), else ''. An IPv6 host
    (`[::1]`) is never user information."""
    rest = url.split("://", 1)[1] if "://" in url else url
    cut = re.search(r"[/?#]", rest)
    if not cut or "@" not in rest[cut.start():]:
        return ""
    authority, after = rest[:cut.start()], rest[cut.start():]
    hostport = authority.rpartition("@")[2]  # `u:p@ss#w@h`: a raw `@` before the `#`
    if hostport.startswith("["):
        return ""
    _, colon, port = hostport.rpartition(":")
    if colon and not port.isdigit():
        return RAW
    head = after[:after.index("@")]
    if head[0] in "?#" and not re.search(r"[/=&]", head[1:]):
        return RAW
    return "" if re.search(r"[=&]", head) else AMBIGUOUS


def _http(scheme: str) -> bool:
    """An http(s) scheme, also as the last of a `+` chain (`git+https`)."""
    return scheme.lower().rpartition("+")[2] in ("http", "https")


def url_secrets(url: str) -> list[str]:
    """What in `url` is a secret, in words (none: []): user information (`user:pass@`, a
    token as an http(s) user name), user information with a raw `#`, `?` or `/` (or what
    cannot be told from it: an `@` after the host), and query or fragment parameters named
    as secrets (`?token=`, `?access_token=`, `?key=`, also percent-encoded)."""
    found: list[str] = []
    kind = userinfo_kind(url)
    if kind == RAW:
        found.append("user information holding a raw '#', '?' or '/'")
    elif kind == AMBIGUOUS:
        found.append("an '@' after the host: user information holding a raw '/', '?' or '#', "
                     "or an '@' in the path, which cannot be told apart")
    elif any(":" in m.group(2) or _http(m.group(1)) for m in _USERINFO.finditer(url)):
        found.append("user information (user:password@ or a token as the user name)")
    names = [m.group(2) for m in _PARAM.finditer(url) if m.group(3) and secret_param(m.group(2))]
    if names:
        found.append("the secret parameter " + ", ".join(f"`{n}`" for n in dict.fromkeys(names)))
    return found


def _redact_url(url: str) -> str:
    if userinfo_kind(url):
        # everything up to the last `@` before a query or fragment that follows the first
        # `@` after the authority: a password holding raw `/`, `?`, `#` and `@` is gone whole
        scheme, sep, rest = url.partition("://")
        if not sep:
            scheme, rest = "", url
        cut = re.search(r"[/?#]", rest)
        start = cut.start() if cut else 0
        first = rest.index("@", start)
        stop = re.search(r"[?#]", rest[first:])
        at = rest.rindex("@", start, first + stop.start() if stop else len(rest))
        url = f"{scheme}{sep}***@{rest[at + 1:]}"
    url = _USERINFO_ANYWHERE.sub(r"\1***@", url)
    return _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}=***" if m.group(3)
                      and secret_param(m.group(2)) else m.group(0), url)


def redact(text: str) -> str:
    """`text` with the secrets of every URL in it written `***` (`***@`, `?token=***`)."""
    return URL.sub(lambda m: _redact_url(m.group(0)), text)


def has_credentials(text: str) -> bool:
    """`text` holds a URL with a secret (url_secrets)."""
    return any(url_secrets(m.group(0)) for m in URL.finditer(text))
