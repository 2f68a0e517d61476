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
