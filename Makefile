# Two commands on a fresh machine:  `make demo`  and  `make test`.
# Both create .venv if it is missing and install gpscale with every extra (chem = RDKit for molecules),
# through constraints.txt, which pins the CPU build of torch.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -c constraints.txt -e '.[data,plot,distributed,sklearn,bench,dev,chem]'
	touch $(STAMP)

.PHONY: install demo test test-all lint
install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gpscale demo

# One pytest-xdist worker a core (at most 4), whole files to a worker so that a file's
# LocalCluster fixture starts once; tests/conftest.py gives each worker its share of threads.
XDIST := -n logical --maxprocesses 4 --dist loadfile

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(XDIST)

test-all: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(XDIST) -m ''

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
