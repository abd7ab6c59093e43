"""P4Info as p4c writes it: ids and aliases (`ids`), what the compiler records for it (`meta`),
the message itself (`build`), and a comparison with p4c's own file (`compare`)."""
