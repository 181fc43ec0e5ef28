"""Make the book's extract of LitBank: data/litbank/litbank_coref.json and data/litbank/litbank_entities.json.

Run from the repository root, with LitBank's files in a folder beside the repository (or name the folder):

    python -m scripts.extract_litbank [../shared/data/litbank]

Every ``coref/*.conll`` file of that folder is read with :func:`mha.corpora.litbank.read_coref_conll` (which
checks every line), and its sentences and mentions are written, one work per file in name order, as
:func:`mha.corpora.litbank.documents_to_json` lays them out; the work is named after its file. Every
``entities/*.tsv`` file of the same works is read with :func:`mha.corpora.litbank_entities.read_entity_tsv` and its
spans written beside them (:func:`mha.corpora.litbank_entities.entities_to_json`), after checking that its words are
the coreference file's, word for word. Nothing else of LitBank is kept: no event or quotation layer, and of the CoNLL
columns only the words and the chains. The licence is copied beside the extract, and the files' sha256 are recorded
in data/SHA256SUMS, which :func:`mha.corpora.litbank.load_litbank` and
:func:`mha.corpora.litbank_entities.load_litbank_entities` check.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

from mha.corpora.litbank import LITBANK_PATH, documents_to_json, read_coref_conll
from mha.corpora.litbank_entities import LITBANK_ENTITIES_PATH, entities_to_json, read_entity_tsv
from mha.data_files import record_sha256

DEFAULT_SOURCE = Path("../shared/data/litbank")


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else DEFAULT_SOURCE
    files = sorted((source / "coref").glob("*.conll"))
    if not files:
        print(f"no coref/*.conll files under {source}; name LitBank's folder as the first argument.", file=sys.stderr)
        return 1
    documents = [dataclasses.replace(read_coref_conll(path), name=path.stem) for path in files]
    entities = [read_entity_tsv(source / "entities" / f"{path.stem}.tsv") for path in files]
    for document, layer in zip(documents, entities, strict=True):
        if document.sentences != layer.sentences:
            print(f"{layer.name}: the entity file's words differ from the coreference file's.", file=sys.stderr)
            return 1
    content = {"source": "LitBank (github.com/dbamman/litbank), coreference layer, CC BY 4.0; "
                         "Bamman, Lewke and Mansoor (2020)",
               **documents_to_json(documents)}
    LITBANK_PATH.parent.mkdir(exist_ok=True)
    LITBANK_PATH.write_text(json.dumps(content, separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8")
    LITBANK_ENTITIES_PATH.write_text(json.dumps({"source": "LitBank (github.com/dbamman/litbank), entity layer, CC BY "
                                                           "4.0; Bamman, Popat and Shen (2019)",
                                                 **entities_to_json(entities)}, separators=(",", ":")) + "\n",
                                     encoding="utf-8")
    shutil.copyfile(source / "LICENSE.txt", LITBANK_PATH.parent / "LICENSE.txt")
    record_sha256()
    mentions = sum(len(d.mentions) for d in documents)
    print(f"wrote {LITBANK_PATH}: {len(documents)} works, {mentions} mentions")
    print(f"wrote {LITBANK_ENTITIES_PATH}: {sum(len(layer.mentions) for layer in entities)} entity mentions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
