"""Calibration constants per rail: integer offset codes (applied on the device, before V*I) and gain
corrections (applied by the host when it scales codes to SI units), each gain with a temperature
coefficient (ppm/K) against the board temperature the TMP117 between the shunts reports, referred to
``t_ref_c`` (hw/rails.toml [calibration]: what makes 0.1 % hold over a 30 K swing). Stored as JSON
on the device.
"""
import json

from powerrig_fw import rails_default


FIELDS = ("v_offset", "i_offset", "v_gain", "i_gain", "v_tc", "i_tc")
TC_LIMIT_PPM = 500           # a larger coefficient means a broken part or a wrong fit, not drift


def defaults():
    return {
        "version": 1,
        "source": "hw/rails.toml defaults",
        "t_ref_c": rails_default.T_REF_C,
        "rails": {name: {"v_offset": 0, "i_offset": 0, "v_gain": 1.0, "i_gain": 1.0, "v_tc": 0.0, "i_tc": 0.0}
                  for name, _v, _i, _opt in rails_default.RAILS},
    }


def validate(cal):
    """Return an error string, or None when cal is usable."""
    if not isinstance(cal, dict) or not isinstance(cal.get("rails"), dict):
        return "calibration must be an object with a 'rails' object"
    for key in cal:
        if key not in ("version", "source", "rails", "t_ref_c"):
            return "unknown calibration key %r; keys are version, source, t_ref_c, rails" % key
    t_ref = cal.get("t_ref_c", 25.0)
    if not isinstance(t_ref, (int, float)) or isinstance(t_ref, bool) or not -40 <= t_ref <= 125:
        return "t_ref_c must be the calibration's board temperature in degrees C (-40..125)"
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
        for key in ("v_tc", "i_tc"):
            tc = c.get(key, 0.0)
            if not isinstance(tc, (int, float)) or isinstance(tc, bool) or not abs(tc) <= TC_LIMIT_PPM:
                return "rail %s: %s must be a temperature coefficient within +-%d ppm/K" % (name, key, TC_LIMIT_PPM)
    return None


def gain_at(c, quantity, temp_c, t_ref_c):
    """A rail's gain for quantity "v" or "i" at board temperature ``temp_c`` (None: the stored gain)."""
    g = c.get(quantity + "_gain", 1.0)
    if temp_c is None:
        return g
    return g * (1.0 + c.get(quantity + "_tc", 0.0) * 1e-6 * (temp_c - t_ref_c))


def merge(base, update):
    """A new calibration: base with the rails named in update replaced field by field."""
    out = {"version": 1, "source": update.get("source", base.get("source", "set by host")),
           "t_ref_c": update.get("t_ref_c", base.get("t_ref_c", rails_default.T_REF_C)), "rails": {}}
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
