"""``run --method cluster``: the runner (:mod:`.method`), one trial's figures
(:mod:`.records`) and the table and plots (:mod:`.report`)."""
