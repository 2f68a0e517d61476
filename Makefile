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

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

test-all: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m ''

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
