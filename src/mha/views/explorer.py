"""The one base of the book's interactive views: controls in, plain data out, drawn by one JavaScript module.

An :class:`Explorer` owns what every view of the book does the same way. :meth:`Explorer.view_data` takes control
values by name and returns an :class:`~mha.views.contract.ExplorerView`: plain data (an
:class:`~mha.views.heatmaps.AttentionMap`, message and panel HTML), with no widget touched. :meth:`Explorer.refresh`
computes the view for the controls as they stand (timed: ``last_refresh_seconds``); bad input, or any unexpected
error, is answered by a message (:func:`problem_html`, the reader's text HTML-escaped, never a traceback) while the
last good view (:attr:`Explorer.current`) stays.

Python never draws a view's map. Displayed in Jupyter, an explorer is a :class:`~mha.views.widget.ViewWidget`:
the payload of every setting its controls reach (:mod:`mha.views.payloads`), drawn by ``views.js``, the same
module that draws the website's views, with below it the few things only a kernel can do (typing a sentence,
training a model: :meth:`Explorer.kernel_widgets`), which send the view a new payload. The same output carries a
placeholder that the website's build fills with that payload (``_config.yml`` tells myst-nb to prefer it). An
explorer is what :mod:`mha.views.payloads` asks of a view (:class:`~mha.views.contract.TableView`). Used in
(chapter 1, "Multi-head attention") and (chapter 3, "Empirical head roles").
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial

from ipywidgets import HTML, Checkbox, Dropdown, IntSlider, VBox, Widget

from mha.core.validation import check_type
from mha.views import payloads
from mha.views.contract import ExplorerView
from mha.views.widget import ViewWidget

__all__ = ["problem_html", "Explorer"]


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


class Explorer:
    """Base of every interactive view: subclasses name their controls and compute :meth:`view_data`.

    ``controls`` maps each control's name (the keyword of :meth:`view_data`) to its widget; ``panels`` maps the
    names of :attr:`~mha.views.contract.ExplorerView.panels` to the HTML widgets that show them; ``renderer`` draws
    the map. The class attributes :attr:`what_to_try` and :attr:`what_to_notice` are shown above the controls. A
    subclass builds its controls, then calls ``super().__init__``, which wires them and draws the first view. Display
    an explorer as the last expression of a cell. :meth:`refresh` redraws and returns whether the input was valid.
    """

    what_to_try = ""
    what_to_notice = ""
    doing = "draw"
    """The verb of the error message: "Cannot draw this: ..."."""
    site_note = ""
    """What the website's form of the view cannot do, and where to do it instead (typing, training)."""
    opening = "map"
    """How the view first shows (:data:`~mha.views.contract.OPENINGS`)."""

    def __init__(self, controls: Mapping[str, Widget], *, panels: Mapping[str, HTML] | None = None) -> None:
        self.controls = dict(check_type("controls", controls, Mapping, "a dict of the view's widgets by name"))
        self.panels = dict(check_type("panels", {} if panels is None else panels, Mapping,
                                      "a dict of extra HTML panels by name, or None"))
        for name, control in self.controls.items():
            check_type(f"controls[{name!r}]", control, Widget, "an ipywidgets widget, e.g. IntSlider()")
        self.message = HTML()
        self.current: ExplorerView | None = None
        """The last good view: what stays on screen when the input is bad."""
        self.last_refresh_seconds = 0.0
        self.view_widget: ViewWidget | None = None
        self._shown: Widget | None = None
        self._quiet = False
        for name, control in self.controls.items():
            control.observe(partial(self._moved, name), names="value")
        self.refresh()

    # --- what subclasses say -----------------------------------------------------------------------------

    def view_data(self, **values) -> ExplorerView:
        """The view for these control values (one keyword per control), as plain data; ``ValueError`` if bad."""
        raise NotImplementedError

    def kernel_widgets(self) -> list[Widget]:
        """What only a running kernel can do, shown under the view in Jupyter (default: nothing)."""
        return []

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

    # --- the website's form (mha.views.payloads) ----------------------------------------------------

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

    def site_values(self) -> dict[str, object]:
        """Each control's value as the payload starts it (default: :meth:`values`)."""
        return self.values()

    def site_view(self, values: dict[str, object]) -> ExplorerView:
        """The view the payload stores for the site's control ``values`` (default: :meth:`view_data`)."""
        return self.view_data(**self.site_arguments(values))

    def site_payload(self) -> dict:
        """What the website's form needs (default: every reachable view, :func:`payloads.table_payload`)."""
        return payloads.table_payload(self)

    def page_model(self) -> dict | None:
        """What the website needs to run a model in the reader's page for this view, or None (the default): only
        the website's form uses it; in Jupyter the kernel runs the model."""
        return None

    def guidance(self) -> str:
        """What to try and what to notice, as plain text."""
        return f"Try: {self.what_to_try} Notice: {self.what_to_notice}"

    @contextmanager
    def quietly(self) -> Iterator[None]:
        """Move controls in code without each move redrawing the view."""
        quiet, self._quiet = self._quiet, True
        try:
            yield
        finally:
            self._quiet = quiet

    def _updates(self, view: ExplorerView) -> list[tuple[Widget, str, object]]:
        """(widget, trait, new value) for the message and every panel the view fills."""
        return [(self.message, "value", view.message),
                *((self.panels[name], "value", value) for name, value in view.panels.items())]

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
            self.current = view
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

    # --- in Jupyter ----------------------------------------------------------------------------------------

    def payload(self) -> str:
        """The encoded payload of this view as it stands, for :class:`~mha.views.widget.ViewWidget`."""
        return payloads.encode_payload(payloads.site_payload(self, hosted=True))

    @property
    def widget(self) -> Widget:
        """What a notebook shows: the view, drawn by ``views.js``, and under it :meth:`kernel_widgets`."""
        if self._shown is None:
            self.view_widget = ViewWidget(payload=self.payload())
            self._shown = VBox([self.view_widget, *self.kernel_widgets()])
        return self._shown

    def publish(self) -> None:
        """Send the view on screen a new payload, after the kernel changed what it can show (typing, training)."""
        if self.view_widget is not None:
            self.view_widget.payload = self.payload()

    def _repr_mimebundle_(self, **kwargs):
        return payloads.notebook_bundle(self, self.widget, **kwargs)
