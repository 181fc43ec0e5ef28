"""The one base of the book's interactive views: controls in, plain data out, then a picture, a table and a message.

An :class:`Explorer` owns what every view of the book does the same way: each control redraws the view when it
moves; :meth:`Explorer.refresh` is timed (``last_refresh_seconds``; the budget is 50 ms per update on 2 CPU
cores, measured by ``scripts/bench_views.py``); bad input, or any unexpected error, is answered by a message
(:func:`problem_html`, the reader's text HTML-escaped, never a traceback) while the last good view stays on
screen; the view says what to try and what to notice; and where widgets cannot run (a static page, a terminal)
it is one line of text.

Computing and drawing are apart. :meth:`Explorer.view_data` takes control values by name and returns an
:class:`ExplorerView`: plain data (an :class:`~mha.views.heatmaps.AttentionMap`, message and panel HTML), with no
widget touched, so a static exporter can call it for every value of :meth:`Explorer.choices`. The map is drawn
by :mod:`mha.views.heatmaps`, as PNG and as a table of its numbers for a screen reader.

One object, two representations: displayed in Jupyter, an explorer is its live widget; the same output also
carries a placeholder for the website (:mod:`mha.views.static_form`), where the book's build draws the view
without a kernel, and myst-nb is told to prefer that HTML to the widget (``_config.yml``). Used in (chapter 1,
"Multi-head attention") and (chapter 3, "Empirical head roles").
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

from ipywidgets import HTML, Accordion, Checkbox, Dropdown, Image, IntSlider, VBox, Widget

from mha.views import static_form
from mha.views.heatmaps import AttentionMap, AttentionPNG, attention_table_html

__all__ = ["problem_html", "ExplorerView", "Explorer"]

NUMBERS_TITLE = "The numbers behind the map, as a table"


def problem_html(problem: BaseException, doing: str = "draw") -> str:
    """What a view shows instead of a traceback: the problem, HTML-escaped, under "Cannot <doing> this:".

    A ``ValueError`` is bad input and its message says what to change; any
    other exception is reported as unexpected, with its type, so the view
    keeps working (and keeps its last good picture) whatever the reader types.
    """
    if isinstance(problem, ValueError):
        text = str(problem)
    else:
        text = (f"an unexpected {type(problem).__name__} ({problem}). The last good view stays on screen; "
                "try other input, and please report this.")
    return f"<b style='color:#b35806'>Cannot {html.escape(doing)} this:</b> {html.escape(text)}"


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


class Explorer:
    """Base of every interactive view: subclasses name their controls and compute :meth:`view_data`.

    ``controls`` maps each control's name (the keyword of :meth:`view_data`) to its widget; ``panels`` maps the
    names of :attr:`ExplorerView.panels` to the HTML widgets that show them; ``renderer`` draws the map. The
    class attributes :attr:`what_to_try` and :attr:`what_to_notice` are shown above the controls. A subclass
    builds its controls, then calls ``super().__init__``, which wires them and draws the first view. Display an
    explorer as the last expression of a cell. :meth:`refresh` redraws and returns whether the input was valid.
    """

    what_to_try = ""
    what_to_notice = ""
    doing = "draw"
    """The verb of the error message: "Cannot draw this: ..."."""
    site_note = ""
    """What the website's form of the view cannot do, and where to do it instead (typing, training)."""

    def __init__(self, controls: Mapping[str, Widget], *, renderer: AttentionPNG | None = None,
                 panels: Mapping[str, HTML] | None = None) -> None:
        self.controls = dict(controls)
        self.panels = dict(panels or {})
        self.renderer = AttentionPNG() if renderer is None else renderer
        self.guide = HTML(self.guidance_html())
        self.message = HTML()
        self.image = Image(format="png")
        self.map_table = HTML()
        self.numbers = Accordion(children=[self.map_table], titles=(NUMBERS_TITLE,))
        self.last_refresh_seconds = 0.0
        self._quiet = False
        for name, control in self.controls.items():
            control.observe(partial(self._moved, name), names="value")
        self.widget = self._layout()
        self.refresh()

    # --- what subclasses say -----------------------------------------------------------------------------

    def view_data(self, **values) -> ExplorerView:
        """The view for these control values (one keyword per control), as plain data; ``ValueError`` if bad."""
        raise NotImplementedError

    def _layout(self) -> Widget:
        """The widget a notebook shows: guidance, controls, message, map and its table, top to bottom."""
        return VBox([self.guide, *self.controls.values(), self.message, self.image, self.numbers])

    def _state(self) -> dict[str, object]:
        """What the one-line text form names (default: every control's value)."""
        return self.values()

    def _moved(self, name: str, change) -> None:
        if not self._quiet:
            self._control_moved(name)

    def _control_moved(self, name: str) -> None:
        """What moving control ``name`` does: redraw (a subclass may do more first)."""
        self.refresh()

    def _current_view(self) -> ExplorerView:
        """The view for the controls as they are now."""
        return self.view_data(**self.values())

    # --- what every view does the same way ---------------------------------------------------------------

    def values(self) -> dict[str, object]:
        """Every control's current value, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def choices(self) -> dict[str, list]:
        """Every value each slider, menu and checkbox can take, by name (typed text has no list)."""
        found = {}
        for name, control in self.controls.items():
            if isinstance(control, IntSlider):
                found[name] = list(range(control.min, control.max + 1, control.step))
            elif isinstance(control, Dropdown):
                found[name] = [option[1] if isinstance(option, tuple) else option for option in control.options]
            elif isinstance(control, Checkbox):
                found[name] = [False, True]
        return found

    # --- the website's form (mha.views.static_form) ----------------------------------------------------

    def recipe_arguments(self) -> dict | None:
        """The keyword arguments that rebuild this view, as JSON values; ``None`` if it cannot be rebuilt."""
        return None

    def recipe(self) -> dict | None:
        """How the book's build rebuilds this view for the website: its class name and arguments, or ``None``."""
        arguments = self.recipe_arguments()
        return None if arguments is None else {"view": type(self).__name__, "arguments": arguments}

    def site_choices(self) -> dict[str, list]:
        """The controls of the website's form and every value each takes (default: :meth:`choices`)."""
        return self.choices()

    def site_arguments(self, values: dict[str, object]) -> dict[str, object]:
        """The keywords of :meth:`view_data` for the site's control ``values`` (default: those, plus any other
        control's current value)."""
        return {**self.values(), **values}

    def site_payload(self) -> dict:
        """What the website's form needs (default: every reachable view, :func:`static_form.table_payload`)."""
        return static_form.table_payload(self)

    def guidance(self) -> str:
        """What to try and what to notice, as plain text."""
        return f"Try: {self.what_to_try} Notice: {self.what_to_notice}"

    def guidance_html(self) -> str:
        """:meth:`guidance` as the HTML shown above the controls."""
        return (f"<b>Try:</b> {html.escape(self.what_to_try)}<br><b>Notice:</b> "
                f"{html.escape(self.what_to_notice)}")

    @contextmanager
    def quietly(self) -> Iterator[None]:
        """Move controls in code without each move redrawing the view."""
        quiet, self._quiet = self._quiet, True
        try:
            yield
        finally:
            self._quiet = quiet

    def _updates(self, view: ExplorerView) -> list[tuple[Widget, str, object]]:
        """(widget, trait, new value) for every part the view fills; drawing happens here, so it may raise."""
        updates: list[tuple[Widget, str, object]] = [(self.message, "value", view.message)]
        drawn = view.attention_map
        if drawn is not None:
            updates += [(self.image, "value", self.renderer.render(drawn)),
                        (self.image, "tooltip", f"{drawn.title}: attention map; the numbers are in the table below"),
                        (self.map_table, "value",
                         attention_table_html(drawn.weights, drawn.query_labels, drawn.title, drawn.key_labels))]
        updates += [(self.panels[name], "value", value) for name, value in view.panels.items()]
        return updates

    def refresh(self) -> bool:
        """Redraw for the current controls; on bad input show why, keep the last good view, return False."""
        start = time.perf_counter()
        try:
            view = self._current_view()
            updates = self._updates(view)
        except Exception as problem:  # whatever the reader typed, the view answers with a message
            self.show_problem(problem)
            ok = False
        else:
            with self.quietly():
                for name, top in view.slider_max.items():
                    self.controls[name].max = top
                for name, value in view.shown.items():
                    self.controls[name].value = value
            for widget, trait, value in updates:
                setattr(widget, trait, value)
            ok = True
        self.last_refresh_seconds = time.perf_counter() - start
        return ok

    def show_problem(self, problem: BaseException, doing: str | None = None, where: HTML | None = None) -> None:
        """Show ``problem`` as an escaped message ("Cannot <doing> this: ...") in ``where`` (default: the message)."""
        (self.message if where is None else where).value = problem_html(problem, doing or self.doing)

    def describe(self) -> str:
        """The one line shown where widgets cannot run (a static page, a terminal): what this view is."""
        state = ", ".join(f"{name}={value!r}" for name, value in self._state().items())
        return f"{type(self).__name__}({state}): run the notebook to use it."

    def __repr__(self) -> str:
        return self.describe()

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.describe()
        bundle["text/html"] = static_form.placeholder_html(self)  # the website draws the view from it
        return bundle
