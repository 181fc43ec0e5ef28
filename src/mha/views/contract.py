"""What a view gives the page: the contract between the book's views and :mod:`mha.views.payloads`.

:mod:`mha.views.payloads` turns a view into the payload that ``views.js`` draws, in Jupyter and on the website. It
needs only a few things of the view, written down here as two protocols, so that it depends on this small module
and never on :mod:`mha.views.explorer`, which builds on it:

- :class:`SiteView`: what every view of :data:`~mha.views.payloads.SITE_VIEWS` gives: its guidance, its recipe, its
  one line of text and its payload (1.2 "Multi-head attention", 3.1-3.7).
- :class:`TableView`: what a view stored as a table of every reachable setting gives besides
  (:func:`~mha.views.payloads.table_payload`): its controls, their values, and the plain data of one setting,
  an :class:`ExplorerView`.

Each view meets them by its shape alone (``tests/views/test_explorer.py`` checks every view of ``SITE_VIEWS``);
:class:`~mha.views.explorer.Explorer` meets both, and the training timeline meets :class:`SiteView`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ipywidgets import Widget

from mha.views.heatmaps import AttentionMap

__all__ = ["OPENINGS", "ExplorerView", "SiteView", "TableView"]

OPENINGS = ("map", "heads", "layers")
"""How a view first shows: one map, every head of its layer, or every head of every layer."""


@dataclass(eq=False)
class ExplorerView:
    """What a view shows for one set of control values, as plain data: no widget is touched to make it.

    ``message`` is HTML (the reader's text already escaped); ``attention_map`` is the map, if the view has one;
    ``panels`` holds the HTML of the view's other parts by name. ``slider_max`` gives the new top of sliders whose
    range follows another control (the head slider follows the head count), and ``shown`` the control values
    actually drawn where they differ from those asked for (a head beyond the new range is clamped).
    """

    message: str
    attention_map: AttentionMap | None = None
    panels: dict[str, str] = field(default_factory=dict)
    slider_max: dict[str, int] = field(default_factory=dict)
    shown: dict[str, object] = field(default_factory=dict)


@runtime_checkable
class SiteView(Protocol):
    """What :mod:`mha.views.payloads` asks of every view: enough to store a placeholder and to build its payload."""

    what_to_try: str
    """What to try, shown above the controls."""
    what_to_notice: str
    """What to notice, shown above the controls."""
    site_note: str
    """What the website's form of the view cannot do, and where to do it instead ("" if nothing)."""
    opening: str
    """How the view first shows: one of :data:`OPENINGS`."""

    def recipe(self) -> dict | None:
        """The view's class name and the arguments that rebuild it, or ``None`` if the website cannot rebuild it."""
        ...

    def describe(self) -> str:
        """The one line of text shown where no script or widget runs."""
        ...

    def site_payload(self) -> dict:
        """The kind-specific part of the payload (``kind`` and what that kind draws), before the shared fields."""
        ...

    def page_model(self) -> dict | None:
        """What the website's page needs to run a model itself for this view, or ``None``."""
        ...


@runtime_checkable
class TableView(SiteView, Protocol):
    """What :func:`~mha.views.payloads.table_payload` asks of a view besides: its controls and one setting's data."""

    controls: Mapping[str, Widget]
    """Each control's widget by name (a slider, a menu or a checkbox, for the controls the page offers)."""

    def site_choices(self) -> dict[str, list]:
        """The controls of the page's form, by name, with every value each takes."""
        ...

    def site_values(self) -> dict[str, object]:
        """The value each control of the form starts at."""
        ...

    def site_view(self, values: dict[str, object]) -> ExplorerView:
        """The view for one setting of the form's controls, as plain data."""
        ...
