"""The command line's files (skqbnorm._files): inputs are never altered, every bad input is one
line, exit 2."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest
from cli_helpers import evaluate_argv, refused, run, without_settings

from skqbnorm import _cli_commands, _files
from skqbnorm.cli import main
from skqbnorm.datasets import make_hubness_sims

N_QUERIES, N_GALLERY, N_BANK = 20, 30, 40


@pytest.fixture
def files(tmp_path):
    sims, gt, bank = make_hubness_sims(N_QUERIES, N_GALLERY, N_BANK, random_state=0)
    paths = {"--sims": tmp_path / "sims.npy", "--bank-sims": tmp_path / "bank.npy",
             "--gt": tmp_path / "gt.npy"}
    for (option, path), array in zip(paths.items(), (sims, bank, gt)):
        np.save(path, array)
    return paths


def digests(paths):
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths.values()}


@pytest.fixture
def no_evaluation(monkeypatch):
    """Make any evaluation fail the test: the refusal must come first."""
    def fail(*args, **kwargs):
        raise AssertionError("the evaluation ran")
    monkeypatch.setattr(_cli_commands, "method_rows", fail)


# -- data loss ---------------------------------------------------------------------------


@pytest.mark.parametrize("option, method", [
    ("--sims", "raw"), ("--sims", "is"), ("--bank-sims", "cent"), ("--bank-sims", "dis"),
    ("--gt", "csls"),
])
def test_save_onto_an_input_is_refused_and_leaves_it_intact(files, capsys, option, method,
                                                            no_evaluation):
    before = digests(files)
    err = refused(evaluate_argv(files, "--method", method, "--save", str(files[option])), capsys)
    assert f"is the input {option}" in err
    assert digests(files) == before


@pytest.mark.parametrize("link", ["symlink", "hardlink", "no suffix", "relative"])
def test_save_onto_an_input_through_another_name_is_refused(files, capsys, link, monkeypatch,
                                                            no_evaluation):
    before = digests(files)
    folder = files["--sims"].parent
    if link == "symlink":
        (folder / "alias.npy").symlink_to(files["--sims"])
        save = folder / "alias.npy"
    elif link == "hardlink":
        os.link(files["--bank-sims"], folder / "alias.npy")
        save = folder / "alias.npy"
    elif link == "no suffix":  # .npy is appended, and the final name is the input
        save = folder / "sims"
    else:
        monkeypatch.chdir(folder / "..")
        save = os.path.join(folder.name, ".", "gt.npy")
    err = refused(evaluate_argv(files, "--method", "cent", "--save", str(save)), capsys)
    assert "is the input" in err
    assert digests(files) == before


def test_save_to_a_folder_is_refused(files, capsys, tmp_path, no_evaluation):
    (tmp_path / "results").mkdir()
    for save in (tmp_path / "results", f"{tmp_path / 'new'}{os.sep}"):
        err = refused(evaluate_argv(files, "--method", "is", "--save", str(save)), capsys)
        assert "is a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank.npy", "gt.npy", "results",
                                                          "sims.npy"]
    assert list((tmp_path / "results").iterdir()) == []


@pytest.mark.parametrize("where", ["missing folder", "under a file"])
def test_save_where_nothing_can_be_written_fails_before_the_evaluation(files, capsys,
                                                                       tmp_path, where,
                                                                       no_evaluation):
    (tmp_path / "plain.txt").write_text("not a folder")
    folder = tmp_path / ("missing" if where == "missing folder" else "plain.txt")
    err = refused(evaluate_argv(files, "--method", "is", "--save", str(folder / "out.npy")), capsys)
    assert re.search(r"the folder .* (does not exist|is not a folder)", err)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only folders")
def test_save_into_a_read_only_folder_fails_before_the_evaluation(files, capsys, tmp_path,
                                                                  no_evaluation):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        err = refused(evaluate_argv(files, "--method", "is", "--save", str(folder / "out.npy")), capsys)
    finally:
        folder.chmod(0o755)
    assert "cannot write in" in err


def test_save_reports_the_real_path_and_appends_npy(files, capsys, tmp_path):
    code, _, err = run(evaluate_argv(files, "--method", "cent", "--save", str(tmp_path / "out")), capsys)
    assert code == 0
    assert f"wrote {tmp_path / 'out.npy'}: (20, 30) float64" in err
    assert not (tmp_path / "out").exists() and np.load(tmp_path / "out.npy").shape == (20, 30)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_save_replaces_the_target_instead_of_writing_into_it(files, capsys, tmp_path):
    target = tmp_path / "out.npy"
    np.save(target, np.zeros(3))
    os.link(target, tmp_path / "other_name.npy")  # a second name for the old file
    real = tmp_path / "real.npy"
    np.save(real, np.zeros(3))
    (tmp_path / "link.npy").symlink_to(real)
    for save in (target, tmp_path / "link"):
        code, _, err = run(evaluate_argv(files, "--method", "is", "--save", str(save), "--force"), capsys)
        assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "other_name.npy"), np.zeros(3))
    assert np.load(target).shape == (20, 30)
    assert (tmp_path / "link.npy").is_symlink() and np.load(real).shape == (20, 30)
    assert f"wrote {real}" in err


@pytest.mark.parametrize("failure", ["evaluation", "input"])
def test_a_failed_run_leaves_the_target_and_no_temporary_file(files, capsys, tmp_path,
                                                              monkeypatch, failure):
    def fail(*args, **kwargs):
        raise ValueError("the normaliser failed")
    monkeypatch.setattr(_cli_commands, "method_rows", fail)
    target = tmp_path / "out.npy"
    target.write_bytes(b"old")
    extra = {"sims": tmp_path / "missing.npy"} if failure == "input" else {}
    err = refused(evaluate_argv(files, "--method", "is", "--save", str(target), "--force", **extra),
                  capsys)
    assert ("the normaliser failed" if failure == "evaluation" else "no such file") in err
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bank.npy", "gt.npy", "out.npy",
                                                          "sims.npy"]


def temporary_files(folder):
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("how", ["same name", "no suffix", "symlink"])
def test_save_refuses_an_existing_file_without_force(files, capsys, tmp_path, how,
                                                     no_evaluation):
    target = tmp_path / "S.npy"
    target.write_bytes(b"a similarity file")
    save = {"same name": target, "no suffix": tmp_path / "S", "symlink": tmp_path / "L.npy"}[how]
    if how == "symlink":
        save.symlink_to(target)
    err = refused(evaluate_argv(files, "--method", "is", "--save", str(save)), capsys)
    assert f"--save {save if how != 'no suffix' else target}: exists already" in err
    assert "pass --force to replace it" in err
    assert (f"(the file {target})" in err) == (how == "symlink")
    assert target.read_bytes() == b"a similarity file" and not temporary_files(tmp_path)


def test_force_replaces_an_existing_file_but_never_an_input(files, capsys, tmp_path,
                                                            no_evaluation):
    before = digests(files)
    err = refused(evaluate_argv(files, "--method", "is", "--save", str(files["--sims"]), "--force"),
                  capsys)
    assert "is the input --sims" in err and digests(files) == before
    err = refused(evaluate_argv(files, "--method", "is", "--force"), capsys)
    assert "--force lets --save replace an existing file; it needs --save" in err


def test_save_refuses_a_file_that_appeared_during_the_evaluation(files, capsys, tmp_path,
                                                                 monkeypatch):
    target = tmp_path / "out.npy"
    evaluate = _cli_commands.method_rows

    def someone_else_writes(*args, **kwargs):
        target.write_bytes(b"theirs")
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(_cli_commands, "method_rows", someone_else_writes)
    err = refused(evaluate_argv(files, "--method", "is", "--save", str(target)), capsys)
    assert "exists already; pass --force to replace it" in err
    assert target.read_bytes() == b"theirs" and not temporary_files(tmp_path)


def test_ctrl_c_is_one_line_and_exit_status_130(files, capsys, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(_cli_commands, "method_rows", interrupted)
    try:
        code, out, err = run(evaluate_argv(files, "--method", "is", "--save", str(tmp_path / "out.npy"),
                                  "--quiet"), capsys)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped the command (a traceback, not one line)")
    assert (code, out, err) == (130, "", "skqbnorm evaluate: interrupted (Ctrl-C).\n")
    assert not (tmp_path / "out.npy").exists() and not temporary_files(tmp_path)


@pytest.fixture
def sigterm_recorder():
    """A SIGTERM handler of the caller's own, which must be back in place afterwards."""
    received = []

    def record(signum, frame):
        received.append(signum)

    previous = signal.signal(signal.SIGTERM, record)
    yield received, record
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_during_the_write_removes_the_temporary_file(tmp_path, monkeypatch,
                                                             sigterm_recorder):
    received, record = sigterm_recorder
    target = tmp_path / "out.npy"

    def save_then_terminated(file, array, allow_pickle):
        file.write(b"part of the array")
        signal.raise_signal(signal.SIGTERM)
        file.write(b" and the rest")

    monkeypatch.setattr(_files.np, "save", save_then_terminated)
    with pytest.raises(_files.Terminated), _files.ReservedOutput(target, {}) as output:
        assert temporary_files(tmp_path)  # reserved on entering the block
        output.commit(np.zeros((2, 3)))
    assert not target.exists() and not temporary_files(tmp_path)
    assert received == [] and signal.getsignal(signal.SIGTERM) is record


