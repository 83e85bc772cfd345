"""Calibration constants per rail: integer offset codes (applied on the device, before V*I) and gain
corrections (applied by the host when it scales codes to SI units). Stored as JSON on the device.
"""
import json

from powerrig_fw import rails_default


FIELDS = ("v_offset", "i_offset", "v_gain", "i_gain")


def defaults():
    return {
        "version": 1,
        "source": "hw/rails.toml defaults",
        "rails": {name: {"v_offset": 0, "i_offset": 0, "v_gain": 1.0, "i_gain": 1.0}
                  for name, _v, _i, _opt in rails_default.RAILS},
    }


def validate(cal):
    """Return an error string, or None when cal is usable."""
    if not isinstance(cal, dict) or not isinstance(cal.get("rails"), dict):
        return "calibration must be an object with a 'rails' object"
    for key in cal:
        if key not in ("version", "source", "rails"):
            return "unknown calibration key %r; keys are version, source, rails" % key
    if not isinstance(cal.get("source", ""), str) or len(cal.get("source", "")) > 120:
        return "source must be a string of at most 120 characters"
    names = [r[0] for r in rails_default.RAILS]
    for name, c in cal["rails"].items():
        if name not in names:
            return "unknown rail %r; rails are %s" % (name, ", ".join(names))
        if not isinstance(c, dict):
            return "rail %s: calibration must be an object" % name
        for key in c:
            if key not in FIELDS:
                return "rail %s: unknown field %r; fields are %s" % (name, key, ", ".join(FIELDS))
        for key in ("v_offset", "i_offset"):
            o = c.get(key, 0)
            if not isinstance(o, int) or isinstance(o, bool) or abs(o) > 4096:
                return "rail %s: %s must be an integer code within +-4096" % (name, key)
        for key in ("v_gain", "i_gain"):
            g = c.get(key, 1.0)
            if not isinstance(g, (int, float)) or isinstance(g, bool) or not 0.8 <= g <= 1.2:
                return "rail %s: %s must be a number within 0.8..1.2" % (name, key)
    return None


def merge(base, update):
    """A new calibration: base with the rails named in update replaced field by field."""
    out = {"version": 1, "source": update.get("source", base.get("source", "set by host")), "rails": {}}
    for name, c in base["rails"].items():
        merged = dict(c)
        merged.update(update.get("rails", {}).get(name, {}))
        out["rails"][name] = merged
    return out


def load(path):
    """The stored calibration over the defaults (so every rail has every field), or the defaults
    with ``load_error`` saying why the stored one was not used."""
    try:
        with open(path) as f:
            cal = json.load(f)
    except OSError:
        return defaults()
    except ValueError:
        cal = None
    err = validate(cal) if cal is not None else "stored calibration is not valid JSON"
    if err:
        d = defaults()
        d["load_error"] = err
        return d
    return merge(defaults(), cal)


def save(path, cal):
    """Write to a temporary file, then rename: a power cut leaves the old or the new, never half."""
    import os

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cal, f)
    os.rename(tmp, path)
