# INSync — every target builds the environment it needs (venv + Debian packages).
SHELL := /bin/bash
SYSTEM_PYTHON ?= /usr/bin/python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Two installs, so that a target installs only what it needs (pins: pyproject.toml only).
#   base: the venv, the project with its pinned dependencies and [dev] (pytest, ruff ...);
#         Debian: python3-venv and python3-pip only.  For plan, test-unit, lint: everything
#         that needs neither root nor Mininet (plan, simulate, compare, pyswitch in process).
#   full: base + [ddp] (torch) + Mininet, iproute2, openssh-server, sudo ... (as root:
#         scripts/ensure_system.sh full).  For run, test, bench.
BASE_STAMP := $(VENV)/.installed-base
FULL_STAMP := $(VENV)/.installed-full
PIP := $(VENV)/bin/pip install -q --disable-pip-version-check

# make run options (see docs/running.md)
TARGET ?= pyswitch
ARGS ?=

.PHONY: all venv venv-base test test-unit run plan lint bench clean

all: test

# --system-site-packages: Debian's Mininet module (installed by the full install) imports
$(BASE_STAMP): pyproject.toml scripts/ensure_system.sh
	@bash scripts/ensure_system.sh base
	@test -x $(PY) || $(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	@echo "installing Python dependencies into $(VENV) (pinned in pyproject.toml: base + [dev])"
	@$(PIP) -e '.[dev]'
	@touch $@

$(FULL_STAMP): $(BASE_STAMP)
	@bash scripts/ensure_system.sh full
	@echo "installing [ddp] (torch) into $(VENV) (pinned in pyproject.toml)"
	@$(PIP) -e '.[dev,ddp]'
	@touch $@

## make venv: everything (what run, test and bench use; docker/Dockerfile); venv-base: the base
venv: $(FULL_STAMP)
venv-base: $(BASE_STAMP)

## make test: the whole suite (root-only tests run when root, skip otherwise), in two passes.
## First the tests that need neither root, Mininet nor BMv2, TEST_JOBS processes side by side
## (pytest-xdist; a test file stays on one process, so its module fixtures are built once);
## then the others one at a time: they share namespaces' and switches' names, ports and
## Mininet's cleanup, and some of them time what they measure. Both passes always run.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
ONE_AT_A_TIME := root or mininet or bmv2
test: $(FULL_STAMP)
	@rc=0; \
	echo "== make test, pass 1 of 2: tests side by side on $(TEST_JOBS) processes"; \
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not ($(ONE_AT_A_TIME))" || rc=1; \
	echo "== make test, pass 2 of 2: tests one at a time (root, Mininet, BMv2)"; \
	$(PY) -m pytest -q -m "$(ONE_AT_A_TIME)" || rc=1; \
	if [ $$rc != 0 ]; then echo "make test: a pass failed (see above)"; fi; \
	exit $$rc

## make test-unit: fast tests that need neither root nor Mininet (base install: the torch
## tests skip unless make venv, or another target, installed torch)
test-unit: $(BASE_STAMP)
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile -m "not root and not mininet and not slow"

## make plan: plan a small fat-tree job with the default budget
plan: $(BASE_STAMP)
	$(PY) -m controller plan --topo fattree:4 --ps h0 --workers 8 --budget 2 --out results/plan.json

## make run: the main INA experiment on the embedded default (needs root)
run: $(FULL_STAMP)
	$(PY) -m controller run --target $(TARGET) $(ARGS)

lint: $(BASE_STAMP)
	$(VENV)/bin/ruff check .

## make bench: every bench/ script, full size (root ones skipped with a note when not root;
## the Mininet ones take the lock MININET_LOCK). Every script runs to the end even when an
## earlier one reports a failed check; those are listed at the end and make bench fails.
## tests/test_bench_smoke.py runs reduced forms.
MININET_LOCK ?= /tmp/insync-mininet.lock
bench: $(FULL_STAMP)
	@failed=""; \
	run() { echo "== bench/$$*"; $(PY) bench/"$$@" || failed="$$failed $$1"; }; \
	locked() { echo "== bench/$$* (Mininet lock)"; \
	  flock $(MININET_LOCK) $(PY) bench/"$$@" || failed="$$failed $$1"; }; \
	run plan_scaling.py; run plan_jobs_lp.py; run ina_loopback.py; run pyswitch_pps.py; \
	run pyswitch_ina_pps.py; run ina_host_pps.py; run ina_loss_twin.py; run p4runtime_abuse.py; \
	run sim_event_core.py; \
	run sim_scale.py --topo fattree:8 --workers 16 --budgets 0,2,4 --out results/sim_scale; \
	echo "bench: sim_crossval.py pairs finished runs (MININET_RUN SIM_RUN ...): see docs/simulate.md"; \
	if [ "$$(id -u)" = 0 ]; then \
	  run pyswitch_forwarding.py; locked hostile_frames.py; locked soak.py; \
	  locked e2e_unshaped.py --path both; \
	else echo "bench: pyswitch_forwarding, hostile_frames, soak and e2e_unshaped need root: skipped"; fi; \
	if [ -n "$$failed" ]; then echo "bench: every script ran; these reported a failed check:$$failed"; exit 1; fi; \
	echo "bench: every script ran, every check passed"

clean:
	rm -rf $(VENV) build results .pytest_cache *.egg-info
