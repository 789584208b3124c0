"""The catalogue label of a row's method text, without its settings (for the CLI tests)."""

import re


def without_settings(method):
    """``"DIS (beta=20, k=1)"`` -> ``"DIS"``; ``"DBNorm (dynamic; k=1)"`` -> ``"DBNorm (dynamic)"``."""
    if "=" not in method:
        return method
    return re.sub(r"(?:; | \()[^();]*=[^()]*\)$", lambda m: ")" if m.group(0)[0] == ";" else "",
                  method)
