"""`python -m service.entrypoints.probe [URL]`: the container's health check. GETs the URL
(default the API's liveness route on this host) and exits 0 on a 2xx answer, 1 otherwise,
printing one line; standard library only, so a probe every few seconds costs a bare interpreter
start."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000/livez"
TIMEOUT_SECONDS = 3.0


def probe(url: str, timeout_seconds: float = TIMEOUT_SECONDS) -> tuple[bool, str]:
    """(healthy, one line saying why)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
            return 200 <= response.status < 300, f"{url}: HTTP {response.status}"
    except urllib.error.HTTPError as error:
        error.close()  # it holds the response and its socket
        return False, f"{url}: HTTP {error.code}"
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return False, f"{url}: {reason}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    healthy, line = probe(args[0] if args else DEFAULT_URL)
    print(line)
    return 0 if healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
