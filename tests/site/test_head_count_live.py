"""Section 3.7's "train live" on the website: the reader types a head count and trains a model in the page.

The page of the built site (``built_site``) is opened in headless Chromium, served and from file://, with the
harness of test_site_views.py (every request outside the site refused and reported, every console error kept).
trainer.js is not part of the page until a run starts; a head count that is not a number or does not divide
d_model gets the notebook's own message (mha.views.head_count_explorer.parse_head_count, the oracle) before anything
loads, and the view stays as it was; a run of 4 heads trains to the end and is shown as a stored run is (its map,
its share table with roles, its curve beside the stored seeds'), and ends where PyTorch's runs of the notebook's
LIVE_TRAINING at the same config end (held-out loss inside the PyTorch runs' spread, widened by that spread;
accuracy at least theirs; the head roles they reach); Cancel stops a run and keeps the view.
"""

from __future__ import annotations

import re

import pytest
import torch
from conftest import POLL
from test_site_views import SECONDS, browser, checked, open_page, tabs  # noqa: F401 (fixtures)

from mha.lab.head_count_study import load_study
from mha.lab.head_count_sweep import head_role, relation_shares, train_two_relation_model
from mha.lab.training import TrainingConfig
from mha.views.head_count_explorer import LIVE_TRAINING, parse_head_count

PAGE = "chapters/3_head_roles/7_one_head_or_many.html"
RUN_TIMEOUT = 20 * 60 * SECONDS  # a whole run, on a busy machine (a hang detector, not a timing)
FINISHED = "(v) => /Trained|Cannot train|Cancelled/.test(v.querySelector('.mha-training-result').textContent)"
LOADED = "() => typeof globalThis.mhaTrainer === 'object'"
VIEW = ".mha-view:has(input[name=train_heads])"
BAD_COUNTS = ["3", "1.5", "0", "-4", "four", "<img src=x onerror=alert(1)>", "</script><b>8</b>"]
N_HEADS = 4
SEED = 0


@pytest.fixture(scope="module")
def pytorch_runs() -> list[dict]:
    """PyTorch's runs of LIVE_TRAINING with N_HEADS heads, seeds 0-2: final held-out loss, accuracy, head roles."""
    study, runs = load_study(), []
    for seed in range(3):
        training = TrainingConfig(**{**LIVE_TRAINING.to_dict(), "seed": seed})
        model, log = train_two_relation_model(study.config(N_HEADS), study.task, training, seed=seed)
        batch = study.task.sample(256, 10_000 + seed)
        with torch.no_grad():
            shares = relation_shares(model(batch.inputs).attention_weights[0], batch.details["fact_position"])
        runs.append({"loss": log.rows[-1]["loss"], "accuracy": log.rows[-1]["accuracy"],
                     "roles": {head_role(float(f), float(p)) for f, p, _ in shares}})
    return runs


def refuses_bad_counts(page, view) -> None:
    before = view.evaluate("(v) => v.querySelector('.mha-message').innerHTML + v.querySelector('.mha-picture')"
                           ".innerHTML")
    for text in BAD_COUNTS:
        with pytest.raises(ValueError) as expected:
            parse_head_count(text, load_study().d_model)
        view.locator("input[name=train_heads]").fill(text)
        view.locator("button.mha-train").click()
        assert view.locator(".mha-training-result").inner_text() == f"Cannot train this: {expected.value}", text
    assert not page.page.evaluate(LOADED), "a refused head count loaded the trainer"
    assert view.locator(".mha-training-result b").count() == 1  # typed markup is shown as text
    after = view.evaluate("(v) => v.querySelector('.mha-message').innerHTML + v.querySelector('.mha-picture')"
                          ".innerHTML")
    assert after == before, "a refused head count changed the view"


