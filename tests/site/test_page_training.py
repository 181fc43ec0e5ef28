"""Section 3.5's "Train one in your page": the reader trains the tiny induction model in the browser.

The page of the built site (``built_site``) is opened in headless Chromium, served and from file://, with the
harness of test_site_views.py (every request outside the site refused and reported, every console error kept).
trainer.js is not part of the page until the button is pressed; a bad seed is refused before anything loads; one
run of seed 0 per mode trains to the end, its curve is drawn on the view's chart, and its formation step lies
within the spread of the package's own (PyTorch) runs of the same setting, read here from the lab's record
(data/lab/web_trainer_spread.json, written by scripts/web_trainer_spread.py).
"""

from __future__ import annotations

import re

from conftest import POLL
from test_site_views import SECONDS, TIMELINE, browser, checked, open_page, tabs  # noqa: F401 (fixtures)

from mha.lab.checkpoints import load_json

RUN_TIMEOUT = 20 * 60 * SECONDS  # a whole run, on a busy machine (a hang detector, not a timing)
FINISHED = "(v) => /formed|did not form|Cannot train/.test(v.querySelector('.mha-training-result').textContent)"
LOADED = "() => typeof globalThis.mhaTrainer === 'object'"


def kernel_spread() -> tuple[int, int, int]:
    """The package's runs of the page's setting: how many seeds, and their earliest and latest formation steps."""
    study = load_json("web_trainer_spread.json")
    steps = [run["formation_step"] for run in study["kernel_runs"] if run["formed"]]
    return len(study["kernel_runs"]), min(steps), max(steps)


def train_in_page(page, view) -> str:
    """Press the button with seed 0, wait for the run to end; the result line."""
    view.locator("input[name=seed]").fill("0")
    view.locator("button.mha-train").click()
    page.page.wait_for_function(FINISHED, arg=view.element_handle(), timeout=RUN_TIMEOUT, polling=10 * POLL)
    return view.locator(".mha-training-result").inner_text()


def check_the_run(page, view) -> None:
    seeds, earliest, latest = kernel_spread()
    assert not page.page.evaluate(LOADED), "trainer.js was loaded before the reader asked"
    assert page.page.locator("script[src$='trainer.js']").count() == 0
    view.locator("input[name=seed]").fill("1.5")
    view.locator("button.mha-train").click()
    refused = view.locator(".mha-training-result").inner_text()
    assert "whole number" in refused and "1.5" in refused, refused
    assert not page.page.evaluate(LOADED), "a refused seed loaded the trainer"
    assert view.locator("polyline.mha-your-loss").count() == 0

    result = train_in_page(page, view)
    match = re.search(r"formed an induction head at step (\d+)", result)
    assert match, result
    formed = int(match.group(1))
    assert earliest <= formed <= latest, f"formed at step {formed}, outside the kernel's {earliest}-{latest}"
    assert f"between step {earliest} and {latest}" in result and f"{seeds} PyTorch runs" in result, result
    # the reader's curve: one point per scored row, from step 0 to the formation step every 20 steps
    points = view.locator("polyline.mha-your-loss").get_attribute("points").split()
    assert len(points) == formed // 20 + 1, (len(points), formed)
    scores = view.locator("polyline.mha-your-score").get_attribute("points").split()
    assert len(scores) == len(points)
    assert "your run" in view.locator(".mha-curve-legend").text_content()
    assert "1e−4 of PyTorch's" in view.locator(".mha-fidelity").inner_text()
    assert view.locator(".mha-training-status").is_hidden(), "the progress stays after the run"
    assert not page.problems, "\n".join(page.problems)


def test_the_page_does_not_carry_the_trainer(built_site):
    """trainer.js lies beside views.js, and the page links only views.js: it grows by no byte of the trainer."""
    assert (built_site / "_vendor" / "mha" / "trainer.js").stat().st_size > 10_000
    text = (built_site / TIMELINE).read_text()
    assert "_vendor/mha/views.js" in text and "trainer.js" not in text


def test_a_reader_trains_the_model_in_the_served_page_and_can_cancel(open_page):
    page = open_page(TIMELINE)
    view = page.views.first

    def test():
        check_the_run(page, view)
        view.locator("input[name=seed]").fill("1")
        view.locator("button.mha-train").click()
        page.page.wait_for_function("(v) => /step [1-9]/.test(v.querySelector('.mha-training-status').textContent)",
                                    arg=view.element_handle(), timeout=RUN_TIMEOUT, polling=POLL)
        view.locator(".mha-loading button").click()
        page.page.wait_for_function(FINISHED.replace("formed|", "Cancelled|formed|"), arg=view.element_handle(),
                                    timeout=60 * SECONDS, polling=POLL)
        assert re.fullmatch(r"Cancelled at step \d+; press the button to train again\.",
                            view.locator(".mha-training-result").inner_text())
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_reader_trains_the_model_in_the_page_opened_from_disk(open_page, built_site):
    page = open_page(TIMELINE, site=built_site.as_uri() + "/")
    checked(page, lambda: check_the_run(page, page.views.first))
