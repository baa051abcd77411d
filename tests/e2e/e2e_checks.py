"""The Python e2e suites' one check: a condition that must hold, failing the suite when it does
not. A plain `assert` is compiled away under `python -O`, which would turn every check into a
pass; `check` never is."""


def check(condition, message=None):
    """Raises AssertionError (with `message`, when given) unless `condition` is true."""
    if not condition:
        raise AssertionError(message if message is not None else "check failed")
