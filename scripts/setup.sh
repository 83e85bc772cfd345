#!/usr/bin/env bash
# Sets up what powerrig needs on a fresh Debian machine, skipping what is already there.
# Used by `make demo` and `make test`; safe to run again (a second run takes about a second).
# POWERRIG_SETUP_FOR=demo (make demo): only the project virtualenv the demo and the README's commands
# run in; the tiers only tests use (emulators, QEMU guest, Joulescope UI, labgrid, board tools, browser,
# PostgreSQL) are left for `make test` (POWERRIG_SETUP_FOR=test) and a plain `make setup`, which set up
# everything. POWERRIG_SETUP_LIST=1 prints the tiers that would be set up, one a line, and does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'setup: %s\n' "$*"; }
FOR=${POWERRIG_SETUP_FOR:-all}
TIERS="venv"
[ "$FOR" = demo ] || TIERS="debs venv qt joulescope-ui labgrid qemu-mp board rp2-emulator qemu-nvme"
tier() { case " $TIERS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if [ -n "${POWERRIG_SETUP_LIST:-}" ]; then printf '%s\n' $TIERS; exit 0; fi
# install_debs WHAT PACKAGE...: Debian packages installed as root (apt-get update once a run), else
# the apt-get line to run printed and 1 returned.
apt_updated=
install_debs() {
  local what=$1; shift
  if [ "$(id -u)" != 0 ]; then
    say "$what: $*; install them with: sudo apt-get install $*" >&2
    return 1
  fi
  say "installing $what: $*"
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
  apt-get install -y -qq "$@" >/dev/null
}

# 1. Distribution tools: the real fio, nvme-cli and sigrok-cli that users have on the bench.
need=()
if tier debs; then
command -v fio >/dev/null || need+=(fio)
command -v nvme >/dev/null || need+=(nvme-cli)
command -v sigrok-cli >/dev/null || need+=(sigrok-cli)
# the emulated Cortex-M for the firmware's instruction budget (tests/test_firmware_qemu.py)
command -v arm-none-eabi-gcc >/dev/null || need+=(gcc-arm-none-eabi)
[ -d /usr/lib/arm-none-eabi/newlib ] || need+=(libnewlib-arm-none-eabi)
command -v qemu-system-arm >/dev/null || need+=(qemu-system-arm)
# the emulated RP2040 (tests/test_rp2_emulator.py): cmake builds MicroPython's rp2 port, Node runs rp2040js
command -v cmake >/dev/null || need+=(cmake)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# the real NVMe stack in a QEMU guest (tests/test_qemu_nvme*.py, `powerrig sim start --drive qemu`)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || need+=(busybox-static)
# a real X window for the screenshot test (tests/test_gui_screenshots.py)
command -v xvfb-run >/dev/null || need+=(xvfb)
# a lab's transports: ser2net (RFC2217 in front of an interposer) and OpenSSH (drive hosts), tests/test_remote.py, test_rfc2217.py
command -v ser2net >/dev/null || [ -x /usr/sbin/ser2net ] || need+=(ser2net)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
command -v ip >/dev/null || need+=(iproute2)        # network namespaces: tests/test_lab_hosts.py
# the results store's PostgreSQL tier (a throwaway cluster per test session, tests/conftest.py pg_cluster)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql-15)
# a real browser for the results web page's tests (tests/test_web_browser.py: selenium drives chromedriver)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
fi
if ((${#need[@]})); then
  install_debs "missing Debian packages" "${need[@]}" || exit 1
fi

# 2. The project virtualenv with powerrig installed editable, re-done only when setup.cfg changes.
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || { say "creating .venv"; "$PY" -m venv .venv; }
stamp=.venv/.powerrig-installed
want=$(cat setup.cfg setup.py pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing powerrig and its test dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # setuptools' "Editable installation ... Please be careful with folders ..." box is for its own
  # meta-path finder (powerrig_fw lives under firmware/), not something a newcomer has to act on
  PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi
# Bytecode of the package and firmware in their __pycache__ (an editable install compiles nothing, and
# with PYTHONDONTWRITEBYTECODE set nothing writes it later): else every `python -m powerrig` compiles
# its ~150 modules again, 0.4-0.8 CPU-s a start (the CLI, each rig and sweep a test starts). Only what
# changed since is compiled again; a file edited after it is compiled in memory as before.
.venv/bin/python -m compileall -qq host_app firmware >/dev/null || true
# The analysis's numba kernels compiled once into their cache (host_app/powerrig/analysis/__pycache__):
# else the first analysis of every fresh checkout waits ~1 s per kernel for the compiler.
.venv/bin/python -c "from powerrig.analysis.kernels import compile_all; compile_all()"
.venv/bin/python -c "from powerrig.capture.direct_read import compile_all; compile_all()"

if tier qt; then
# 2b. Qt's libraries from the distribution (the PySide6 wheel brings Qt, not the system libraries it links).
if ! QT_QPA_PLATFORM=offscreen .venv/bin/python -c "from PySide6.QtWidgets import QApplication" 2>/dev/null; then
  install_debs "the system libraries Qt needs" libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 \
    libglib2.0-0 || true
fi
# 2c. ... and those of its xcb plugin: a real X window (xvfb-run, the screenshots; the desktop app on a
#     desktop). Offscreen Qt loads without them, so only the plugin's own links tell they are missing.
xcb_plugin=$(ls .venv/lib/python3*/site-packages/PySide6/Qt/plugins/platforms/libqxcb.so 2>/dev/null | head -1)
if [ -n "$xcb_plugin" ] && ldd "$xcb_plugin" 2>/dev/null | grep -q "not found"; then
  install_debs "the X libraries Qt's xcb plugin needs" libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 \
    libxcb-image0 libxcb-render-util0 libxcb-randr0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0 || true
fi

# 2d. The Joulescope UI from PyPI in a test-only virtualenv (.venv-jsui): its own JLS loader and window
#     open powerrig captures in tests/test_joulescope_ui.py and scripts/joulescope_ui_view.py. Kept apart
#     from .venv (it pins its own PySide6, pyqtgraph and pyjls); re-done only when the pin changes.
fi
JSUI_PIN="joulescope_ui==1.5.5"
if tier joulescope-ui && [ "$(cat .venv-jsui/.powerrig-installed 2>/dev/null)" != "$JSUI_PIN" ]; then
  say "installing the Joulescope UI tier into .venv-jsui ($JSUI_PIN)"
  rm -rf .venv-jsui
  "$PY" -m venv .venv-jsui
  if .venv-jsui/bin/python -m pip install -q "$JSUI_PIN"; then
    echo "$JSUI_PIN" > .venv-jsui/.powerrig-installed
  else
    say "the Joulescope UI tier could not be installed; tests/test_joulescope_ui.py will skip (fail under CI=true)"
  fi
fi

# 2e. labgrid (powerrig's 'lab' extra) in a virtualenv of its own, .venv-lab: labgrid's pyserial fork
#     (pyserial-labgrid) and plain pyserial install the same serial/ files, and pip lets whichever comes
#     last win without a word. The fork is laid down last here, and `import powerrig.lab` checks it is
#     whole (powerrig/lab/serial_fork.py). tests/test_lab.py and test_lab_hosts.py use this venv.
lab_stamp=.venv-lab/.powerrig-installed
if tier labgrid && [ "$(cat "$lab_stamp" 2>/dev/null)" != "$want" ]; then
  say "installing labgrid and powerrig into .venv-lab"
  [ -x .venv-lab/bin/python ] || "$PY" -m venv .venv-lab
  .venv-lab/bin/python -m pip install -q --upgrade pip
  PYTHONWARNINGS="ignore:Editable installation" .venv-lab/bin/python -m pip install -q -e ".[lab]"
  .venv-lab/bin/python -m pip uninstall -q -y pyserial
  .venv-lab/bin/python -m pip install -q --force-reinstall --no-deps pyserial-labgrid
  .venv-lab/bin/python -c "import powerrig.lab" || exit 1
  echo "$want" > "$lab_stamp"
fi

# 3. MicroPython for an emulated Cortex-M (QEMU), built once into ~/.cache/powerrig/qemu-mp. Without the
#    MicroPython source the QEMU test tier is skipped with the reason; everything else still runs.
if tier qemu-mp && ! .venv/bin/python scripts/build_qemu_mp.py >/dev/null 2>.venv/.qemu-mp-build.err; then
  if [ "${CI:-}" = "true" ]; then   # CI must run the firmware's QEMU tier: a missing input is a failure
    say "emulated Cortex-M not built under CI=true: $(cat .venv/.qemu-mp-build.err)"; exit 1
  fi
  say "emulated Cortex-M not built, its tests will be skipped: $(cat .venv/.qemu-mp-build.err)"
fi
# 4. The board tool chain (KiCad 9, ngspice, SKiDL in .venv-hw) for `make hw` and tests/test_hw_board.py.
! tier board || bash scripts/setup_hw.sh || { [ "${CI:-}" = true ] && exit 1; say "board tools not installed: make hw and its tests will be skipped"; }
# 5. The emulator tier: MicroPython's rp2 port for the RP2040 built once into ~/.cache/powerrig/rp2-mp
#    (~75 s on 2 cores, cached by a hash of its inputs), and rp2040js pinned by tools/rp2emu/package-lock.json.
#    Without the vendored source the tier cannot run: its test skips with the reason, and FAILS under CI=true.
if ! tier rp2-emulator; then
  :
elif ! .venv/bin/python scripts/build_rp2_mp.py >/dev/null 2>.venv/.rp2-mp-build.err; then
  say "emulated RP2040 image not built, its test cannot run: $(cat .venv/.rp2-mp-build.err)"
elif [ "${POWERRIG_SETUP_FOR:-}" = test ]; then
  # The board's RP2350 image (~80 s of compiling) builds at the lowest priority while the first tests
  # run; tests/test_rp2_image_rp2350.py waits for it on the build's file lock, or builds it itself.
  nohup nice -n 19 .venv/bin/python scripts/build_rp2_mp.py --board RPI_PICO2 >/dev/null 2>&1 &
fi
lock=tools/rp2emu/package-lock.json
if tier rp2-emulator && command -v npm >/dev/null && [ "$(cat tools/rp2emu/node_modules/.lock-hash 2>/dev/null)" != "$(sha256sum < $lock)" ]; then
  say "installing rp2040js (npm ci in tools/rp2emu)"
  (cd tools/rp2emu && npm ci --no-audit --no-fund --loglevel=error >/dev/null) && sha256sum < $lock > tools/rp2emu/node_modules/.lock-hash
fi
# 6. The QEMU drive host's kernel (apt-get download of the Debian cloud kernel) and initramfs (busybox,
#    this host's nvme-cli and fio), built once into ~/.cache/powerrig/qemu-nvme by a hash of its inputs.
if tier qemu-nvme && ! nice -n 10 .venv/bin/python -m powerrig.sim.qemu.image >/dev/null 2>.venv/.qemu-nvme-build.err; then
  say "QEMU drive host not built, its tests will fail: $(cat .venv/.qemu-nvme-build.err)"
fi
if [ "$FOR" = demo ]; then say "ready for the demo (make test sets up the test tiers)"; else say "ready"; fi
