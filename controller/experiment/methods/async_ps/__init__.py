"""``run --method async``: the runner (:mod:`.method`) and its table and plots
(:mod:`.report`)."""
