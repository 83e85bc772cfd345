"""Write amplification from drive counters: FDP statistics (host / media bytes written) or SMART data
units written with the OCP physical media units written. Cumulative WAF since the first sample,
instantaneous WAF per interval (below 1 when the host wrote little), and the instantaneous figure
clamped at 5 for plotting (KIOXIA's definitions)."""
from __future__ import annotations

import math

from powerrig.analysis.descriptors import number
from powerrig.analysis.thermal import find_key
from powerrig.core.timeline import Event

SMART_UNIT = 512_000       # data units written: thousands of 512-byte units
CLAMP = 5.0


def _hi_lo(v):
    """OCP 128-bit counters appear as {hi, lo} in nvme-cli 1.x output."""
    if isinstance(v, dict) and "lo" in v:
        return (number(v.get("hi")) or 0) * 2.0 ** 64 + (number(v.get("lo")) or 0)
    return number(v)


def counter_sample(e: Event) -> tuple[float, float, float, str] | None:
    """(host UTC, host bytes, media bytes, source) from one command's parsed output, if it has them."""
    if not e.ok or not isinstance(e.result, dict):
        return None
    t = e.t_end if e.t_end is not None else e.t_start
    hbmw, mbmw = _hi_lo(find_key(e.result, "hbmw")), _hi_lo(find_key(e.result, "mbmw"))
    if hbmw is None or mbmw is None:       # the nvme runner's parsed FdpStats (dut.nvme) names them in full
        hbmw, mbmw = _hi_lo(find_key(e.result, "host_bytes_written")), _hi_lo(find_key(e.result, "media_bytes_written"))
    if hbmw is not None and mbmw is not None:
        return t, hbmw, mbmw, "fdp"
    duw = number(find_key(e.result, "data_units_written"))
    pmuw = _hi_lo(find_key(e.result, "physical_media_units_written"))
    if pmuw is None:
        pmuw = _hi_lo(find_key(e.result, "Physical media units written"))
    if duw is not None and pmuw is not None:
        return t, duw * SMART_UNIT, pmuw, "smart+ocp"
    return None


def waf_samples(events: list[Event]) -> list[tuple[float, float, float, str]]:
    """Counter samples in time order; FDP preferred when both kinds are present."""
    s = sorted(filter(None, (counter_sample(e) for e in events)), key=lambda x: x[0])
    if any(x[3] == "fdp" for x in s):
        s = [x for x in s if x[3] == "fdp"]
    # FDP statistics reset when the feature is set: restart the series where a counter goes down
    return s


def waf_series(samples) -> list[dict]:
    """One row per interval between consecutive samples: times, host MiB/s, cumulative and
    instantaneous WAF (NaN where the host wrote nothing and the media did not either)."""
    rows = []
    if len(samples) < 2:
        return rows
    _, h0, m0, _ = samples[0]
    for (ta, ha, ma, src), (tb, hb, mb, _) in zip(samples, samples[1:]):
        if hb < ha or mb < ma:            # counters reset (FDP feature set): start over here
            h0, m0 = hb, mb
            continue
        dh, dm = hb - ha, mb - ma
        inst = dm / dh if dh > 0 else (math.nan if dm == 0 else math.inf)
        cum = (mb - m0) / (hb - h0) if hb > h0 else math.nan
        rows.append({"t0": ta, "t1": tb, "source": src, "host_bytes": dh, "media_bytes": dm,
                     "host_mib_s": dh / (tb - ta) / (1 << 20) if tb > ta else math.nan,
                     "waf_cumulative": cum, "waf_instant": inst,
                     "waf_instant_clamped": min(CLAMP, inst) if not math.isnan(inst) else math.nan})
    return rows
