# The two commands of the quick start, and a few more.
#   make book      build the website into _build/html (executing every notebook); its scripts (MathJax at build time, ...) come
#                  from npm: package-lock.json, installed into node_modules by `npm ci`. The build ends by writing the
#                  reader edition into _build/html/notebooks, and every launch button opens it (website/reader_buttons.py)
#   make reader-edition   write the reader branch's files (every notebook readable on Colab, solutions folded) into
#                  _build/reader; record and publish them: python -m scripts.reader_edition --out _build/reader
#                  --commit && git push origin reader (scripts/reader_edition.py)
#   make test      run every test: unit tests and every notebook through nbval
#   make test-quick   the unit tests alone (no notebook, browser or slow test), for the edit-and-test loop
#   make jupyter   open the notebooks in JupyterLab, with their MyST markup (exercises, math, citations) rendered
#   make lab       retrain everything in data/lab: the induction models and section 3.5's phase-change spread, the
#                  seed-0 model's training timeline for 3.5 and 3.6, then section 3.7's head-count study (the
#                  Execution statistics page says how long each takes)
#   make student   write the student edition (every solution removed) and its answer key into _build/student, with
#                  one notebook per week and the student website's source, and an otter-grader autograder per
#                  notebook and per week into _build/grading (see chapters/instructors.md)
#   make student-site           build the student website into _build/student/html
#   make release-solutions WEEK=3   release the solutions of weeks 1 to 3 to the students (WEEK=due: by deadline)
#   make bench     time every notebook, and every view in Jupyter and on the built website
# All of them create .venv with Python 3.11 and install the book's environment the first time.
#
# On x86-64 Linux that environment is requirements.lock: requirements.txt's pins and everything they bring, each
# with the sha256 of its files (scripts/lock_requirements.py writes it), installed with pip's --require-hashes, so a
# file that differs from the one locked is refused. The book's own package comes after it (an editable install, no
# file to hash), without dependencies and without downloading a build backend. Elsewhere (macOS, Windows, ARM Linux)
# the lock does not apply and requirements.txt is installed as it is.
#
# torch: on x86-64 Linux, PyPI's torch is the CUDA build (gigabytes of GPU libraries). So there the first install
# takes the pinned torch's CPU-only build (torch==<pin>+cpu, hashed in the lock) from PyTorch's wheel index,
# TORCH_INDEX, and from that index alone (--index-url, torch only; its dependencies come from PyPI with the lock),
# so that no package is looked up in two indexes. To install torch
# from wherever pip looks by default instead (a local wheel, a mirror, a machine without that index), clear it:
#   make test TORCH_INDEX=
# PyPI's wheels for macOS, Windows and ARM Linux are CPU builds already, so there TORCH_INDEX is empty by default.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
ifeq ($(shell uname -s)-$(shell uname -m),Linux-x86_64)
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
LOCK := requirements.lock
else
TORCH_INDEX ?=
LOCK :=
endif
TORCH_PIN := $(shell sed -n 's/^torch==\([^ #]*\).*/\1/p' requirements.txt)
COMMA := ,
# JupyterLab's address and the folder it opens (make jupyter JUPYTER_PORT=8890)
JUPYTER_PORT ?= 8888

.PHONY: book serve test test-quick jupyter bench notebooks lab student student-site reader-edition release-solutions clean

