"""Drive profiles: the data a virtual SSD is built from (sim/ssd/profiles/*.toml).

A profile holds identity, power states (MP, ENLAT/EXLAT, NOPS, the media bandwidth each state allows),
energy per MiB moved, thermal constants and FTL geometry. Published results a profile is modeled on
stay in the profile as ``published`` so tests can compare the model against them.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from powerrig.core.errors import PowerrigError

PROFILE_DIR = Path(__file__).with_name("profiles")


class ProfileError(PowerrigError):
    """A drive profile is missing or malformed."""


@dataclass(frozen=True)
class PowerState:
    ps: int
    mp_w: float
    enlat_us: int
    exlat_us: int
    nops: bool = False
    write_MiBps: float = 0.0
    read_MiBps: float = 0.0
    idle_w: float | None = None       # non-operational states: power while parked there
    published: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    mn: str
    sn: str
    fr: str
    vid: int
    capacity_bytes: int
    namespaces: int
    fdp: bool
    apst: bool
    apst_default: tuple
    states: tuple[PowerState, ...]
    power: dict
    thermal: dict
    media: dict
    published: dict
    path: str = ""

    def state(self, ps: int) -> PowerState:
        for s in self.states:
            if s.ps == ps:
                return s
        raise ProfileError(f"profile {self.name} has no power state {ps} (it has {self.npss + 1}: 0..{self.npss})")

    @property
    def npss(self) -> int:
        return len(self.states) - 1

    @property
    def rail(self) -> str:
        """The rail that carries the drive's main power: 12V for datacenter drives, 3V3 for M.2."""
        return self.power.get("rail", "12V")

    def published_drive_point(self, ps: int, direction: str) -> tuple[float, float]:
        """(MiB/s, drive-level W) of a published seq 128 KiB result, host share removed (see profile)."""
        pub = self.state(ps).published
        if not pub:
            raise ProfileError(f"profile {self.name} has no published figures for PS{ps}")
        gbps = pub[f"{direction}_GBps"]
        watts = pub[f"{direction}_w"] - self.published.get("host_share_w_per_GBps", 0.0) * gbps
        return gbps * 1e9 / 2**20, watts


def available() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def _merged(base: dict, over: dict) -> dict:
    """``over`` on ``base``: tables merged key by key, anything else (values, arrays) replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def load(name_or_path: str | Path) -> Profile:
    """A profile by name (``d5-p5336``) or by path to a .toml file. A profile with ``extends = "NAME"``
    is that profile with its own tables and values over it (the referee's drives of known dishonesty)."""
    p = Path(name_or_path)
    if p.suffix != ".toml":
        p = PROFILE_DIR / f"{name_or_path}.toml"
    if not p.is_file():
        raise ProfileError(f"no drive profile {name_or_path!r}; available: {', '.join(available())}")
    try:
        d = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"drive profile {p} is not valid TOML: {e}") from None
    seen = {p.resolve()}
    while "extends" in d:       # a variant of another profile: its tables with these values over them
        base_name = str(d.pop("extends"))
        base = Path(base_name) if base_name.endswith(".toml") else PROFILE_DIR / f"{base_name}.toml"
        if not base.is_file():
            raise ProfileError(f"drive profile {p} extends {base_name!r}, which is no profile")
        if base.resolve() in seen:
            raise ProfileError(f"drive profile {p}: 'extends' goes round in a circle at {base_name!r}")
        seen.add(base.resolve())
        try:
            raw = tomllib.loads(base.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ProfileError(f"drive profile {base} is not valid TOML: {e}") from None
        ext = raw.pop("extends", None)
        d = _merged(raw, d)
        if ext is not None:
            d["extends"] = ext
    try:
        ident = d["identity"]
        states = tuple(PowerState(**s) for s in sorted(d["power_state"], key=lambda s: s["ps"]))
        if [s.ps for s in states] != list(range(len(states))):
            raise ProfileError(f"drive profile {p}: power states must be numbered 0..N without gaps")
        return Profile(name=d["name"], description=d.get("description", ""), mn=ident["mn"], sn=ident["sn"],
                       fr=ident["fr"], vid=int(ident.get("vid", 0)), capacity_bytes=int(ident["capacity_bytes"]),
                       namespaces=int(ident.get("namespaces", 1)), fdp=bool(ident.get("fdp", False)),
                       apst=bool(ident.get("apst", False)), apst_default=tuple(ident.get("apst_default", ())),
                       states=states, power=d["power"], thermal=d["thermal"], media=d["media"],
                       published=d.get("published", {}), path=str(p))
    except (KeyError, TypeError) as e:
        raise ProfileError(f"drive profile {p} lacks or mistypes {e}") from None
