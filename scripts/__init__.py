"""The book's tools: build the student edition and the autograders, retrain and re-measure what ``data/`` stores,
time the notebooks and views, and check what a release ships (CONTRIBUTING.md says which to run when).

They form one package, run from the repository's root as modules, and import each other by their package's name::

    python -m scripts.run_notebooks --record
    python -m scripts.grading --check chapters/1_mechanism/1_attention_from_scratch.ipynb

A tool that imports another, run as a file (``python scripts/<name>.py``), stops and names the command to use instead.
The website's Sphinx extensions (``website/``) import the same way, as ``website.<name>``.
"""