$(STAMP): requirements.txt $(LOCK) pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Need $(PYTHON) (Python 3.11) on PATH, or run: make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifneq ($(LOCK),)
# torch's entry of the lock (its pin and hashes, up to its first line without a trailing backslash) goes in first,
# from TORCH_INDEX alone; the lock then finds it installed
	$(if $(TORCH_INDEX),sed -n '/^torch==/$(COMMA)/[^\\]$$/p' $(LOCK) > $(VENV)/torch.lock)
	$(if $(TORCH_INDEX),$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(VENV)/torch.lock --index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
else
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(if $(TORCH_INDEX),$(BIN)/python -m pip install --quiet --no-deps "torch==$(TORCH_PIN)+cpu" --index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -r requirements.txt
endif
	touch $(STAMP)

# The site serves its own scripts (website/offline_site.py copies them from node_modules into _build/html/_vendor).
# npm ci installs the devDependencies too: ESLint, which the tests run over every JavaScript file (npx eslint).
$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "Need npm (Node.js) on PATH for the site's scripts: apt-get install nodejs npm"; exit 1; }
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

book: $(STAMP) $(NODE_STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "Open _build/html/index.html in a browser, or run: make serve"

serve: book
	@echo "Serving on http://127.0.0.1:8000 (Ctrl-C to stop)"
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory _build/html 8000

# The tests run with Python's bytecode cache on, even where the shell turns it off (PYTHONDONTWRITEBYTECODE=1): without
# it every pytest process (the runner and both workers) rewrites the asserts of every test module it imports and of
# the plugins' whole packages (hypothesis, anyio, nbval), on every run, about half of what collecting the tests costs.
# The cache goes in __pycache__ folders, which git ignores.
WITH_BYTECODE := PYTHONDONTWRITEBYTECODE=

# the site's scripts (node_modules) are installed before the tests start, like the environment, not by the test that
# builds the site
test: $(STAMP) $(NODE_STAMP)
	$(WITH_BYTECODE) $(BIN)/python -m pytest

# The unit tests alone, for the edit-and-test loop (its budget: 60 s on 2 cores): --quick (tests/conftest.py) leaves
# out every notebook, every test of the built site or in Chromium, and the slow ones (sandboxed grading, fresh
# processes, training); tests/startup.py spares each process a grammar it does not need. `make test` runs them all
# before a commit.
test-quick: $(STAMP)
	$(WITH_BYTECODE) $(BIN)/python -m pytest -p tests.startup --quick tests

# JupyterLab with jupyterlab-myst, which renders the notebooks' MyST markup ({exercise}, math, and the glued numbers and
# citations written as {eval} roles: see the README's "JupyterLab")
jupyter: $(STAMP)
	$(BIN)/jupyter lab --port $(JUPYTER_PORT) chapters/

bench: $(STAMP) book
	$(BIN)/python -m scripts.run_notebooks
	$(BIN)/python -m scripts.bench_views
	$(BIN)/python -m scripts.bench_site_views

# The reader edition, which every launch button of the website opens, as the reader branch's files
# (scripts/reader_edition.py); `make book` writes the same notebooks into the website
reader-edition: $(STAMP)
	$(BIN)/python -m scripts.reader_edition --out _build/reader
	@echo "Publish it: $(BIN)/python -m scripts.reader_edition --out _build/reader --commit && git push origin reader"

student: $(STAMP)
	$(BIN)/python -m scripts.student_edition --out _build/student
	$(BIN)/python -m scripts.student_site --out _build/student
	$(BIN)/python -m scripts.grading --out _build/grading

# The student website (no solutions, no rubrics; hints kept), written from the student edition into
# _build/student/html (no notebook is executed: the stored outputs are the book's)
student-site: $(STAMP) $(NODE_STAMP)
	$(BIN)/python -m scripts.student_edition --out _build/student
	$(BIN)/python -m scripts.student_site --out _build/student
	rm -rf _build/student/html
	$(BIN)/jupyter-book build _build/student/site -W -n --keep-going
	mv _build/student/site/_build/html _build/student/html
	@echo "Open _build/student/html/index.html in a browser"

# Release the answer key of weeks 1 to WEEK (make release-solutions WEEK=3), or of every week whose deadline in
# chapters/syllabus.yml has passed (WEEK=due), into the student folder, its website's source and its branch
release-solutions: $(STAMP)
	@test -n "$(WEEK)" || { echo "Say which weeks: make release-solutions WEEK=3 (weeks 1 to 3) or WEEK=due"; exit 1; }
	$(BIN)/python -m scripts.grading --release-solutions $(WEEK) --student-out _build/student
	$(BIN)/python -m scripts.student_site --out _build/student

notebooks: $(STAMP)
	$(BIN)/python -m scripts.run_notebooks --write

lab: $(STAMP)
	$(BIN)/python -m scripts.train_checkpoints
	# sections 3.5 and 3.6's training timeline: induction_2layer_seed0 trained again, recorded step by step
	$(BIN)/python -m scripts.induction_timeline
	# section 3.7's fair head-count study (its curves, and each head count's models at its chosen rate) and the mechanism controls
	$(BIN)/python -m scripts.train_head_count_study

clean:
	rm -rf _build