def train_live(page, view, n_heads: int) -> str:
    view.locator("select[name=seed]").select_option(index=SEED)
    view.locator("input[name=train_heads]").fill(str(n_heads))
    view.locator("button.mha-train").click()
    page.page.wait_for_function(FINISHED, arg=view.element_handle(), timeout=RUN_TIMEOUT, polling=10 * POLL)
    return view.locator(".mha-training-result").inner_text()


def check_the_run(page, view, pytorch_runs) -> None:
    assert not page.page.evaluate(LOADED), "trainer.js was loaded before the reader asked"
    assert page.page.locator("script[src$='trainer.js']").count() == 0
    refuses_bad_counts(page, view)
    result = train_live(page, view, N_HEADS)
    assert result.startswith(f"Trained h = {N_HEADS}, seed {SEED}"), result
    message = view.locator(".mha-message").inner_text()
    found = re.search(r"held-out loss ([0-9.e+-]+), accuracy ([0-9.]+)%", message)
    assert message.startswith("The model you trained in your page") and found, message
    loss, accuracy = float(found.group(1)), float(found.group(2)) / 100
    losses = [run["loss"] for run in pytorch_runs]
    spread = max(losses) / min(losses)  # PyTorch's own spread over seeds, as a factor
    assert min(losses) / spread <= loss <= max(losses) * spread, (loss, losses)
    assert accuracy >= min(run["accuracy"] for run in pytorch_runs) - 1 / 1024, (accuracy, pytorch_runs)
    roles = view.locator(".mha-live-role").all_inner_texts()
    assert len(roles) == N_HEADS
    if all({"fact", "previous"} <= run["roles"] for run in pytorch_runs):
        assert {"fact", "previous"} <= set(roles), roles
    # shown as a stored run is: a map of each head, the curve beside the stored seeds'
    assert view.locator("input[name=head]").get_attribute("max") == str(N_HEADS - 1)
    assert f"head 0 of {N_HEADS}, held-out sequence 0" in view.locator(".mha-picture").inner_text()
    points = view.locator("polyline.mha-live-loss").get_attribute("points").split()
    assert len(points) == LIVE_TRAINING.steps // LIVE_TRAINING.log_every + 1
    assert view.locator(".mha-live-curves polyline").count() == len(load_study().seeds) + 1
    assert "of PyTorch's" in view.locator(".mha-fidelity").inner_text()
    assert view.locator(".mha-training-status").is_hidden(), "the progress stays after the run"
    assert not page.problems, "\n".join(page.problems)


def test_a_reader_trains_a_head_count_in_the_served_page_and_can_cancel(open_page, pytorch_runs):
    page = open_page(PAGE)
    view = page.page.locator(VIEW)

    def test():
        check_the_run(page, view, pytorch_runs)
        view.locator("select[name=seed]").select_option(index=1)  # a stored run: the live one goes
        assert not view.locator(".mha-message").inner_text().startswith("The model you trained")
        before = view.locator(".mha-message").inner_html()
        view.locator("input[name=train_heads]").fill("32")
        view.locator("button.mha-train").click()
        page.page.wait_for_function("(v) => /step [1-9]/.test(v.querySelector('.mha-training-status').textContent)",
                                    arg=view.element_handle(), timeout=RUN_TIMEOUT, polling=POLL)
        view.locator(".mha-loading button").click()
        page.page.wait_for_function(FINISHED, arg=view.element_handle(), timeout=60 * SECONDS, polling=POLL)
        assert view.locator(".mha-training-result").inner_text().startswith("Cancelled")
        assert view.locator(".mha-message").inner_html() == before, "a cancelled run changed the view"
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_reader_trains_a_head_count_in_the_page_opened_from_disk(open_page, built_site, pytorch_runs):
    page = open_page(PAGE, site=built_site.as_uri() + "/")
    checked(page, lambda: check_the_run(page, page.page.locator(VIEW), pytorch_runs))


def test_the_page_does_not_carry_the_trainer(built_site):
    """The page links views.js only: trainer.js is added when a run starts."""
    text = (built_site / PAGE).read_text()
    assert "_vendor/mha/views.js" in text and "trainer.js" not in text
