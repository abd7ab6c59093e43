"""``run --method bcube`` (also ``ps`` and ``ring``): the runner (:mod:`.method`) and its
comparison tables (:mod:`.report`); the Linux-bridge networks and schedule runs it shares with
NDN's TCP baseline are :mod:`controller.experiment.methods.bridged`'s."""
