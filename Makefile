# RIMscope: the two commands of the README, and the longer jobs.
#   make app    set up (first time) and start the dashboard
#   make test   set up (first time) and run the tests (unit, pages, browser)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: app test bench bench-pages reproduce pretrained lint

$(VENV)/.app-installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt
	touch $@

$(VENV)/.dev-installed: $(VENV)/.app-installed requirements-dev.txt
	$(PY) -m pip install -r requirements-dev.txt
	touch $@

app: $(VENV)/.app-installed
	$(VENV)/bin/streamlit run app.py

test: $(VENV)/.dev-installed
	bash scripts/install_browser.sh || echo "no browser: browser tests will be skipped"
	$(PY) -m pytest

bench: $(VENV)/.dev-installed
	$(PY) -m bench.bench_models --threads 1 2

# interaction latency of the dashboard in headless Chromium (needs scripts/install_browser.sh)
bench-pages: $(VENV)/.dev-installed
	$(PY) -m bench.bench_pages

# full reproduction (needs the data sets: RIMSCOPE_DATA_DIR or torchvision downloads)
reproduce: $(VENV)/.app-installed
	$(PY) -m core.reproduce run --seeds 0 1 2 --out results/paper
	$(PY) -m core.reproduce run --datasets mnist fashion_mnist --seeds 0 --iterations 5000 --out results/long

pretrained: $(VENV)/.app-installed
	$(PY) -m core.reproduce run --seeds 0 --out results/paper
	$(PY) -m core.reproduce export-pretrained --out results/paper --seed 0 --dest pretrained

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check core pages tests bench app.py
