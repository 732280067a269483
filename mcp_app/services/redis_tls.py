"""The TLS options of a Redis URL, meaning for every client what they mean to redis-py.

Every Redis URL of the product (``REDIS_URL``, ``CELERY_BROKER_URL``,
``MCP_RATE_LIMIT_REDIS_URL``, ``CACHE_REDIS_URL``) may carry them as its query, redis-py's
convention, which kombu (the Celery broker) reads too::

    rediss://[[user]:password@]host:port[/<db>]?ssl_ca_certs=/etc/redis/ca.pem
        [&ssl_cert_reqs=required][&ssl_certfile=...&ssl_keyfile=...][&ssl_check_hostname=false]

A ``redis+sentinel://`` URL (``services/redis_sentinel.py``) takes the same options, for its
connections to the sentinels and to the master alike. redis-py (the channel layer, Django's
cache, change notifications, the SSE event store, heartbeats, probes) and kombu hand them to
their own TLS connections; the rate limiter's
client (``services/resp.py``) has its ``ssl.SSLContext`` made here, as redis-py makes its own.
Only the options all three read alike are accepted: ``ssl_cert_reqs`` is one of redis-py's
names (kombu also takes ``CERT_REQUIRED``, redis-py does not) and ``ssl_check_hostname`` is
``true`` or ``false`` (redis-py reads ``no`` as false, kombu as true). Settings make a context of
each URL at start, so a malformed option (an unknown value, a missing or unreadable file, a key
that does not fit its certificate) stops the process with the setting's name rather than
failing every connection later. Stdlib only: settings import it.
"""

from __future__ import annotations

import os
import ssl
from typing import Any
from urllib.parse import parse_qs, urlsplit

SCHEME = "rediss"
# redis_sentinel's scheme (which imports this module): with TLS options, TLS to the sentinels
# and to the master they name.
SENTINEL_SCHEME = "redis+sentinel"
CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
BOOLEANS = {"true": True, "false": False}
# The CA bundle, the verification mode, the client's certificate and key (mutual TLS), and
# whether the server's name (or IP address) must be the one its certificate names.
OPTIONS = ("ssl_ca_certs", "ssl_cert_reqs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")
FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")


def options(url: str) -> dict[str, str]:
    """The ``ssl_*`` options of ``url``'s query.

    Raises:
        ValueError: an option this module does not know, one given twice (redis-py would
            take the first, kombu the last), or options on a URL without TLS.
    """
    parts = urlsplit(url)
    query = {key: values for key, values in parse_qs(parts.query).items() if key.startswith("ssl_")}
    twice = sorted(key for key, values in query.items() if len(values) > 1)
    if twice:
        raise ValueError(f"TLS options given twice: {', '.join(twice)}")
    given = {key: values[0] for key, values in query.items()}
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise ValueError(
            f"unknown TLS options {', '.join(unknown)} (supported: {', '.join(OPTIONS)})"
        )
    if given and parts.scheme not in (SCHEME, SENTINEL_SCHEME):
        raise ValueError(
            f"TLS options ({', '.join(sorted(given))}) need a {SCHEME}:// or"
            f" {SENTINEL_SCHEME}:// URL"
        )
    return given


def uses_tls(url: str) -> bool:
    """Whether connections for ``url`` speak TLS: a ``rediss://`` URL, or a sentinel URL with
    TLS options (then to the sentinels and to the master alike).

    Raises:
        ValueError: as ``options``.
    """
    given = options(url)
    return url.startswith(f"{SCHEME}://") or bool(given)


def kwargs(given: dict[str, str]) -> dict[str, Any]:
    """redis-py's connection arguments for TLS with ``given`` options (``options``'s)."""
    _values(given)
    made: dict[str, Any] = {"ssl": True, **given}
    if "ssl_check_hostname" in given:
        made["ssl_check_hostname"] = BOOLEANS[given["ssl_check_hostname"].lower()]
    return made


def _values(given: dict[str, str]) -> tuple[ssl.VerifyMode, bool]:
    """The verification mode and host name check ``given`` asks for.

    Raises:
        ValueError: a value redis-py and kombu would not both read the same way.
    """
    cert_reqs = given.get("ssl_cert_reqs", "required")
    if cert_reqs not in CERT_REQS:
        raise ValueError(f"ssl_cert_reqs={cert_reqs!r} is none of {', '.join(CERT_REQS)}")
    check_hostname = given.get("ssl_check_hostname", "true").lower()
    if check_hostname not in BOOLEANS:
        raise ValueError(f"ssl_check_hostname={check_hostname!r} is neither true nor false")
    if "ssl_keyfile" in given and "ssl_certfile" not in given:
        raise ValueError("ssl_keyfile without ssl_certfile")
    return CERT_REQS[cert_reqs], BOOLEANS[check_hostname]


def context(url: str) -> ssl.SSLContext | None:
    """The ``ssl.SSLContext`` redis-py makes for a connection to ``url`` (the system's CAs and
    ``ssl_ca_certs``'s, certificate verification required unless ``ssl_cert_reqs`` says
    otherwise, the host name checked when the certificate is); None for a URL without TLS.

    Raises:
        ValueError: a malformed option (the message names it), or a file it names that does
            not exist or does not hold what it should.
    """
    if not uses_tls(url):
        return None
    given = options(url)
    cert_reqs, check_hostname = _values(given)
    certfile, keyfile = given.get("ssl_certfile"), given.get("ssl_keyfile")
    for key in FILES:
        if key in given and not os.path.isfile(given[key]):
            raise ValueError(f"{key}={given[key]}: no such file")
    made = ssl.create_default_context()
    # As redis-py: no host name check when the certificate itself is not checked.
    made.check_hostname = check_hostname and cert_reqs != ssl.CERT_NONE
    made.verify_mode = cert_reqs
    try:
        if certfile:
            made.load_cert_chain(certfile=certfile, keyfile=keyfile or None)
        if "ssl_ca_certs" in given:
            made.load_verify_locations(cafile=given["ssl_ca_certs"])
    except (OSError, ssl.SSLError) as exc:
        files = ", ".join(f"{key}={given[key]}" for key in FILES if key in given)
        raise ValueError(f"TLS files ({files}): {exc}") from None
    return made
