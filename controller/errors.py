"""The error a run raises for its user: one line, no traceback (``controller.cli.main`` prints it)."""


class ExperimentError(RuntimeError):
    """A run could not be set up or did not complete (one line for the user)."""


def parse_name_list(text: str, option: str, allowed: tuple[str, ...],
                    noun: str) -> tuple[str, ...]:
    """``a,b,...`` of names from ``allowed`` (order kept, no repeats) or one ExperimentError
    naming the option, e.g. ``parse_name_list(args.policies, "--policies", POLICIES,
    "policy")``."""
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise ExperimentError(f"{option} is empty")
    bad = [n for n in names if n not in allowed]
    if bad:
        raise ExperimentError(f"{option}: unknown {noun} {bad[0]!r} "
                              f"(expected {', '.join(allowed)})")
    if len(set(names)) != len(names):
        raise ExperimentError(f"{option}: {text!r} names a {noun} twice")
    return names
