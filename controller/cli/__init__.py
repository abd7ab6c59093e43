"""``python -m controller``: the command line (:mod:`.main` builds the parser; ``run``,
the network commands and the rest add their subcommands).  The top layer of ``controller``.
"""
