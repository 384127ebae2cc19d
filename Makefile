# The two set-up commands: `make run` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test venv bench clean llama browser debs wheels-aarch64

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/sparkctl $(ARGS)

# llama.cpp's server (for the real-engine end-to-end bench) is built once and cached outside
# the repo; see scripts/ensure_llama_server.sh. In CI a failed build fails the run.
llama: $(STAMP)
	@bash scripts/ensure_llama_server.sh $(VENV) || { \
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

# A Spark is Linux aarch64 with Python 3.12: every runtime dependency must resolve to a wheel
# there (or be pure Python), so `make run` on it never stops on a compiler. Resolves with
# pip from PyPI's metadata, no wheel downloaded; a pure-Python sdist is built once into
# ~/.cache/sparkctl/aarch64-wheels. See docs/development.md.
wheels-aarch64: $(STAMP)
	$(PY) scripts/check_aarch64_wheels.py $(PY)

test: $(STAMP) llama browser debs
	$(PY) -m pytest -q $(PYTEST_ARGS)

# Every budget of docs/development.md, each figure printed beside its goal. The first run
# generates a 10,000-run MLflow store under ~/.cache/sparkctl-bench (about half an hour).
bench: $(STAMP)
	$(PY) benchmarks/version_time.py
	$(PY) benchmarks/first_frame.py
	$(PY) benchmarks/idle_cpu.py
	$(PY) benchmarks/history_cli.py
	$(PY) benchmarks/runs_query.py

clean:
	rm -rf $(VENV) .pytest_cache
