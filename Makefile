# RIMscope: the two commands of the README, and the longer jobs.
#   make app    set up (first time) and start the dashboard
#   make test   set up (first time) and run the tests (unit, pages, browser), all but those marked slow
#   make test-slow   the tests marked slow: kill-and-resume, Ray, the benchmarks' smoke runs (CI runs both)
#   make test-quick  the unit tests only (no page or browser tests, nothing marked slow): the inner loop
#   make lint   ruff over core pages tests bench scripts app.py (CI runs it before the tests)
#   make screenshots  the documents' screenshots, from the app in headless Chromium (scripts/screenshots.py)
#   make reproduce    every training grid, then the documents (needs the data sets: RIMSCOPE_DATA_DIR)
#   make pretrained   the shipped models from the grids' results (after make reproduce)
# The set-up installs the requirements, then RIMscope itself (pip install -e .): `import core`
# works from any folder, and nothing patches sys.path or PYTHONPATH.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# make test: two pytest-xdist processes, a test file each at a time (module fixtures stay in one
# process; each process has its own browser-test server); TEST_WORKERS=1 runs everything in one
# process (no xdist): slower, since most of the suite waits on servers, browsers and subprocesses
TEST_WORKERS ?= 2

.PHONY: app test test-slow test-quick bench bench-pages bench-load reproduce pretrained lint screenshots

$(VENV)/.app-installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install -e .
	touch $@

$(VENV)/.dev-installed: $(VENV)/.app-installed requirements-dev.txt
	$(PY) -m pip install -r requirements-dev.txt
	touch $@

app: $(VENV)/.app-installed
	$(VENV)/bin/python app.py

# The test browser is installed and checked once (scripts/install_browser.sh, which may call
# sudo apt-get); the stamp keeps later runs from checking it again until the script changes.
$(VENV)/.browser-installed: scripts/install_browser.sh $(VENV)/.dev-installed
	bash scripts/install_browser.sh
	touch $@

# Under CI=true (as .ci/run sets it) a browser that cannot be installed fails the run, and so does
# tests/browser/test_resume_page.py::test_browser_present_under_ci; locally the browser tests
# are skipped with a clear note.
test: $(VENV)/.dev-installed
	@if $(MAKE) --no-print-directory $(VENV)/.browser-installed; then :; \
	elif [ "$${CI:-}" = "true" ]; then \
		echo "CI=true: the test browser could not be installed (scripts/install_browser.sh failed); failing" >&2; \
		exit 1; \
	else \
		echo "*** no browser: the browser tests (tests/browser) will be SKIPPED; run scripts/install_browser.sh ***" >&2; \
	fi
	$(PY) -m pytest -m "not slow" $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile,)

# the tests marked slow (each a minute or more: processes killed and resumed, Ray clusters,
# benchmarks run end to end, browser scenarios with a real training run or no network); .ci/run
# runs them after make test
test-slow: $(VENV)/.dev-installed
	@$(MAKE) --no-print-directory $(VENV)/.browser-installed || [ "$${CI:-}" != "true" ]
	$(PY) -m pytest -m slow $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile,)

# the inner loop while editing core/: unit tests only (tests/ less tests/pages, tests/browser and
# the tests marked slow); `make test` runs all of them and the rest
test-quick: $(VENV)/.dev-installed
	$(PY) -m pytest -q --ignore=tests/pages --ignore=tests/browser -m "not slow"

bench: $(VENV)/.dev-installed
	$(PY) -m bench.bench_models --threads 1 2

# interaction latency of the dashboard in headless Chromium (needs scripts/install_browser.sh)
bench-pages: $(VENV)/.dev-installed
	$(PY) -m bench.bench_pages

# first views (fresh and warm server, revisits) and N=1 / N=8 sessions at once
bench-load: $(VENV)/.dev-installed
	$(PY) -m bench.bench_first_view
	$(PY) -m bench.bench_load

# full reproduction, as README's "Reproduce everything" and REPRODUCTION.md's "Exact commands" run
# it (needs the data sets: RIMSCOPE_DATA_DIR or torchvision downloads; resumable)
reproduce: $(VENV)/.app-installed
	PY=$(PY) bash scripts/equal_footing_grid.sh results/paper
	PY=$(PY) bash scripts/converged_grid.sh results/converged
	PY=$(PY) bash scripts/controls_grid.sh results/converged results/budget
	$(PY) -m scripts.long_grid
	$(PY) -m scripts.sync_grid --regenerate  # its tables, handwriting table, shipped models, compute and the documents

# the shipped models from the grids' results: each cell's median seed (REPRODUCTION.md, "Exact commands")
pretrained: $(VENV)/.app-installed
	$(PY) -m scripts.paper_medians
	$(PY) -m core.reproduce export-pretrained --out results/converged --protocol converged
	$(PY) -m core.reproduce export-pretrained --out results/long --protocol long --weights-from results/budget-retrained
	$(PY) -m core.reproduce export-pretrained --out results/paper --seed median --weights-from results/paper_medians --dest pretrained

# the documents' screenshots (assets/screenshots, docs/screenshots, their manifest): the app with
# the shipped models in headless Chromium at 1280 x 800; a few minutes on 2 cores
screenshots: $(VENV)/.browser-installed
	$(PY) -m scripts.screenshots

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check core pages tests bench scripts app.py
