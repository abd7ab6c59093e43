"""The workers' send order (``ina.core.send_order``): the plan's intervals interleaved, so
the LP's concurrent rates are realized (docs/simulate.md, "Where prediction and data plane
part")."""

from controller.experiment.methods.ina.core import schedules_for, send_order
from controller.plan.document import chunk_schedule
from tests.test_schedule import HAND, IDS


def test_hand_traced_order_interleaves_the_intervals():
    # 8 chunks: s1 holds 0-3 (p = 1/16 .. 7/16), s2 holds 4-5, 6-7 go to the ToR.  The i-th
    # chunk of an interval at frac(i x 0.618): 0 0, 1 .618, 2 .236, 3 .854 | 4 0, 5 .618 |
    # 6 0, 7 .618
    assert send_order(HAND, 8) == [0, 4, 6, 2, 1, 5, 7, 3]


def test_every_prefix_of_an_interval_is_spread_over_the_round():
    # one interval of 100 chunks: its first 25 (a worker with a quarter of the interval)
    # take places spread over the whole order, not its first quarter
    job = HAND.__class__(**{**HAND.__dict__, "deployed": ["s1"],
                            "intervals": {"s1": {"offset": 0.0, "length": 1.0}}})
    order = send_order(job, 100)
    assert sorted(order) == list(range(100))
    places = sorted(order.index(c) for c in range(25))
    assert places[0] == 0 and places[-1] >= 90  # reaches the end of the round
    assert max(b - a for a, b in zip(places, places[1:], strict=False)) <= 7  # no long gap


def test_no_interval_keeps_chunk_order():
    job = HAND.__class__(**{**HAND.__dict__, "deployed": [], "intervals": {}})
    assert send_order(job, 5) == [0, 1, 2, 3, 4]


class _Plan:  # what schedules_for reads of a one-job plan
    def __init__(self) -> None:
        self.job, self.switch_ids = HAND, IDS


def test_schedules_send_every_chunk_once_with_the_plans_route(monkeypatch):
    import controller.experiment.methods.ina.core as core
    monkeypatch.setattr(core, "chunk_schedule",
                        lambda plan, n: chunk_schedule(plan.job, n, switch_ids=IDS))
    sch = schedules_for("ina", _Plan(), ["w1", "w2", "w3"], 8)
    plain = chunk_schedule(HAND, 8, switch_ids=IDS)
    for i, w in enumerate(["w1", "w2", "w3"]):
        assert sorted(sch[str(i)]) == plain[w]  # same (chunk, agg_id, fan_in) entries
        assert [c for c, _, _ in sch[str(i)]] == [0, 4, 6, 2, 1, 5, 7, 3]  # one order for all
