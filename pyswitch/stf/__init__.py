"""STF packet tests (p4c's format): a pure parser and a runner on pyswitch, one program or a
whole corpus.  See docs/stf.md."""
