"""The client side of the virtual SSD endpoint: one JSON request per connection over a unix socket.

Kept apart from the server (which imports numpy and the drive model) because the impersonated
nvme-cli and fio are short-lived processes started many times per sweep step: their start-up cost is
overhead the sweep pays outside measurement (benchmarks/bench_sweep.py). Standard library only.
"""
from __future__ import annotations

import json
import os
import socket

from powerrig.core.errors import PowerrigError

ENDPOINT_ENV = "POWERRIG_SIM_ENDPOINT"


class EndpointError(PowerrigError):
    """The virtual SSD endpoint is not there or answered nonsense."""


def endpoint_from(argv: list[str]) -> tuple[str | None, list[str]]:
    """Take ``--endpoint SOCK`` / ``--endpoint=SOCK`` out of argv; fall back to $POWERRIG_SIM_ENDPOINT."""
    out, ep, i = [], None, 0
    while i < len(argv):
        a = argv[i]
        if a == "--endpoint" and i + 1 < len(argv):
            ep, i = argv[i + 1], i + 2
            continue
        if a.startswith("--endpoint="):
            ep, i = a.split("=", 1)[1], i + 1
            continue
        out.append(a)
        i += 1
    return ep or os.environ.get(ENDPOINT_ENV), out


def request(endpoint: str | None, req: dict, timeout: float = 10.0) -> dict:
    """One request to the endpoint; EndpointError when it is not there."""
    if not endpoint:
        raise EndpointError(f"no virtual SSD endpoint: pass --endpoint SOCK or set {ENDPOINT_ENV} "
                            "(start one with `powerrig sim start`)")
    if not os.path.exists(endpoint):
        raise EndpointError(f"virtual SSD endpoint {endpoint} does not exist (is `powerrig sim start` running?)")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(endpoint)
            s.sendall((json.dumps(req) + "\n").encode())
            buf = bytearray()        # grows in place: bytes += chunk copied the whole reply per chunk, and a
            while not buf.endswith(b"\n"):     # drive trace of tens of MB held the GIL for minutes
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
    except OSError as e:
        raise EndpointError(f"virtual SSD endpoint {endpoint}: {e.strerror or e}") from None
    try:
        return json.loads(buf)
    except ValueError:
        raise EndpointError(f"virtual SSD endpoint {endpoint} sent a malformed reply") from None
