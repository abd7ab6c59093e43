"""The planner (docs/design.md §3): which switches aggregate and how gradients are routed.

Pure logic, no I/O but the plan file: the placement LP (:mod:`.lp`) and its several-jobs form
(:mod:`.lp_jobs`), the one greedy loop (:mod:`.greedy`), the placement algorithms by name
(:mod:`.planners`: ``PLANNERS``, each returning a :class:`.placement.Placement`; the LP
relaxation with randomized rounding in :mod:`.rounding`), the baselines, the jobs file, the RESULT
multicast trees the LP counts, re-planning after a failure (:mod:`.replan`), the typed plan
(:mod:`.types`: ``Plan``, ``JobPlan``) and its file (:mod:`.document`).  Imports nothing
above it in ``controller``.
"""
