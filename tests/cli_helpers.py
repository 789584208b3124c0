"""Helpers of the command-line tests: running ``skqbnorm`` in-process, reading its labels."""

import re

from skqbnorm.cli import main


def run(args, capsys):
    """``(exit status, stdout, stderr)`` of ``skqbnorm *args``."""
    try:
        code = main(args)
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err


def without_settings(method):
    """``"DIS (beta=20, k=1)"`` -> ``"DIS"``; ``"DBNorm (dynamic; k=1)"`` -> ``"DBNorm (dynamic)"``."""
    if "=" not in method:
        return method
    return re.sub(r"(?:; | \()[^();]*=[^()]*\)$", lambda m: ")" if m.group(0)[0] == ";" else "",
                  method)
