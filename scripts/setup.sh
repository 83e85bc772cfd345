#!/usr/bin/env bash
# Sets up everything powerrig needs on a fresh Debian machine, skipping what is already there.
# Used by `make demo` and `make test`; safe to run again (a second run takes about a second).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'setup: %s\n' "$*"; }
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
command -v fio >/dev/null || need+=(fio)
command -v nvme >/dev/null || need+=(nvme-cli)
command -v sigrok-cli >/dev/null || need+=(sigrok-cli)
# the emulated Cortex-M for the firmware's instruction budget (tests/test_firmware_qemu.py)
command -v arm-none-eabi-gcc >/dev/null || need+=(gcc-arm-none-eabi)
[ -d /usr/lib/arm-none-eabi/newlib ] || need+=(libnewlib-arm-none-eabi)
command -v qemu-system-arm >/dev/null || need+=(qemu-system-arm)
# the real NVMe stack in a QEMU guest (tests/test_qemu_nvme*.py, `powerrig sim start --drive qemu`)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || need+=(busybox-static)
# a real X window for the screenshot test (tests/test_gui_screenshots.py)
command -v xvfb-run >/dev/null || need+=(xvfb)
# a lab's transports: ser2net (RFC2217 in front of an interposer) and OpenSSH (drive hosts), tests/test_remote.py, test_rfc2217.py
command -v ser2net >/dev/null || [ -x /usr/sbin/ser2net ] || need+=(ser2net)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
# the results store's PostgreSQL tier (a throwaway cluster per test session, tests/conftest.py pg_cluster)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql-15)
# a real browser for the results web page's tests (tests/test_web_browser.py: selenium drives chromedriver)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
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
  .venv/bin/python -m pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi

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

# 3. MicroPython for an emulated Cortex-M (QEMU), built once into ~/.cache/powerrig/qemu-mp. Without the
#    MicroPython source the QEMU test tier is skipped with the reason; everything else still runs.
if ! .venv/bin/python scripts/build_qemu_mp.py >/dev/null 2>.venv/.qemu-mp-build.err; then
  say "emulated Cortex-M not built, its tests will be skipped: $(cat .venv/.qemu-mp-build.err)"
fi
# 4. The QEMU drive host's kernel (apt-get download of the Debian cloud kernel) and initramfs (busybox,
#    this host's nvme-cli and fio), built once into ~/.cache/powerrig/qemu-nvme by a hash of its inputs.
if ! nice -n 10 .venv/bin/python -m powerrig.sim.qemu.image >/dev/null 2>.venv/.qemu-nvme-build.err; then
  say "QEMU drive host not built, its tests will fail: $(cat .venv/.qemu-nvme-build.err)"
fi
say "ready"
