"""Experiments: the runner every method shares (run folder, network lifetime, host processes,
records, report, provenance), switch and worker fail-over, the methods themselves
(:mod:`.methods`, named in :mod:`.registry`), the fault campaign, ``compare`` and ``clean``.
Builds on :mod:`controller.dataplane` and :mod:`controller.plan`.
"""
