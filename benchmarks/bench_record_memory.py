"""Memory of a recording without a window: virtual rig, Interposer, Recorder (and with --live the
GUI's LiveSource fed every block); prints RSS after malloc_trim every 30 s. Splits the GUI's memory
figure (bench_gui.py) into the recording's part and the window's."""
from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

from bench_gui import rss_after_trim_mb       # the same figure as the GUI's, to compare the two


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=6.0)
    ap.add_argument("--interval-us", type=int, default=100)
    ap.add_argument("--live", action="store_true", help="also feed a LiveSource (the GUI's live buffer)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="powerrig-recmem-"))
    os.environ.setdefault("POWERRIG_SIM_DIR", str(tmp / "sim"))
    from powerrig.capture.recorder import Recorder
    from powerrig.core.timeline import Timeline
    from powerrig.interposer.client import Interposer
    from powerrig.sim import rig

    from powerrig.gui.source import LiveSource

    state = rig.start(rig.DEFAULT_PROFILE, owned=True)
    dev = Interposer.open(state["port"])
    live = None

    def feed_live(b):
        nonlocal live
        if live is None:
            live = LiveSource.for_block(b)
        live.feed(b)

    rec = Recorder(dev, tmp / "rec.jls", interval_us=args.interval_us, timeline=Timeline(keep=2000),
                   progress_every_s=0.5, on_block=feed_live if args.live else None)
    rec.start()
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < args.minutes * 60:
            time.sleep(30)
            gc.collect()
            print(f"{(time.monotonic() - t0) / 60:4.1f} min: RSS {rss_after_trim_mb():.1f} MB after malloc_trim", flush=True)
    finally:
        rec.stop()
        rec.wait(30)
        rig.stop(state["id"])
    print(f"capture and simulator files in {tmp}")


if __name__ == "__main__":
    main()
