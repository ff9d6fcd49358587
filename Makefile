# layerscale-suite. On a fresh machine `make run-ablations` and `make test` install what they need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Pinned so every machine trains with the same kernels; override, e.g. TORCH_SPEC="torch==2.9.1 torchvision==0.24.1".
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
ABLATION ?= ablations/default.yaml
# Each shipped ablation's file stem is its `name`, so its results land in results/<stem>.
RESULTS  ?= results/$(basename $(notdir $(ABLATION)))
WORKERS  ?= 2
OUT      ?= results/gpu-check
PYTEST_ARGS ?=
# Test processes (pytest-xdist): much of the suite waits on worker processes, subprocesses and disks,
# so two test files at a time finish sooner on 2 cores. Each file stays in one process (loadfile),
# which keeps its module fixtures built once. TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2

.PHONY: install test run-ablations tune stability propagate tables bench bench-check gpu-check wheelhouse clean

install: $(STAMP)

# Re-runs only when pyproject.toml changes: a second `make install` is a no-op.
# The ray, slurm and trackers extras are installed too, so that the Ray backend's tests run against a
# real local Ray, the Slurm backend's against submitit's local executor, and each tracker sink for real.
# uv installs the same wheels as pip from the indexes pip is configured with (scripts/uv_args.py), much
# faster; INSTALLER=pip uses pip alone, and pip takes over if uv cannot be had or fails.
INSTALLER ?= uv
EXTRAS := .[dev,ray,slurm,trackers]
PIP_INSTALL = $(BIN)/python -m pip install -q $(TORCH_SPEC) && $(BIN)/python -m pip install -q -e '$(EXTRAS)'
UV_INSTALL = $(BIN)/python -m pip install -q uv && \
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python $$($(BIN)/python scripts/uv_args.py) $(TORCH_SPEC) -e '$(EXTRAS)'
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(filter uv,$(INSTALLER)),($(UV_INSTALL)) || { echo 'make install: uv failed; pip installs instead' >&2; $(PIP_INSTALL); },$(PIP_INSTALL))
	touch $(STAMP)

# The suite's modules are byte-compiled first: where PYTHONDONTWRITEBYTECODE is set, each of the
# tests' hundreds of processes would otherwise compile them again.
test: install
	$(BIN)/python -m compileall -q suite scripts
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

run-ablations: install
	$(BIN)/suite run $(ABLATION) --out $(RESULTS) --workers $(WORKERS)
	$(BIN)/suite analyze $(RESULTS)
	$(BIN)/suite report $(RESULTS)

# The tuning study whose best rates (on validation, seeds 100-101) the main job confirms on fresh seeds
# (ablations/tune.yaml; committed as results/tune, with the sweep's own lines in results/tune/sweep_log.txt).
tune: install
	$(BIN)/suite run ablations/tune.yaml --out results/tune --workers $(WORKERS)
	$(BIN)/suite analyze results/tune
	$(BIN)/suite report results/tune

# How each scheme's stable range of rates changes with depth (ablations/stability.yaml, results/stability).
stability: install
	$(BIN)/suite run ablations/stability.yaml --out results/stability --workers $(WORKERS)
	$(BIN)/suite analyze results/stability
	$(BIN)/suite report results/stability

# Signal propagation to depth 1000 (ablations/propagation.yaml), then its tables and figures.
propagate: install
	$(BIN)/suite propagate ablations/propagation.yaml --out results/propagation --workers $(WORKERS)
	$(BIN)/suite analyze results/propagation

tables: install
	$(BIN)/suite analyze $(RESULTS)
	$(BIN)/suite report $(RESULTS)

bench: install
	$(BIN)/python -m pytest tests/bench -m bench -q --benchmark-autosave $$(ls .benchmarks 2>/dev/null | grep -q . && echo --benchmark-compare)

bench-check: install
	$(BIN)/suite bench-check

# USE_SYSTEM_TORCH=1: $(PYTHON) already has torch (a cluster module, an image; offline, say). A venv
# beside it gets only the suite's other dependencies, and only those missing (torchvision too, the release
# built for that torch), from wheelhouse/ when that folder exists (make wheelhouse). The .pth file shows it
# $(PYTHON)'s packages even when $(PYTHON) is itself a venv's, which --system-site-packages alone does not;
# $(PYTHON)'s pip installs (no ensurepip needed). A Python older than 3.11 is refused in one line first.
GPU_VENV := .venv-gpu
gpu-check: $(if $(USE_SYSTEM_TORCH),$(GPU_VENV)/.installed,install)
	$(if $(USE_SYSTEM_TORCH),$(GPU_VENV),$(VENV))/bin/python scripts/gpu_check.py $(OUT)

$(GPU_VENV)/.installed: pyproject.toml
	$(PYTHON) scripts/gpu_check.py --check-python
	$(PYTHON) -m venv --system-site-packages --without-pip $(GPU_VENV)
	$(PYTHON) -c 'import site; print(*site.getsitepackages(), sep="\n")' \
	    > "$$($(GPU_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/system.pth"
	$(PYTHON) -m pip --python $(GPU_VENV)/bin/python install -q \
	    $(if $(wildcard wheelhouse),--no-index --find-links wheelhouse) $$($(PYTHON) scripts/gpu_check.py --needs)
	touch $@

# Wheels for an offline GPU machine whose Python has torch, to copy with the checkout (scripts/wheelhouse.py):
# torchvision built for its torch (BOX_TORCH; timm needs it) and what gpu-check needs beside torch at the
# versions installed here, all for its Python (BOX_PYTHON, manylinux x86-64). The defaults are this project's
# H200 image's. WHEELS="name==version ..." fetches only those beside torchvision; BOX_TORCH= leaves torchvision
# out; TORCHVISION_INDEX=https://download.pytorch.org/whl/cuNNN when PyPI's is built for another CUDA.
BOX_PYTHON ?= 3.12
BOX_TORCH  ?= 2.11.0+cu130
wheelhouse: install
	$(BIN)/python scripts/wheelhouse.py --python $(BOX_PYTHON) --torch '$(BOX_TORCH)' \
	    $(if $(TORCHVISION_INDEX),--index $(TORCHVISION_INDEX)) $(WHEELS)

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
