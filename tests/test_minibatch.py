import math

import pytest
import torch

from gpscale.train.minibatch import epoch_batches, make_generator, make_optimizer, run_minibatch


def test_epoch_batches_partition_every_row_once():
    batches = list(epoch_batches(103, 10, make_generator(3)))
    assert [len(b) for b in batches] == [10] * 10 + [3]
    assert torch.equal(torch.cat(batches).sort().values, torch.arange(103))


def test_loop_keeps_the_best_evaluated_iterate_and_counts_steps():
    # minimise (x - 1)^2 with noisy SGD steps; evaluation is the true objective
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = make_optimizer("sgd", [x], lr=0.3)
    seen = []

    def step(batch, t):
        opt.zero_grad()
        f = ((x - 1) ** 2).sum() + 0.0 * batch.sum()
        f.backward()
        opt.step()
        if t == 7:  # a bad jump the loop must not keep
            with torch.no_grad():
                x.add_(50.0)
        return float(f.detach())

    def evaluate():
        value = float(((x.detach() - 1) ** 2).sum())
        seen.append(value)
        return value

    res = run_minibatch(step, [x], n=20, batch_size=5, epochs=2, evaluate=evaluate,
                        eval_every=1, method="toy")
    assert res.n_evals == 8 and res.reason == "max_epochs"
    assert res.objective == min(seen) < 1e-3
    assert float(((x.detach() - 1) ** 2).sum()) == pytest.approx(res.objective)
    assert len(res.history) == 8 and all("objective" in h for h in res.history)


def test_divergence_stops_and_restores_best():
    x = torch.ones(1, dtype=torch.float64)

    def step(batch, t):
        if t == 3:
            x.fill_(math.nan)
        return 1.0

    res = run_minibatch(step, [x], n=10, batch_size=2, epochs=3, eval_every=1,
                        evaluate=lambda: float(x.sum()))
    assert res.reason == "diverged" and float(x) == 1.0


@pytest.mark.parametrize("kw, match", [({"batch_size": 0}, "batch_size"),
                                       ({"batch_size": 11}, "exceeds"),
                                       ({"epochs": 0}, "epochs")])
def test_bad_arguments_are_named(kw, match):
    args = {"batch_size": 2, "epochs": 1} | kw
    with pytest.raises(ValueError, match=match):
        run_minibatch(lambda b, t: None, [torch.zeros(1)], n=10, **args)


def test_unknown_optimizer_is_named():
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer("rmsprop", [torch.zeros(1, requires_grad=True)])


@pytest.mark.parametrize("schedule", ["constant", "cosine", "power"])
def test_learning_rate_schedule_scales_every_group(schedule):
    # two optimisers, one with two groups: each group's rate before step t is its own
    # initial rate times the schedule's factor at t of T = 12 planned steps
    a, b, c = (torch.zeros(1, requires_grad=True) for _ in range(3))
    opt1 = torch.optim.SGD([{"params": [a], "lr": 0.5}, {"params": [b], "lr": 0.2}])
    opt2 = make_optimizer("adam", [c], lr=0.1)
    seen = []

    def step(batch, t):
        seen.append([g["lr"] for g in opt1.param_groups] + [opt2.param_groups[0]["lr"]])
        return None

    res = run_minibatch(step, [a, b, c], n=12, batch_size=3, epochs=3,
                        optimizers=(opt1, opt2), lr_schedule=schedule)
    expected = {"constant": lambda t: 1.0,
                "cosine": lambda t: 0.5 * (1 + math.cos(math.pi * (t - 1) / 12)),
                "power": lambda t: t ** -0.75}[schedule]
    assert len(seen) == 12
    for t, rates in enumerate(seen, start=1):
        assert rates == pytest.approx([0.5 * expected(t), 0.2 * expected(t),
                                       0.1 * expected(t)], rel=1e-12)
    assert [h["lr_factor"] for h in res.history] == pytest.approx(
        [expected(t) for t in (4, 8, 12)])
    if schedule == "cosine":  # anneals from the full rate to nearly zero
        assert seen[0][0] == 0.5 and seen[-1][0] < 0.5 * 0.02


def test_unknown_learning_rate_schedule_is_named():
    with pytest.raises(ValueError, match="lr_schedule='linear' is not one of"):
        run_minibatch(lambda b, t: None, [torch.zeros(1)], n=10, batch_size=2,
                      lr_schedule="linear")
