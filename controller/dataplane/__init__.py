"""The control plane: the P4Runtime client, the rules a plan needs on every switch and their
deployment (:mod:`.deploy`), and the switches' drop counters.  Builds on :mod:`controller.plan`.
"""
