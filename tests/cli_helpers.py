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


def evaluate_argv(paths, *extra, **replaced):
    """``evaluate`` on ``paths`` (``{option: path}``), with options replaced by keyword
    (``bank_sims=...``; None leaves one out), then ``extra``."""
    options = {**paths, **{"--" + k.replace("_", "-"): v for k, v in replaced.items()}}
    pairs = [[option, str(path)] for option, path in options.items() if path is not None]
    return ["evaluate", *[item for pair in pairs for item in pair], *extra]


def refused(args, capsys):
    """The one-line error of a refused command (exit status 2, nothing on stdout)."""
    code, out, err = run([*args, "--quiet"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("skqbnorm evaluate: error: ") and err.count("\n") == 1, err
    return err


def without_settings(method):
    """``"DIS (beta=20, k=1)"`` -> ``"DIS"``; ``"DBNorm (dynamic; k=1)"`` -> ``"DBNorm (dynamic)"``."""
    if "=" not in method:
        return method
    return re.sub(r"(?:; | \()[^();]*=[^()]*\)$", lambda m: ")" if m.group(0)[0] == ";" else "",
                  method)
