"""A pytest plugin that ``make test-quick`` loads before all others (``-p tests.startup``), so before nbval imports
nbformat and with it jsonschema.

jsonschema imports its optional "iri" format grammar (rfc3987_syntax) when it is installed, and compiling that grammar
costs each pytest process (the runner and both workers) seconds of CPU. No test here checks an IRI: the grammar is
kept out of these processes, as ``mha.views.widget`` keeps it out of a kernel (a test's own subprocess still has it).
"""

import sys

sys.modules.setdefault("rfc3987_syntax", None)  # `import rfc3987_syntax` now raises ImportError, which jsonschema skips
