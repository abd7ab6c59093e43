"""The planner (docs/design.md §3): which switches aggregate and how gradients are routed.

Pure logic, no I/O but the plan file: the placement LP (:mod:`.lp`) and its several-jobs form
(:mod:`.lp_jobs`), the one greedy loop for one job or several (:mod:`.greedy`), the one table
of placement algorithms (:mod:`.planners`: ``PLANNERS``; each takes a job set, one job being a
set of one (:class:`.placement.Jobs`), and returns a :class:`.placement.Placement`; the LP
relaxation with randomized rounding in :mod:`.rounding`), the baselines (every other planner
of the table, :mod:`.baselines`), the jobs file, the RESULT multicast trees the LP counts,
re-planning after a failure (:mod:`.replan`), the typed plan (:mod:`.types`: ``Plan`` with its
one constructor ``Plan.build``, ``JobPlan``), its checks (:mod:`.check`) and file
(:mod:`.document`), the pipeline every command plans through (:mod:`.pipeline`) and its
options (:mod:`.options`).  Imports nothing above it in ``controller``.

Adding a planner: one module and one line in ``PLANNERS`` (docs/walkthrough-planner.md).
"""
