"""``run --method ina`` (the default): the runner (:mod:`.method`, ``InaMethod`` and the results
document), what every INA run shares (:mod:`.core`: settings, job files, schedules, the
deployed network, the record of one job), the one engine over every network (:mod:`.engine`)
and the networks it is passed (:mod:`.networks`: mininet, servers, simulated), several jobs
(:mod:`.tenants`, :mod:`.jobs`), its options (:mod:`.options`), a real model's workload
(:mod:`.workload`) and its results row (:mod:`.row`)."""
