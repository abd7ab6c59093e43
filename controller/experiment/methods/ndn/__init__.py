"""``run --method ndn``: the runner (:mod:`.method`), one trial's networks and processes
(:mod:`.runs`), its figures (:mod:`.records`) and its plots and tables (:mod:`.plots`)."""
