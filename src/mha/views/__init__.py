"""The views: one explorer base, one map renderer, and the book's four interactive views built on them.

- :mod:`~mha.views.explorer`: the base of every view: controls to plain data to picture, timing, errors shown as
  escaped messages with the last good view kept, what to try and notice, the text fallback (1.2, 3.1-3.7).
- :mod:`~mha.views.heatmaps`: the one way a map is drawn, rows = query and columns = key: figures for the
  notebooks, PNG for the views, a table of the numbers for a screen reader (1.1 "Attention from scratch", 1.2,
  3.1-3.7, 4.1).
- :mod:`~mha.views.random_layer_explorer`: the heads of one random layer on a typed sentence, for any head count
  (1.2 "Multi-head attention").
- :mod:`~mha.views.model_explorer`: every head of all-MiniLM-L6-v2 on a chosen or typed sentence
  (3.1 "A tour of all 72 heads", 3.2, 3.3, 3.4).
- :mod:`~mha.views.induction_explorer`: every head of the lab's induction models, with its scores
  (3.6 "Heads are not preassigned").
- :mod:`~mha.views.training_timeline`: the lab's induction model scrubbed through training, its heads' maps and
  scores beside the loss curve (3.5 "Induction heads", 3.6).
- :mod:`~mha.views.head_count_explorer`: the head-count study's models run by run, and a model trained live
  (3.7 "One big head or many").
- :mod:`~mha.views.block_diagram`: the transformer layer box by box, and the residual stream that its heads read
  and write (the background page "The transformer in brief").
- :mod:`~mha.views.contract`: what a view gives the page, as protocols that every view meets, and the plain data of
  one setting (1.2, 3.1-3.7).
- :mod:`~mha.views.payloads`: a view as a payload (its controls and every map they reach), and the placeholder
  the website fills with it when the book is built (1.2 "Multi-head attention", 3.1-3.7).
- :mod:`~mha.views.widget`: the one script that draws every payload, ``views.js``, joined from the ES modules under
  ``web/`` (as is ``model.js``, the page's model): in Jupyter through anywidget, on the website as the same file;
  the payload's schema, ``web/payload.schema.json``, checked on both sides (1.2, 3.1-3.7).
"""
