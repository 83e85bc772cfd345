"""What the virtual SSD's admin commands (and a Flush) cost on its rails: a known power signature per
command, so the rig's energy of a command above the level before (analysis/admin_energy.py) has a
truth to be held to.

Each command is a busy interval: the draw moves by ``extra_w`` above (a controller reset: below) the
level the drive had, for ``duration_s``, with first-order edges of ``tau_s`` (the area of such a
pulse is extra_w x duration_s, whatever tau). Format and sanitize scale with what they erase (the
namespace, or the whole NVM subsystem for a sanitize); a Flush is a short burst; a firmware commit a
fixed busy interval; a controller reset a dip while the controller is disabled (CC.EN = 0) and
re-enabled. The figures come from the profile's optional ``[power.admin]`` table; every key has the
default below, so a profile without the table (all of today's) builds the same drive it always did.
"""
from __future__ import annotations

from dataclasses import dataclass

from powerrig.sim.ssd.profile import Profile, ProfileError

TB = 1e12
DEFAULTS = {
    "format_w": 3.0, "format_base_s": 0.1, "format_s_per_tb": 0.004,        # Format NVM (SES 0 or 1)
    "sanitize_w": 4.0, "sanitize_base_s": 0.2, "sanitize_s_per_tb": 0.006,  # Sanitize, the whole subsystem
    "flush_w": 2.0, "flush_s": 0.003,                                        # Flush: the write cache to NAND
    "fw_commit_w": 1.5, "fw_commit_s": 0.25,                                 # Firmware Commit
    "reset_dip_w": 0.8, "reset_s": 0.08,                                     # controller reset: the dip
    "tau_s": 0.0005,                                                         # the edges' time constant
}
KINDS = ("format", "sanitize", "flush", "fw_commit", "reset")
FLOOR_W = 0.05            # a reset's dip never takes the drive below this


@dataclass(frozen=True)
class Signature:
    kind: str
    duration_s: float
    extra_w: float          # above the level before (negative: a dip)
    tau_s: float

    @property
    def energy_j(self) -> float:
        """Above the level before, edges included (a first-order pulse keeps the rectangle's area)."""
        return self.extra_w * self.duration_s


def spec(profile: Profile) -> dict:
    """The profile's [power.admin] over the defaults; an unknown key or a negative value is a ProfileError."""
    own = profile.power.get("admin", {}) or {}
    bad = set(own) - set(DEFAULTS)
    if bad:
        raise ProfileError(f"drive profile {profile.name}: [power.admin] has unknown keys {sorted(bad)}")
    out = {**DEFAULTS, **{k: float(v) for k, v in own.items()}}
    if any(v < 0 for v in out.values()):
        raise ProfileError(f"drive profile {profile.name}: [power.admin] values must not be negative")
    return out


def signature(profile: Profile, kind: str, idle_w: float) -> Signature:
    """The signature of one command of ``kind`` on a drive of ``profile`` whose level before is ``idle_w``."""
    s = spec(profile)
    tb = profile.capacity_bytes / TB
    if kind == "format":           # one namespace's share of the capacity
        return Signature(kind, s["format_base_s"] + s["format_s_per_tb"] * tb / max(1, profile.namespaces),
                         s["format_w"], s["tau_s"])
    if kind == "sanitize":
        return Signature(kind, s["sanitize_base_s"] + s["sanitize_s_per_tb"] * tb, s["sanitize_w"], s["tau_s"])
    if kind == "flush":
        return Signature(kind, s["flush_s"], s["flush_w"], s["tau_s"])
    if kind == "fw_commit":
        return Signature(kind, s["fw_commit_s"], s["fw_commit_w"], s["tau_s"])
    if kind == "reset":
        return Signature(kind, s["reset_s"], -min(s["reset_dip_w"], max(0.0, idle_w - FLOOR_W)), s["tau_s"])
    raise ValueError(f"no power signature for {kind!r} (known: {', '.join(KINDS)})")
