#!/usr/bin/env bash
# The board tool chain for `make hw` (hw/README.md): KiCad 9 (kicad-cli, pcbnew, symbol and footprint
# libraries) and ngspice 46 from Debian's bookworm-backports, per package (never kicad-packages3d,
# 379 MB; never `-t bookworm-backports`, which would upgrade unrelated libraries), and SKiDL in
# .venv-hw, a venv on Debian's /usr/bin/python3 because pcbnew is built against that interpreter.
# Safe to run again: each step is skipped when its result is there.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'setup-hw: %s\n' "$*"; }
BP=bookworm-backports
if ! command -v kicad-cli >/dev/null || ! command -v ngspice >/dev/null || [ ! -d /usr/share/kicad/footprints ]; then
  if [ "$(id -u)" != 0 ]; then
    say "KiCad 9 and ngspice missing; as root add 'deb http://deb.debian.org/debian $BP main' to /etc/apt/sources.list.d/$BP.list and run: apt-get install --no-install-recommends kicad/$BP kicad-symbols/$BP kicad-footprints/$BP ngspice/$BP python3-venv" >&2
    exit 1
  fi
  if ! grep -rqs "$BP" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    mirror=$(grep -hoE '^(deb|URIs:) +[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
             | grep -v security | head -1 | awk '{print $2}' || true)
    echo "deb ${mirror:-http://deb.debian.org/debian} $BP main" > /etc/apt/sources.list.d/$BP.list
  fi
  say "installing KiCad 9 and ngspice from $BP"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends kicad/$BP kicad-symbols/$BP kicad-footprints/$BP \
    ngspice/$BP python3-venv >/dev/null
fi
# KiCad's global library tables: SKiDL and kinet2pcb find footprints through them.
mkdir -p "$HOME/.config/kicad/9.0"
for t in fp-lib-table sym-lib-table; do
  [ -f "$HOME/.config/kicad/9.0/$t" ] || cp /usr/share/kicad/template/$t "$HOME/.config/kicad/9.0/"
done
want="skidl==3.0.0 kinet2pcb==1.1.4 numpy>=1.26 matplotlib>=3.7"   # numpy + matplotlib: hw/sim/afe.py
stamp=.venv-hw/.installed
if [ "$(cat $stamp 2>/dev/null)" != "$want" ]; then
  say "creating .venv-hw (SKiDL, kinet2pcb; pcbnew from the system python)"
  /usr/bin/python3 -m venv --system-site-packages .venv-hw
  .venv-hw/bin/python -m pip install -q $want
  echo "$want" > $stamp
fi