@pytest.mark.slow
def test_sigterm_ends_the_command_in_one_line_without_a_temporary_file(files, tmp_path):
    # SIGTERM arrives while --save writes, in a separate process (its default action
    # would end the process on the spot, leaving the temporary file behind).
    script = textwrap.dedent("""
        import signal, sys
        import numpy as np
        from skqbnorm import _files
        from skqbnorm.cli import main

        def save_then_terminated(file, array, allow_pickle):
            file.write(b"part of the array")
            file.flush()
            signal.raise_signal(signal.SIGTERM)
            file.write(b" and the rest")

        _files.np.save = save_then_terminated
        sys.exit(main(sys.argv[1:]))
    """)
    target = tmp_path / "out.npy"
    done = subprocess.run([sys.executable, "-c", script,
                           *evaluate_argv(files, "--method", "is", "--save", str(target), "--quiet")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 143, done.stderr[-500:]
    assert done.stderr == "skqbnorm evaluate: terminated (SIGTERM).\n" and done.stdout == ""
    assert not target.exists() and not temporary_files(tmp_path)


def test_save_to_an_npz_name_is_refused(files, capsys, tmp_path, no_evaluation):
    np.savez(tmp_path / "sims.npz", sims=np.load(files["--sims"]))
    before = (tmp_path / "sims.npz").read_bytes()
    err = refused(evaluate_argv(files, "--method", "cent", "--save", str(tmp_path / "sims.npz"),
                       sims=tmp_path / "sims.npz"), capsys)
    assert "writes one .npy file, not an .npz archive" in err
    assert (tmp_path / "sims.npz").read_bytes() == before
    assert not (tmp_path / "sims.npz.npy").exists()


def test_an_empty_save_name_is_refused(files, capsys):
    assert "--save needs a file name" in refused(evaluate_argv(files, "--method", "is", "--save", ""),
                                                  capsys)


# -- load errors: one line, exit status 2 -------------------------------------------------


def npy_header(shape, descr="<f8"):
    stream = __import__("io").BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(stream, header)
    return stream.getvalue()


def zip_with(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def truncated(path):
    np.save(path, np.ones((N_QUERIES, N_GALLERY)))
    path.write_bytes(path.read_bytes()[:-40])


def saved(array, **kwargs):
    def write(path):
        with open(path, "wb") as stream:  # np.save would append .npy to a .npz name
            np.save(stream, array, **kwargs)
    return write


def renamed_archive(path):
    np.savez(path.with_suffix(".tmp.npz"), sims=np.ones((N_QUERIES, N_GALLERY)))
    path.with_suffix(".tmp.npz").rename(path)


def cut_archive(path):
    np.savez(path.with_suffix(".tmp.npz"), sims=np.ones((N_QUERIES, N_GALLERY)))
    data = path.with_suffix(".tmp.npz").read_bytes()
    path.write_bytes(data[: len(data) // 2])


def unclosed_shape(path, suffix=".npy"):
    """A saved array whose header's shape tuple lost its ')': a tokenizer error to parse."""
    np.save(path.with_suffix(".tmp.npy"), np.ones((N_QUERIES, N_GALLERY)))
    data = path.with_suffix(".tmp.npy").read_bytes().replace(b"(20, 30)", b"(20, 30 ", 1)
    if suffix == ".npy":
        path.write_bytes(data)
    else:
        zip_with(path, {"sims.npy": data})


SHAPE = (N_QUERIES, N_GALLERY)
BAD_FILES = {
    "unclosed shape": ("sims.npy", unclosed_shape, "not a valid .npy file"),
    "unclosed shape in .npz": ("sims.npz", lambda p: unclosed_shape(p, ".npz"),
                               r"\[sims.npy\]: not a valid .npy file"),
    "truncated .npy": ("sims.npy", truncated, r"truncated or corrupt.*\(20, 30\)"),
    "gigantic header": ("sims.npy", lambda p: p.write_bytes(npy_header((10**9, 10**9)) + b"0" * 64),
                        r"announces shape \(1000000000, 1000000000\).*holds only 192 bytes"),
    "negative shape": ("sims.npy", lambda p: p.write_bytes(npy_header((-1, 30)) + b"0" * 64),
                       r"not a valid .npy file \(negative length"),
    "bad dtype text": ("sims.npy", lambda p: p.write_bytes(npy_header((2, 2), "<zz") + b"0" * 32),
                       "not a valid .npy file"),
    "zero bytes": ("sims.npy", lambda p: p.write_bytes(b""), r"is empty \(0 bytes\)"),
    "magic only": ("sims.npy", lambda p: p.write_bytes(b"\x93NUMPY"), "not a valid .npy file"),
    "text named .npy": ("sims.npy", lambda p: p.write_text("0.1,0.2\n0.3,0.4\n"),
                        "neither an .npy file nor an .npz archive"),
    ".npz named .npy": ("sims.npy", renamed_archive, r"a zip archive \(\.npz\) under a \.npy name"),
    ".npy named .npz": ("sims.npz", saved(np.ones(SHAPE)), r"an \.npy array under a \.npz name"),
    "corrupt zip": ("sims.npz", lambda p: p.write_bytes(b"PK\x03\x04" + bytes(range(200))),
                    "not a readable .npz archive"),
    "cut zip": ("sims.npz", cut_archive, "not a readable .npz archive"),
    "zip without arrays": ("sims.npz", lambda p: zip_with(p, {"notes.txt": "hello"}),
                           "holds no arrays"),
    "several arrays": ("sims.npz", lambda p: np.savez(p, a=np.ones(SHAPE), b=np.ones(SHAPE)),
                       r"several arrays \['a', 'b'\]"),
    "structured": ("sims.npy", saved(np.zeros(SHAPE, dtype=[("a", "f8")])), r"holds \[\('a'"),
    "datetime": ("sims.npy", saved(np.zeros(SHAPE, dtype="M8[s]")), "holds datetime64"),
    "timedelta": ("sims.npy", saved(np.zeros(SHAPE, dtype="m8[s]")), "holds timedelta64"),
    "complex": ("sims.npy", saved(np.ones(SHAPE, dtype=complex)), "holds complex128"),
    "object": ("sims.npy", saved(np.ones(SHAPE, dtype=object), allow_pickle=True),
               "holds object"),
    "unicode": ("sims.npy", saved(np.full(SHAPE, "a")), "holds <U1"),
    "bytes": ("sims.npy", saved(np.full(SHAPE, b"a")), r"holds \|S1"),
    "bool": ("sims.npy", saved(np.ones(SHAPE, dtype=bool)), "holds bool"),
    "complex in .npz": ("sims.npz", lambda p: np.savez(p, np.ones(SHAPE, dtype=complex)),
                        r"\[arr_0.npy\]: holds complex128"),
    "0-d": ("sims.npy", saved(np.float64(1.0)), r"has shape \(\)"),
    "1-d": ("sims.npy", saved(np.ones(N_GALLERY)), r"has shape \(30,\)"),
    "3-d": ("sims.npy", saved(np.ones((2, N_QUERIES, N_GALLERY))), r"has shape \(2, 20, 30\)"),
    "no rows": ("sims.npy", saved(np.ones((0, N_GALLERY))), "needs at least one row"),
    "no columns": ("sims.npy", saved(np.ones((N_QUERIES, 0))), "the gallery is empty"),
    "unknown suffix": ("sims.txt", lambda p: p.write_text("1"), "expected a .npy or .npz file"),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_similarity_file_is_one_line(files, capsys, tmp_path, name):
    file_name, write, message = BAD_FILES[name]
    path = tmp_path / "bad" / file_name
    path.parent.mkdir()
    write(path)
    err = refused(evaluate_argv(files, sims=path), capsys)
    assert err.startswith(f"skqbnorm evaluate: error: --sims {path}")
    assert re.search(message, err), err


def test_an_npz_member_with_a_lying_header_is_refused_before_decompressing(files, capsys,
                                                                           tmp_path,
                                                                           monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("decompressed")
    monkeypatch.setattr(np.lib.format, "read_array", fail)
    path = tmp_path / "huge.npz"
    zip_with(path, {"bank_sims.npy": npy_header((10**6, 10**6)) + bytes(80)})
    err = refused(evaluate_argv(files, bank_sims=path), capsys)
    assert re.search(r"--bank-sims .*huge.npz \[bank_sims.npy\]: truncated or corrupt.*"
                     r"\(1000000, 1000000\)", err)


def test_an_npz_member_larger_than_the_memory_is_refused(files, capsys, tmp_path,
                                                        monkeypatch):
    monkeypatch.setattr(_files, "physical_memory", lambda: 1000)
    np.savez_compressed(tmp_path / "big.npz", sims=np.zeros((N_QUERIES, N_GALLERY)))
    err = refused(evaluate_argv(files, sims=tmp_path / "big.npz"), capsys)
    assert "[sims.npy]: needs 0.0 GiB decompressed, more than this machine's" in err
    assert "save it as .npy" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_a_named_pipe_as_input_is_refused_without_blocking(files, capsys, tmp_path):
    os.mkfifo(tmp_path / "pipe.npy")
    err = refused(evaluate_argv(files, sims=tmp_path / "pipe.npy"), capsys)
    assert "is not a regular file" in err


@pytest.mark.parametrize("kind", ["folder", "missing"])
def test_a_folder_or_a_missing_file_as_input_is_one_line(files, capsys, tmp_path, kind):
    path = tmp_path / "inputs" if kind == "folder" else tmp_path / "absent.npy"
    if kind == "folder":
        path.mkdir()
    err = refused(evaluate_argv(files, bank_sims=path), capsys)
    assert f"--bank-sims {path}: " + ("is a folder" if kind == "folder" else "no such file") in err


def test_a_bank_without_rows_is_refused(files, capsys, tmp_path):
    np.save(tmp_path / "empty.npy", np.ones((0, N_GALLERY)))
    err = refused(evaluate_argv(files, bank_sims=tmp_path / "empty.npy"), capsys)
    assert f"--bank-sims {tmp_path / 'empty.npy'}: has shape (0, 30)" in err


@pytest.mark.parametrize("option, suffix, method", [
    ("--sims", ".npy", "raw"), ("--sims", ".npz", "is"), ("--bank-sims", ".npy", "cent"),
    ("--bank-sims", ".npz", "raw"),
])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_non_finite_similarity_is_named_with_its_file_and_position(files, capsys, tmp_path,
                                                                     monkeypatch, option,
                                                                     suffix, method, value):
    monkeypatch.setattr(_files, "rows_per_chunk", lambda *args, **kwargs: 3)  # several blocks
    matrix = np.load(files[option])
    matrix[7, 11] = value
    path = tmp_path / f"bad{suffix}"
    np.save(path, matrix) if suffix == ".npy" else np.savez(path, matrix)
    err = refused(evaluate_argv(files, "--method", method, **{option[2:].replace("-", "_"): path}),
                  capsys)
    assert f"{option} {path}: the similarity of row 7 to gallery item 11 is {value}" in err


def test_integer_similarities_are_accepted(files, capsys, tmp_path):
    np.save(tmp_path / "int_sims.npy", (np.load(files["--sims"]) * 1000).astype(np.int16))
    code, out, _ = run(evaluate_argv(files, "--method", "is", "--format", "json", "--quiet",
                            sims=tmp_path / "int_sims.npy"), capsys)
    assert code == 0 and len(json.loads(out)) == 2


# -- gt -----------------------------------------------------------------------------------


def json_rows(args, capsys):
    code, out, _ = run([*args, "--format", "json", "--quiet"], capsys)
    assert code == 0
    return [{key: row[key] for key in ("R@1", "R@5", "MnR")} for row in json.loads(out)]


@pytest.mark.parametrize("convert", [
    lambda gt: gt.astype(np.float32),
    lambda gt: gt.astype(np.uint8),
    lambda gt: np.eye(N_GALLERY, dtype=bool)[gt],
    lambda gt: np.eye(N_GALLERY, dtype=np.int8)[gt],
])
def test_equivalent_gt_forms_give_the_same_results(files, capsys, tmp_path, convert):
    np.save(tmp_path / "other_gt.npy", convert(np.load(files["--gt"])))
    expected = json_rows(evaluate_argv(files, "--method", "is"), capsys)
    assert json_rows(evaluate_argv(files, "--method", "is", gt=tmp_path / "other_gt.npy"),
                     capsys) == expected


def with_value(index, value, dtype=np.float64):
    def change(gt):
        gt = gt.astype(dtype)
        gt[index] = value
        return gt
    return change


BAD_GTS = {
    "fraction": (with_value(4, 2.5), r"query 4 has 2\.5"),
    "nan": (with_value(1, np.nan), "query 1 has nan"),
    "negative": (with_value(0, -1, np.int64), r"\[0, 30\); query 0 has -1"),
    "too large": (with_value(3, N_GALLERY, np.int64), r"\[0, 30\); query 3 has 30"),
    "too short": (lambda gt: gt[:-1], r"has shape \(19,\); gt needs one gallery index per query"),
    "booleans": (lambda gt: gt > 3, "holds booleans"),
    "strings": (lambda gt: gt.astype(str), "holds <U"),
    "3-d": (lambda gt: gt.reshape(1, 1, -1), r"has shape \(1, 1, 20\)"),
    "relevance of the wrong shape": (lambda gt: np.eye(N_GALLERY + 1, dtype=bool)[gt],
                                     r"shape of --sims \(20, 30\); got \(20, 31\)"),
    "relevance not 0/1": (lambda gt: 2 * np.eye(N_GALLERY, dtype=int)[gt],
                          r"gt\[0, 0\] is 2"),
    "query without relevant item": (lambda gt: np.eye(N_GALLERY, dtype=bool)[gt] & (
        np.arange(N_QUERIES) != 5)[:, None], r"rows \[5\] have none"),
}


@pytest.mark.parametrize("name", list(BAD_GTS))
def test_a_bad_gt_is_one_line_naming_the_query(files, capsys, tmp_path, name, no_evaluation):
    change, message = BAD_GTS[name]
    gt = np.load(files["--gt"])
    if name == "relevance not 0/1":
        message = rf"gt\[0, {gt[0]}\] is 2"
    np.save(tmp_path / "bad_gt.npy", change(gt))
    err = refused(evaluate_argv(files, gt=tmp_path / "bad_gt.npy"), capsys)
    assert err.startswith(f"skqbnorm evaluate: error: --gt {tmp_path / 'bad_gt.npy'}: ")
    assert re.search(message, err), err


@pytest.fixture
def embedding_files(tmp_path):
    rng = np.random.default_rng(0)
    paths = {option: tmp_path / f"{option.strip('-')}.npy"
             for option in ("--queries", "--gallery", "--bank")}
    for (option, path), rows in zip(paths.items(), (N_QUERIES, N_GALLERY, N_BANK)):
        np.save(path, rng.normal(size=(rows, 8)))
    return paths


@pytest.mark.parametrize("gt, message", [
    (np.arange(N_QUERIES + 3) % N_GALLERY,
     r"has shape \(23,\); gt needs one gallery index per query of --queries \(20,\)"),
    (np.eye(N_GALLERY + 1, dtype=bool)[np.arange(N_QUERIES)],
     r"shape of --queries x --gallery \(20, 30\); got \(20, 31\)"),
])
def test_a_bad_gt_with_embeddings_names_the_queries(embedding_files, capsys, tmp_path, gt,
                                                     message, no_evaluation):
    np.save(tmp_path / "bad_gt.npy", gt)
    err = refused(evaluate_argv(embedding_files, gt=tmp_path / "bad_gt.npy"), capsys)
    assert re.search(message, err), err
    assert "--sims" not in err


# -- methods, k, beta, progress ----------------------------------------------------------


@pytest.fixture
def small_gallery(tmp_path):
    """A gallery of 5 items: CSLS's default k=10 does not fit."""
    rng = np.random.default_rng(0)
    paths = {"--sims": tmp_path / "sims.npy", "--bank-sims": tmp_path / "bank.npy"}
    np.save(paths["--sims"], rng.normal(size=(5, 5)))
    np.save(paths["--bank-sims"], rng.normal(size=(20, 5)))
    return paths


@pytest.mark.parametrize("quiet", [True, False])
def test_all_methods_on_a_small_gallery_run_what_can_run(small_gallery, capsys, quiet):
    """CSLS (k=10) does not fit 5 items, NNN's default k not 20 bank queries, and the
    dual-bank methods have no gallery bank: each is skipped with a note."""
    args = evaluate_argv(small_gallery, "--format", "json", *(["--quiet"] if quiet else []))
    code, out, err = run(args, capsys)
    assert code == 0
    assert [without_settings(row["method"]) for row in json.loads(out)] == [
        "raw similarities", "IS", "DIS", "GC", "CENT", "DN", "gated DIS", "z-norm", "MP (Gaussian)", "MP (empiric)", "SN",
        "DSL",
        "DSL (transductive)"]
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert [line.split(" (")[0] for line in skipped] == [
        f"skqbnorm evaluate: skipped {name}"
        for name in ("CSLS", "NNN", "gated NNN", "DBNorm", "DBNorm", "DBSN")]
    assert skipped[0].startswith("skqbnorm evaluate: skipped CSLS (k=10)")
    assert "k=10 is larger than the gallery" in skipped[0] and "--k" in skipped[0]
    assert "is larger than the querybank" in skipped[1] and "--k" in skipped[1]
    notes = [line for line in err.splitlines() if line.startswith("skqbnorm evaluate: ")]
    assert (err == "".join(line + "\n" for line in notes)) == quiet  # progress unless --quiet


def test_all_methods_with_a_small_querybank_skip_csls(files, capsys, tmp_path):
    np.save(tmp_path / "small_bank.npy", np.load(files["--bank-sims"])[:3])
    code, out, err = run(evaluate_argv(files, "--format", "csv", "--quiet",
                              bank_sims=tmp_path / "small_bank.npy"), capsys)
    assert code == 0 and len(out.splitlines()) == 1 + 19 - 6  # no CSLS, NNN, gated NNN, DBNorm, DBNorm (dynamic), DBSN
    assert "skipped CSLS (k=10): k=10 is larger than the querybank" in err


def test_an_explicit_k_that_fits_runs_every_method(small_gallery, capsys, tmp_path):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "gallery_bank.npy", rng.normal(size=(8, 5)))
    np.save(tmp_path / "bank_to_gallery_bank.npy", rng.normal(size=(20, 8)))
    code, out, err = run(evaluate_argv(small_gallery, "--k", "3", "--format", "json", "--quiet",
                              "--tau", "1", gallery_bank_sims=tmp_path / "gallery_bank.npy",
                              bank_gallery_bank_sims=tmp_path / "bank_to_gallery_bank.npy"),
                         capsys)
    assert code == 0 and err == ""
    methods = {without_settings(row["method"]): row["method"] for row in json.loads(out)}
    assert len(methods) == 19
    assert (methods["CSLS"], methods["DIS"]) == ("CSLS (k=3)", "DIS (beta=20, k=3)")
    assert methods["NNN"].startswith("NNN (k=3, alpha=") and methods["DBNorm (dynamic)"].endswith(", k=3)")


@pytest.mark.parametrize("extra, message", [
    (["--k", "7"], r"DIS \(beta=20, k=7\): k=7 is larger than the gallery"),
    (["--method", "dis", "--k", "6"], r"DIS \(beta=20, k=6\): k=6 is larger"),
    (["--method", "csls"], r"CSLS \(k=10\): k=10 is larger than the gallery.*Give a smaller --k"),
])
def test_a_k_that_does_not_fit_fails_before_the_evaluation(small_gallery, capsys, extra,
                                                           message, no_evaluation):
    assert re.search(message, refused(evaluate_argv(small_gallery, *extra), capsys))


@pytest.mark.parametrize("option, value", [
    ("--beta", "0"), ("--beta", "-1"), ("--beta", "nan"), ("--beta", "inf"), ("--beta", "x"),
    ("--k", "0"), ("--k", "-2"), ("--k", "2.5"),
])
def test_bad_beta_and_k_are_refused_even_where_unused(files, capsys, option, value):
    code, out, err = run(evaluate_argv(files, "--method", "raw", option, value, "--quiet"), capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err  # one line, as every other error (no usage block)
    assert re.search(f"^skqbnorm evaluate: error: argument {option}: must be a positive.*"
                     r"\(see skqbnorm evaluate --help\)$", err.rstrip("\n"))


def test_progress_goes_to_stderr_and_quiet_silences_it(files, capsys, tmp_path):
    code, out, err = run(evaluate_argv(files, "--method", "is", "--format", "json",
                              "--save", str(tmp_path / "out")), capsys)
    assert code == 0 and len(json.loads(out)) == 2
    assert err.splitlines()[-1] == f"wrote {tmp_path / 'out.npy'}: (20, 30) float64"
    code, out, err = run(evaluate_argv(files, "--method", "is", "--format", "json", "--quiet",
                              "--save", str(tmp_path / "again")), capsys)
    assert code == 0 and err == "" and (tmp_path / "again.npy").exists()


def test_the_help_states_the_k_rule_and_the_save_rule(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "skips CSLS (k=10) when the gallery or the querybank has fewer than 10 items" in text
    assert "an explicit --k that is too large" in text and ".npy is appended when missing" in text
