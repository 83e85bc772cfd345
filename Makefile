# The two commands a new user needs: `make demo` and `make test`. Each sets up what it needs first.
VENV   := .venv
PY     := $(VENV)/bin/python
export QT_QPA_PLATFORM ?= offscreen

.PHONY: setup demo test bench firmware-defaults clean

setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) -m powerrig.demo

test: setup
	@$(PY) -m pytest -q -p no:cacheprovider

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Regenerate the firmware's default calibration from hw/rails.toml (a test checks it is in sync).
firmware-defaults: setup
	@$(PY) -m powerrig.rails --emit-firmware > firmware/powerrig_fw/rails_default.py

clean:
	rm -rf $(VENV) tests/micropython/node_modules out
