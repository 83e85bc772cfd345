"""Where each bought part is confirmed: the source column of the BOM and the `Source` field of each part.

Why: a BOM row is only as good as what backs its MPN. Two kinds of backing exist here:
  - a citation written in catalog.SOURCES (the connectors say which searches found nothing);
  - the datasheet that KiCad's own symbol (Debian kicad-symbols, KiCad 9) cites: it confirms the
    part and the symbol's pinout, not the orderable suffix of the MPN. When that datasheet is another
    vendor's (a second source such as the 2N7002) the check column says so, so nobody takes it for
    the MPN's own.
Generic symbols (Device:R, Device:C, Connector_Generic, this project's own) cite nothing: the row's
source stays empty and the MPN is the manufacturer's series code as catalog.py writes it.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

KICAD_SYMBOLS = Path("/usr/share/kicad/symbols")
GENERIC_LIBS = {"Device", "Connector_Generic", "powerrig"}
# manufacturer -> a piece of the host name its own datasheets come from
VENDOR_HOSTS = {"Texas Instruments": "ti.com", "Analog Devices": "analog.com", "Littelfuse": "littelfuse.com",
                "Nexperia": "nexperia.com", "Raspberry Pi": "raspberrypi.com", "Vishay": "vishay.com",
                "Murata": "murata.com", "Yageo": "yageo.com"}


@lru_cache(maxsize=None)
def _library(lib: str, symbols: Path) -> str:
    path = symbols / f"{lib}.kicad_sym"
    return path.read_text() if path.exists() else ""


def kicad_datasheet(lib: str, sym: str, symbols: Path = KICAD_SYMBOLS) -> str:
    """The Datasheet property of symbol `sym` in KiCad's library `lib` ('' when none or '~')."""
    text = _library(lib, symbols)
    start = text.find(f'\n\t(symbol "{sym}"')
    if start < 0:
        return ""
    end = text.find('\n\t(symbol "', start + 1)
    m = re.search(r'\(property "Datasheet" "([^"]*)"', text[start:end if end > 0 else len(text)])
    url = m.group(1) if m else ""
    return "" if url in ("", "~") else url


def source(key: str, lib: str, sym: str, manufacturer: str, cited: dict[str, str],
           symbols: Path = KICAD_SYMBOLS) -> tuple[str, str]:
    """(source, check note) for catalog entry `key`: the citation in `cited`, else the datasheet of
    KiCad's symbol; the note is non-empty when that datasheet is not the manufacturer's own."""
    if key in cited:
        return cited[key], ""
    if lib in GENERIC_LIBS:
        return "", ""
    url = kicad_datasheet(lib, sym, symbols)
    if not url:
        return "", ""
    where = f"KiCad 9 symbol {lib}:{sym}, datasheet {url}"
    host = VENDOR_HOSTS.get(manufacturer)
    if host and host not in url:
        return where, (f"KiCad's symbol cites another vendor's datasheet; check {manufacturer}'s own "
                       f"for the MPN's pinout and ratings")
    return where, ""
