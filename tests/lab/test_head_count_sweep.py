"""mha.lab.head_count_sweep: attention shares, head roles, answer parts, curve thresholds, the shipped study."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha.lab.head_count_study import best_learning_rates, load_study
from mha.lab.head_count_sweep import (
    ROLES,
    analysis_batch,
    answer_part_accuracy,
    answer_parts,
    ask_attention_override,
    fact_attention_by,
    first_step_below,
    head_role,
    previous_positions,
    relation_shares,
    token_names,
    train_two_relation_model,
)
from mha.lab.tasks import TwoRelationTask
from mha.lab.training import TrainingConfig

torch.set_num_threads(1)
TASK = TwoRelationTask()


def one_hot_maps(batch, targets):
    """(batch, 1, seq, seq) maps whose row i puts all weight on targets[b, i] (or on i itself if -1)."""
    seq = targets.shape[1]
    weights = torch.zeros(batch, 1, seq, seq)
    for b in range(batch):
        for i in range(seq):
            weights[b, 0, i, targets[b, i] if targets[b, i] >= 0 else i] = 1.0
    return weights


def test_a_head_on_the_fact_and_a_head_on_the_previous_token_score_one_each():
    batch = TASK.sample(4, 0)
    fact_position = batch.details["fact_position"]
    to_fact = one_hot_maps(4, fact_position)
    to_previous = one_hot_maps(4, previous_positions(fact_position))
    shares = relation_shares(torch.cat([to_fact, to_previous], dim=1), fact_position)  # (2 heads, 3)
    torch.testing.assert_close(shares, torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))


def test_shares_sum_to_one_and_a_half_split_head_scores_half_each():
    batch = TASK.sample(3, 1)
    fact_position = batch.details["fact_position"]
    split = 0.5 * one_hot_maps(3, fact_position) + 0.5 * one_hot_maps(3, previous_positions(fact_position))
    shares = relation_shares(split, fact_position)
    torch.testing.assert_close(shares, torch.tensor([[0.5, 0.5, 0.0]]))
    random = torch.rand(3, 4, TASK.seq_len, TASK.seq_len).softmax(-1)
    torch.testing.assert_close(relation_shares(random, fact_position).sum(-1), torch.ones(4))


def test_fact_attention_by_key_splits_the_fact_share_by_the_key_asked():
    batch = TASK.sample(64, 4)
    fact_position = batch.details["fact_position"]
    on_fact = one_hot_maps(64, fact_position)  # (batch, 1, seq, seq)
    by_key = fact_attention_by(on_fact, batch, TASK)
    torch.testing.assert_close(by_key, torch.ones(1, TASK.n_keys))
    torch.testing.assert_close(fact_attention_by(on_fact, batch, TASK, by="value"), torch.ones(1, TASK.n_values))
    # a head that finds the fact only when key 3 is asked
    rows, queries = torch.nonzero(fact_position >= 0, as_tuple=True)
    asked = batch.inputs[rows, queries] - TASK.first_ask
    picky = one_hot_maps(64, torch.full_like(fact_position, -1))  # every row on itself
    picky[rows[asked == 3], 0, queries[asked == 3]] = 0.0
    picky[rows[asked == 3], 0, queries[asked == 3], fact_position[rows[asked == 3], queries[asked == 3]]] = 1.0
    expected = torch.zeros(1, TASK.n_keys)
    expected[0, 3] = 1.0
    torch.testing.assert_close(fact_attention_by(picky, batch, TASK, by="key"), expected)
    with pytest.raises(ValueError, match="by must be"):
        fact_attention_by(picky, batch, TASK, by="modifier")


def test_ask_attention_override_puts_the_weight_where_asked():
    batch = TASK.sample(5, 6)
    fact_position = batch.details["fact_position"]
    weights = torch.rand(5, 2, TASK.seq_len, TASK.seq_len).softmax(-1)
    for fact_weight in (0.0, 0.3, 1.0):
        new = ask_attention_override(fact_position, fact_weight)(weights)
        shares = relation_shares(new, fact_position)
        torch.testing.assert_close(shares, torch.tensor([[fact_weight, 1 - fact_weight, 0.0]] * 2))
        not_ask = fact_position < 0
        torch.testing.assert_close(new.transpose(1, 2)[not_ask], weights.transpose(1, 2)[not_ask])
    with pytest.raises(ValueError, match="between 0 and 1"):
        ask_attention_override(fact_position, 1.5)


def test_ask_attention_override_can_keep_each_heads_own_split():
    batch = TASK.sample(4, 7)
    fact_position = batch.details["fact_position"]
    rows, queries = torch.nonzero(fact_position >= 0, as_tuple=True)
    weights = torch.rand(4, 3, TASK.seq_len, TASK.seq_len).softmax(-1)
    new = ask_attention_override(fact_position, None)(weights)
    own_ratio = weights[rows, :, queries, fact_position[rows, queries]] / (
        weights[rows, :, queries, fact_position[rows, queries]] + weights[rows, :, queries, queries - 1])
    torch.testing.assert_close(new[rows, :, queries, fact_position[rows, queries]], own_ratio)
    torch.testing.assert_close(new.sum(-1), torch.ones(4, 3, TASK.seq_len))


def test_previous_positions_only_at_ask_positions():
    fact_position = torch.tensor([[-1, -1, 0, -1, 1]])
    assert previous_positions(fact_position).tolist() == [[-1, -1, 1, -1, 3]]


@pytest.mark.parametrize("fact, previous, role", [(0.9, 0.05, "fact"), (0.5, 0.5, "fact"), (0.02, 0.97, "previous"),
                                                  (0.47, 0.49, "split"), (0.2, 0.2, "split"), (0.19, 0.6, "previous"),
                                                  (0.1, 0.3, "other"), (0.0, 0.0, "other")])
def test_head_role_labels(fact, previous, role):
    assert head_role(fact, previous) == role
    assert role in ROLES


def test_head_role_thresholds_move_the_labels_and_are_checked():
    assert head_role(0.44, 0.45) == "split"
    assert head_role(0.44, 0.45, role_threshold=0.3) == "fact"  # a lower bar: the fact share passes first
    assert head_role(0.6, 0.3, role_threshold=0.7) == "split"
    with pytest.raises(ValueError, match="split_threshold <= role_threshold"):
        head_role(0.5, 0.5, role_threshold=0.1, split_threshold=0.2)


def test_answer_parts_separates_value_and_modifier():
    first = TASK.first_answer
    # n_modifiers = 4, so answer (v, m) is first + 4 v + m
    target = torch.tensor([first + 4 * 4 + 1, first + 0, first + 31])  # (v4, m1), (v0, m0), (v7, m3)
    predicted = torch.tensor([first + 4 * 4 + 2, first + 1 * 4 + 0, 5])  # right v wrong m; wrong v right m; a fact
    parts = answer_parts(predicted, target, TASK)
    assert parts == pytest.approx({"value": 1 / 3, "modifier": 1 / 3, "both": 0.0})
    assert answer_parts(target, target, TASK) == {"value": 1.0, "modifier": 1.0, "both": 1.0}
    with pytest.raises(ValueError, match="same"):
        answer_parts(target[:2], target, TASK)


def test_answer_part_accuracy_reads_the_ask_positions_of_a_batch():
    batch = TASK.sample(8, 2)
    perfect = torch.nn.functional.one_hot(batch.targets.clamp(min=0), TASK.vocab_size).float()  # (batch, seq, vocab)
    assert answer_part_accuracy(perfect, batch, TASK) == {"value": 1.0, "modifier": 1.0, "both": 1.0}


def test_first_step_below():
    assert first_step_below([0, 100, 200, 300], [3.0, 0.4, 0.9, 0.1], 0.5) == 100
    assert first_step_below([0, 100], [3.0, 2.0], 0.5) is None
    assert first_step_below([0, 100], [3.0, 0.5], 0.5) == 100
    with pytest.raises(ValueError, match="one loss per step"):
        first_step_below([0, 100], [1.0], 0.5)


def test_token_names_decode_a_sequence():
    batch = TASK.sample(1, 3)
    names = token_names(TASK, batch.inputs[0].tolist())
    assert len(names) == TASK.seq_len
    assert all("=" in name for name in names[:TASK.n_facts])
    assert names[TASK.n_facts].startswith("m") and names[TASK.n_facts + 1].startswith("ask k")
    assert token_names(TASK, [TASK.first_answer + 4 * 5 + 3]) == ["v5·m3"]
    with pytest.raises(ValueError, match="outside"):
        token_names(TASK, [TASK.vocab_size])


def test_analysis_batch_is_fixed_by_the_seed():
    a, b = analysis_batch(TASK, 1), analysis_batch(TASK, 1)
    assert torch.equal(a.inputs, b.inputs) and a.inputs.shape == (256, TASK.seq_len)
    assert not torch.equal(a.inputs, analysis_batch(TASK, 2).inputs)


@pytest.mark.slow
def test_train_two_relation_model_reports_progress():
    sweep_task = TwoRelationTask()
    from mha.lab.tiny_model import TinyTransformerConfig

    config = TinyTransformerConfig(vocab_size=sweep_task.vocab_size, max_seq_len=sweep_task.seq_len, d_model=32,
                                   n_layers=1, n_heads=4)
    seen = []
    model, log = train_two_relation_model(
        config,
        sweep_task,
        TrainingConfig(steps=40, log_every=20, eval_batch_size=32),
        on_log=lambda step, model, log: seen.append(step),
    )
    assert seen == [20, 40] and [row["step"] for row in log.rows] == [0, 20, 40]
    assert not model.training


# --- the shipped study: its saved models ----------------------------------------------------------

@pytest.fixture(scope="module")
def study():
    return load_study()


def test_study_saved_every_head_count_from_every_seed_at_one_parameter_count_and_its_chosen_rate(study):
    assert set(study.head_counts) >= {1, 2, 4, 8, 16, 32}
    assert len(study.seeds) >= 5
    assert len({run["parameters"] for run in study.runs}) == 1
    assert best_learning_rates(study, 0.999) == study.chosen_learning_rates  # the choice is reproduced from the file
    assert len(study.checkpoints) == len(study.head_counts) * len(study.seeds)


@pytest.mark.parametrize("n_heads, seed, words", [(3, 0, "does not divide d_model = 32"), (64, 0, "does not divide"),
                                                  ("4", 0, "whole number"), (4, 99, "no run with seed 99")])
def test_study_explains_models_that_do_not_exist(study, n_heads, seed, words):
    with pytest.raises(ValueError, match=words):
        study.model(n_heads, seed)


def test_study_curves_role_curves_and_checkpoints_agree(study):
    rate = study.chosen_learning_rates[4]
    steps, accuracy = study.curves(4, rate)
    longest = max(study.chosen_run(4, seed)["steps_trained"] for seed in study.seeds)
    assert accuracy.shape == (len(study.seeds), len(steps)) and steps[-1] == longest
    run = study.chosen_run(4, study.seeds[0])
    stopped = run["curve"]["step"].index(run["steps_trained"])
    assert run["stopped"] == "solved" and np.all(accuracy[0, stopped:] == run["curve"]["held_out"][-1])
    model = study.model(4, study.seeds[0])
    assert model.config.n_heads == 4 and model.config.d_model == study.d_model
    batch = analysis_batch(study.task, study.seeds[0])
    with torch.no_grad():
        shares = relation_shares(model(batch.inputs).attention_weights[0], batch.details["fact_position"])
    roles = study.role_curves(4, rate, study.seeds[0])
    assert roles["fact"].shape == (len(roles["step"]), 4) and roles["step"][-1] == run["steps_trained"]
    np.testing.assert_allclose(shares[:, 0].numpy(), roles["fact"][-1], atol=1e-4)  # the saved weights are the last


# The fair study: steps to solve, bootstrap medians, learning rates chosen on validation only.

from mha.core.survival import kaplan_meier, restricted_mean_survival_time  # noqa: E402
from mha.lab.head_count_study import (  # noqa: E402
    STOP_REASONS,
    HeadCountStudy,
    accuracy_at,
    arm_survival,
    median_interval,
    restricted_mean_interval,
    solve_times,
    steps_to_solve,
    study_from_content,
)


def study_record(n_heads, rate, seed, validation, held_out, every=50):
    steps = [every * (i + 1) for i in range(len(validation))]
    return {"n_heads": n_heads, "learning_rate": rate, "seed": seed,
            "curve": {"step": steps, "validation": validation, "held_out": held_out}}


def test_steps_to_solve_reads_the_chosen_split_and_marks_censored_runs_inf():
    record = study_record(1, 1e-3, 0, [0.5, 0.999, 1.0], [0.5, 0.9, 0.9995])
    assert steps_to_solve(record, 0.999, "validation") == 100
    assert steps_to_solve(record, 0.999, "held_out") == 150
    assert steps_to_solve(record, 0.9999, "held_out") == float("inf")
    assert accuracy_at(record, 100, "held_out") == 0.9
    with pytest.raises(ValueError, match="split must be"):
        steps_to_solve(record, 0.999, "test")
    with pytest.raises(ValueError, match="threshold"):
        steps_to_solve(record, 99.9)
    with pytest.raises(ValueError, match="not logged"):
        accuracy_at(record, 75)


def test_median_interval_is_the_median_with_an_interval_around_it_and_censoring_counts_as_slowest():
    median, low, high = median_interval([300.0, 100.0, 200.0, 500.0, 400.0])
    assert median == 300.0 and 100.0 <= low <= median <= high <= 500.0
    assert median_interval([1.0, 2.0, float("inf"), float("inf"), float("inf")])[0] == float("inf")
    assert median_interval([7.0] * 5) == (7.0, 7.0, 7.0)
    with pytest.raises(ValueError, match="non-empty"):
        median_interval([])


def test_best_learning_rate_is_chosen_on_validation_and_never_on_the_held_out_batch():
    fast, slow = [0.5, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 1.0]
    runs = []
    for seed in (0, 1, 2):
        # rate 0.01 looks fast on validation but slow on the held-out batch; the choice must not peek at the latter
        runs.append(study_record(2, 0.01, seed, fast, slow))
        runs.append(study_record(2, 0.001, seed, slow, fast))
        runs.append(study_record(1, 0.01, seed, [0.1] * 4, [0.1] * 4))  # never solved: tie broken by accuracy
        runs.append(study_record(1, 0.001, seed, [0.2] * 4, [0.2] * 4))
        # h = 4: every median censored; 0.01 solves one seed of three, 0.001 none (but is more accurate early)
        runs.append(study_record(4, 0.01, seed, [0.1, 0.1, 0.1, 1.0 if seed == 0 else 0.1], [0.1] * 4))
        runs.append(study_record(4, 0.001, seed, [0.5] * 4, [0.5] * 4))
    study = HeadCountStudy(head_counts=(1, 2, 4), learning_rates=(0.001, 0.01), seeds=(0, 1, 2), thresholds=(0.999,),
                           min_steps=100, max_steps=200, runs=tuple(runs), controls={})
    assert best_learning_rates(study, 0.999) == {1: 0.001, 2: 0.01, 4: 0.01}
    with pytest.raises(ValueError, match="no run with h = 8"):
        study.run(8, 0.01, 0)


def test_solve_times_censor_an_unsolved_run_where_it_stopped():
    solved = study_record(1, 0.01, 0, [0.5, 1.0, 1.0], [0.5, 0.9, 1.0])
    stalled = study_record(1, 0.01, 1, [0.1] * 5, [0.1] * 5)
    times, observed = solve_times([solved, stalled], 0.999)
    assert times.tolist() == [150.0, 250.0] and observed.tolist() == [True, False]
    study = HeadCountStudy(head_counts=(1,), learning_rates=(0.01,), seeds=(0, 1), thresholds=(0.999,), min_steps=50,
                           max_steps=300, runs=(solved, stalled), controls={})
    curve = arm_survival(study, 1, 0.01, 0.999)
    assert curve.times.tolist() == [150.0] and curve.survival.tolist() == [0.5] and curve.last_censored


def test_the_rate_is_chosen_by_the_restricted_mean_and_the_horizon_can_move_the_choice():
    runs = []
    for seed in range(5):
        # 0.01: two seeds solve at step 50, three stall (censored at 250); 0.001: every seed solves at step 200
        runs.append(study_record(1, 0.01, seed, [1.0] * 5 if seed < 2 else [0.1] * 5, [0.1] * 5))
        runs.append(study_record(1, 0.001, seed, [0.5, 0.5, 0.5, 1.0, 1.0], [0.1] * 5))
    for run in runs:  # solved runs stop at the first solved step after min_steps = 50
        if run["curve"]["validation"][-1] == 1.0:
            end = next(i for i, a in enumerate(run["curve"]["validation"]) if a == 1.0) + 1
            run["curve"] = {key: values[:max(end, 2)] for key, values in run["curve"].items()}
    study = HeadCountStudy(head_counts=(1,), learning_rates=(0.001, 0.01), seeds=tuple(range(5)), thresholds=(0.999,),
                           min_steps=50, max_steps=1000, runs=tuple(runs), controls={})
    # by hand: up to 400 steps, 0.01 has mean 2/5 * 50 + 3/5 * 400 = 260 (S held at 3/5 after its last run) and
    # 0.001 has 200; up to 150 steps, 0.01 has 2/5 * 50 + 3/5 * 150 = 110 and 0.001 has 150
    assert best_learning_rates(study, 0.999, horizon=400) == {1: 0.001}
    assert best_learning_rates(study, 0.999, horizon=150) == {1: 0.01}
    for rate, horizon, by_hand in ((0.01, 400, 260.0), (0.001, 400, 200.0), (0.01, 150, 110.0)):
        curve = arm_survival(study, 1, rate, 0.999, split="validation")
        assert restricted_mean_survival_time(curve, horizon) == pytest.approx(by_hand)
    assert kaplan_meier([50.0, 50.0, 250.0, 250.0, 250.0], [True, True, False, False, False]).survival.tolist() == [0.6]


def test_the_restricted_mean_interval_resamples_the_runs():
    from mha.core.resampling import bootstrap_indices

    solved_at = [2, 3, 3, 5, 8]  # in logged steps of 50; nothing censored, so each mean is a plain mean
    records = [study_record(1, 0.01, seed, [0.1] * (k - 1) + [1.0], [0.1] * (k - 1) + [1.0])
               for seed, k in enumerate(solved_at)]
    capped = np.minimum(np.array(solved_at) * 50.0, 300.0)  # min(steps to solve, horizon)
    estimate, low, high = restricted_mean_interval(records, 0.999, horizon=300, n_resamples=500, seed=3)
    oracle = capped[bootstrap_indices(5, 500, 3)].mean(axis=1)  # (500,): the mean of each resample
    assert estimate == pytest.approx(capped.mean())
    assert (low, high) == pytest.approx(tuple(np.quantile(oracle, [0.025, 0.975])))
    same = [study_record(1, 0.01, seed, [0.1, 1.0], [0.1, 1.0]) for seed in range(4)]
    assert restricted_mean_interval(same, 0.999, horizon=300) == pytest.approx((100.0, 100.0, 100.0))


def shipped_content():
    from mha.lab.checkpoints import load_json
    from mha.lab.head_count_study import STUDY_FILE

    return load_json(STUDY_FILE)


@pytest.mark.parametrize("change, words", [
    (lambda run: run.pop("stopped"), "does not say why it stopped"),
    (lambda run: run.update(stopped="tired"), "does not say why it stopped"),
    (lambda run: run.update(n_heads=3), "disagrees with its header"),
    (lambda run: run.update(seed=99), "disagrees with its header"),
    (lambda run: run.update(learning_rate=0.5), "disagrees with its header"),
    (lambda run: run.update(stopped="plateau" if run["stopped"] == "solved" else "solved"), "says it stopped"),
    (lambda run: run.update(steps_trained=run["steps_trained"] + 50), "steps_trained"),
])
def test_a_run_without_its_stopping_reason_or_at_odds_with_the_header_is_refused(change, words):
    content = shipped_content()
    change(content["runs"][0])
    with pytest.raises(ValueError, match=words) as error:
        study_from_content(content)
    assert "run 0" in str(error.value) and "python -m scripts.train_head_count_study" in str(error.value)


def test_a_report_seed_at_a_rate_that_was_not_chosen_is_refused():
    content = shipped_content()
    report = next(run for run in content["runs"] if run["seed"] in content["report_seeds"])
    report["learning_rate"] = next(rate for rate in content["learning_rates"]
                                   if rate != content["models"]["learning_rates"][str(report["n_heads"])])
    with pytest.raises(ValueError, match="report seed at a rate that was not chosen"):
        study_from_content(content)


def test_the_shipped_study_trained_every_arm_at_every_rate_from_every_seed():
    study = load_study()
    assert len(study.learning_rates) >= 3 and len(study.seeds) >= 5 and 1 in study.head_counts
    incomplete = {(arm["n_heads"], arm["learning_rate"]): arm for arm in study.incomplete if not arm.get("report")}
    assert all(arm["why"] for arm in study.incomplete)  # a gap in the grid must say why
    for n_heads in study.head_counts:
        assert any((n_heads, rate) not in incomplete for rate in study.learning_rates)
        for rate in study.learning_rates:
            seeds = study.seeds_trained(n_heads, rate)
            assert set(seeds) == set(study.seeds) or set(seeds) == set(incomplete[(n_heads, rate)]["seeds"])
            for seed in seeds:
                run = study.run(n_heads, rate, seed)
                curve = run["curve"]
                assert study.min_steps <= curve["step"][-1] < study.max_steps  # no run met the safety cap
                solved = min(curve["validation"][-1], curve["held_out"][-1]) >= max(study.thresholds)
                assert run["stopped"] == ("solved" if solved else "plateau")
                if not solved:  # the plateau rule, read again from the stored curve: no gain over the window
                    window, gain = study.plateau["window"], study.plateau["gain"]
                    before = [a for t, a in zip(curve["step"], curve["validation"], strict=True)
                              if t <= curve["step"][-1] - window]
                    assert max(curve["validation"]) - max(before) < gain
                    earlier = [i for i, t in enumerate(curve["step"]) if study.min_steps <= t < curve["step"][-1]]
                    for i in earlier:  # and it did not hold at any earlier measurement
                        seen = [a for t, a in zip(curve["step"][:i + 1], curve["validation"], strict=False)
                                if t <= curve["step"][i] - window]
                        assert not seen or max(curve["validation"][:i + 1]) - max(seen) >= gain
    missing = {arm["n_heads"]: set(arm["seeds"]) for arm in study.incomplete if arm.get("report")}
    for n_heads, rate in study.chosen_learning_rates.items():  # the report seeds: at the chosen rate only
        report = {run["seed"] for run in study.runs if run["n_heads"] == n_heads and run["seed"] not in study.seeds}
        assert report == (missing[n_heads] if n_heads in missing else set(study.report_seeds))
        assert all(study.run(n_heads, rate, seed)["stopped"] in STOP_REASONS for seed in report)
    assert not set(study.seeds) & set(study.report_seeds) and len(study.report_seeds) >= 5
    variants = {run["variant"] for run in study.controls["runs"]}
    assert variants == {"shared", "typed", "one_relation"}
    one_head_shared = [run for run in study.controls["runs"] if run["variant"] == "shared" and run["model"] == "1 head"]
    assert all(run["attention_to_first"] + run["attention_to_second"] <= 1.0 + 1e-6 for run in one_head_shared)


def test_equal_split_ceiling_counts_the_pairs_an_even_blend_cannot_order():
    from mha.lab.head_count_sweep import equal_split_ceiling

    assert equal_split_ceiling(8) == 1 / 8 + 7 / 16
    assert equal_split_ceiling(1) == 1.0 and equal_split_ceiling(2) == 0.75
    with pytest.raises(ValueError, match="whole number"):
        equal_split_ceiling(0)


@pytest.mark.parametrize("call, words", [
    (lambda: head_role(2.5, 2.5), r"fact_share must be a share between 0 and 1.*got 2.5"),
    (lambda: head_role(0.1, -0.3), r"prev_token_share must be a share between 0 and 1"),
    (lambda: head_role(float("nan"), 0.9), r"fact_share must be a finite number.*not finite"),
    (lambda: head_role(0.5, 0.5, role_threshold=1.5), r"role_threshold must be a share between 0 and 1"),
    (lambda: head_role(0.5, 0.5, split_threshold=float("nan")), r"split_threshold must be a finite number"),
    (lambda: ask_attention_override(torch.tensor([[-1, 0]]), float("nan")), r"fact_weight must be a finite number"),
    (lambda: ask_attention_override(torch.tensor([[-1, 0]]), 1.5), r"fact_weight must be a share between 0 and 1"),
    (lambda: first_step_below([1, 2], [0.5, 0.1], float("nan")), r"threshold must be a finite number"),
])
def test_shares_outside_0_to_1_and_nan_are_refused_not_labelled(call, words):
    """A share of attention lies in [0, 1]: 2.5 was labelled "fact" and NaN "other"; a NaN threshold was never
    reached. Each is refused, naming the argument."""
    from mha.core.validation import InputError

    with pytest.raises(InputError, match=words):
        call()


def test_a_share_rounded_just_past_1_is_still_a_share():
    assert head_role(float(torch.tensor([0.6, 0.4000001]).sum()), 0.0) == "fact"
