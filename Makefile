# Set-up and entry points. `make demo` and `make test` work on a fresh machine:
# they create .venv, install torch==2.13.0 first (the CPU wheel), then georag with its extras.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= cpu,train,dev,mpnet,learn,multihop,entities,langchain,llama-index,pyterrier,serve,mcp,onnx,openvino

.PHONY: venv demo test test-all lint clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	touch $@

venv: $(BIN)/.installed

demo: venv
	HF_HUB_OFFLINE=1 $(BIN)/georag demo

test: venv peers
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 WANDB_MODE=offline $(BIN)/python -m pytest -q

# the default suite plus the tests marked slow (full data sets, short training runs, the CPU run
# of scripts/gpu_check.py, 30 + 30 fault-injection trials)
test-all: venv peers
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 WANDB_MODE=offline $(BIN)/python -m pytest -q -m ""

lint: venv
	$(BIN)/ruff check georag train tests scripts
	$(BIN)/ruff format --check georag train tests scripts

clean:
	rm -rf $(VENV) build *.egg-info

# GraphRicciCurvature 0.6.1 (the Ricci-Filtration peer) pins scipy<=1.13.1 and numpy<2.3, so it
# gets its own environment; tests marked `peers` and scripts/bench/bench_ricci.py use it when present.
PEERS ?= .venv-peers

$(PEERS)/.installed:
	$(PY) -m venv $(PEERS)
	$(PEERS)/bin/pip install -q --upgrade pip
	$(PEERS)/bin/pip install -q GraphRicciCurvature==0.6.1
	touch $@

.PHONY: peers
peers: $(PEERS)/.installed
