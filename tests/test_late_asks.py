"""workers.ina.late_asks: asks for a completed chunk, answered one by one or together."""

from __future__ import annotations

import pytest

from workers.ina.late_asks import HOLD, MULTICAST, UNICAST, LateAsks


def test_a_few_asks_get_their_own_answer_many_at_once_one_multicast() -> None:
    late = LateAsks(many=3, window=0.1)
    assert [late.answer(7, t) for t in (1.00, 1.02)] == [UNICAST, UNICAST]
    assert late.answer(7, 1.05) == MULTICAST  # the third within 0.1 s
    assert late.answer(7, 1.10) == HOLD  # the multicast answer is on its way
    assert late.answer(8, 1.10) == UNICAST  # chunks are counted apart
    # the window after the multicast has passed: asks within the window count again
    # (1.10 and 1.16: two in the last 0.1 s)
    assert late.answer(7, 1.16) == UNICAST
    assert late.answer(7, 1.19) == MULTICAST


def test_asks_spread_wider_than_the_window_stay_unicast() -> None:
    late = LateAsks(many=2, window=0.1)
    assert [late.answer(3, t) for t in (0.0, 0.2, 0.4, 0.6)] == [UNICAST] * 4


@pytest.mark.parametrize("many, window", [(0, 0.1), (3, -1.0), (3, float("nan"))])
def test_bad_settings_are_refused(many: int, window: float) -> None:
    with pytest.raises(ValueError):
        LateAsks(many, window)
