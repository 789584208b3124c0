"""Choose the later normalisers' defaults by cross-validation that never sees the test queries.

The bundled WordNet reverse dictionary holds a test task (2,000 query glosses against
their 2,000 head words) and, disjoint from it, a training task: the first 3,000
in-domain bank glosses (``bank_embeddings[:3000]``) and their head words, the gallery
bank (``gallery_bank_embeddings``; gloss ``i`` is answered by word ``i``). Every default
is chosen on the training task alone; the test task is read only afterwards, once per
method, to report what the chosen default does there.

Design of the cross-validation (the "paired-disjoint" folds). The 3,000 training pairs
are split into 5 folds. In each fold the held-out pairs form a small retrieval task, their
glosses as queries and *only their words* as the gallery (600 items), and the other 2,400
pairs give the banks: their glosses are the querybank and their words the gallery bank.
This mirrors the test task exactly: at test time the querybank holds glosses of *other*
nouns, none of whose words is in the gallery, and DBNorm's gallery bank holds words that
are not in the gallery (and are paired with querybank glosses, as here). It is
``GridSearchCV``'s protocol (the training rows are the querybank, the held-out rows are
scored, with their gallery index as the target) except for the gallery's columns: with
the whole 3,000-word gallery, as ``GridSearchCV`` over the full similarity matrix would
score, every training gloss's own answer would sit in the gallery, so the bank would
push down exactly the items that are *not* held-out answers and reward strong
normalisation for a reason that does not exist at test time. ``--gridsearch-check``
runs that literal ``GridSearchCV`` (one shuffle; DBNorm on a 2,000 / 1,000 split of the
words into gallery and gallery bank) to show how much the choice depends on this.

Each grid point is scored by R@1 (``skqbnorm.metrics.retrieval_metrics``, official
ties) on the held-out rows of 5 folds, repeated over 3 shuffles (KFold random states
0, 1, 2): 15 fold scores per point. R@1 is the scoring because it is the figure the
README and ``far_domain_study.py`` report (the change in R@1 against raw); the geometric
mean of R@1/5/10 (the paper's summary) is shown beside it, with the point it would
choose, as a sensitivity check. The default is the grid point with the highest mean R@1
over the 15 folds (the first in grid order on a tie); the point each shuffle alone
would choose is printed to show the choice's stability. Published defaults that are off
the grid are scored and shown (marked ``*``) but are not candidates.

Then, and only then, the test task: raw similarities against the chosen default (and the
published default where it differs), fitted on the in-domain bank (``bank_embeddings``,
4,000 glosses) and on the far-domain bank (``far_bank_embeddings``, 2,000 gettext
messages); DBNorm takes the 3,000-word gallery bank with either querybank. Each line
gives the change in test R@1 with a paired bootstrap 95% percentile interval (the 2,000
queries resampled 2,000 times).

Caveat: a fold's bank (2,400 glosses) and gallery (600 words) are smaller than the test
task's (4,000 and 2,000), and bank-size-dependent parameters (NNN's and CSLS's k, the
Inverted Softmax temperatures) may not transfer one to one.

Run (about 2 minutes on 2 busy cores; ``--gridsearch-check`` included)::

    .venv/bin/python scripts/defaults_study.py --gridsearch-check --output study.txt
"""

import argparse
import itertools
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from skqbnorm import (
    CSLS,
    Centering,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    MutualProximity,
    NearestNeighborNormalization,
    QueryBankZNorm,
    SinkhornNormalization,
)
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.metrics import correct_item_ranks, make_retrieval_scorer, retrieval_metrics

N_FOLDS = 5
SHUFFLES = (0, 1, 2)
N_BOOTSTRAP = 2000
DBNORM_BETAS = (1.0, 3.0, 10.0, 20.0, 30.0)
PUBLISHED_DBNORM = {"beta1": 1 / 1.99, "beta2": 3.0}


def grid(**values):
    """Every combination of the given parameter values, in grid order."""
    names = list(values)
    return [dict(zip(names, combo)) for combo in itertools.product(*values.values())]


# name: (estimator class, grid, published default(s), uses a gallery bank)
STUDIES = {
    "NNN": (
        NearestNeighborNormalization,
        grid(k=[8, 16, 32, 64, 128, 256], alpha=[0.25, 0.5, 0.75, 1.0]),
        [{"k": 256, "alpha": 0.5}, {"k": 128, "alpha": 0.75}],
        False,
    ),
    "DN (Centering)": (
        Centering,
        grid(alpha=[0.25, 0.5, 0.75, 1.0]),
        [{"alpha": 0.5}],
        False,
    ),
    # SN by R@1 alone, for reference: its default (and DBSN's) is now chosen among the
    # settings that converge, by sinkhorn_defaults_study.py.
    "SN": (
        SinkhornNormalization,
        grid(tau=[0.01, 0.02, 0.05, 0.1], n_iter=[1, 3, 10, 30]),
        [{"tau": 0.01, "n_iter": 10}],
        False,
    ),
    "DSL": (
        DualSoftmax,
        grid(temperature=[0.01, 0.02, 0.05, 0.1, 0.3, 1.0]),
        [{"temperature": 1.0}],
        False,
    ),
    "DBNorm": (
        DualInvertedSoftmax,
        grid(beta1=DBNORM_BETAS, beta2=DBNORM_BETAS),
        [PUBLISHED_DBNORM],
        True,
    ),
    "DBNorm (dynamic)": (
        DualDynamicInvertedSoftmax,
        grid(beta1=DBNORM_BETAS, beta2=DBNORM_BETAS),
        [PUBLISHED_DBNORM],
        True,
    ),
    "z-norm": (QueryBankZNorm, [{}], [{}], False),
    "MP": (MutualProximity, grid(method=["gaussian", "empiric"]), [], False),
    # References: existing defaults (IS/DIS beta=20, CSLS k=10).
    "IS (ref)": (
        InvertedSoftmax,
        grid(beta=[5.0, 10.0, 20.0, 30.0, 50.0]),
        [{"beta": 20.0}],
        False,
    ),
    "DIS (ref)": (
        DynamicInvertedSoftmax,
        grid(beta=[5.0, 10.0, 20.0, 30.0, 50.0]),
        [{"beta": 20.0}],
        False,
    ),
    "CSLS (ref)": (CSLS, grid(k=[1, 5, 10, 20, 50, 100]), [{"k": 10}], False),
}


def describe(params):
    """``k=8, alpha=0.25``, with off-grid floats shortened."""
    if not params:
        return "(none)"
    return ", ".join(
        f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
        for name, value in params.items()
    )


def hits_at_1(scores, gt):
    """Per-query R@1 hits (official ties: a hit only when the rank is exactly 0)."""
    return correct_item_ranks(scores, gt) == 0


def fitted(cls, params, bank, gallery_bank=None):
    """An estimator fitted on bank similarities; SN's convergence warning is silenced."""
    estimator = cls(**params, n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if gallery_bank is None:
            return estimator.fit(bank)
        return estimator.fit(bank, gallery_bank=gallery_bank)


class Task:
    """Float32 similarities of the training and test tasks."""

    def __init__(self, data):
        glosses = data.bank_embeddings[: len(data.gallery_bank_embeddings)]
        words = data.gallery_bank_embeddings
        self.train_sims = glosses @ words.T  # gloss i answered by word i
        self.word_sims = words @ words.T  # the gallery bank's similarities to words
        gallery = data.gallery_embeddings
        self.test_sims = data.query_embeddings @ gallery.T
        self.test_gt = np.asarray(data.query_gt)
        self.test_banks = {
            "in-domain": data.bank_embeddings @ gallery.T,
            "far-domain": data.far_bank_embeddings @ gallery.T,
        }
        self.test_gallery_bank = words @ gallery.T


def fold_indices(n_pairs):
    """(shuffle, training pairs, held-out pairs) of every fold, shuffle by shuffle."""
    for shuffle in SHUFFLES:
        folds = KFold(N_FOLDS, shuffle=True, random_state=shuffle).split(np.arange(n_pairs))
        for train, held_out in folds:
            yield shuffle, train, held_out


def paired_disjoint_folds(task):
    """(shuffle, bank, gallery bank, query sims, gt) per fold; see the module docstring."""
    for shuffle, train, held_out in fold_indices(task.train_sims.shape[0]):
        yield (
            shuffle,
            task.train_sims[np.ix_(train, held_out)],
            task.word_sims[np.ix_(train, held_out)],
            task.train_sims[np.ix_(held_out, held_out)],
            np.arange(len(held_out)),
        )


def cross_validate(task, studies):
    """Fold scores of raw and of every (study, grid point): R@1, geometric mean, SN error."""
    raw, results = [], {}
    for fold, (shuffle, bank, gallery_bank, queries, gt) in enumerate(paired_disjoint_folds(task)):
        started = time.perf_counter()
        raw.append(retrieval_metrics(queries, gt))
        for name, (cls, candidates, published, uses_gallery_bank) in studies.items():
            off_grid = [params for params in published if params not in candidates]
            for params in candidates + off_grid:
                estimator = fitted(cls, params, bank, gallery_bank if uses_gallery_bank else None)
                metrics = retrieval_metrics(estimator.transform(queries), gt)
                row = results.setdefault(
                    (name, describe(params)),
                    {
                        "params": params,
                        "candidate": params in candidates,
                        "shuffle": [],
                        "R@1": [],
                        "geometric_mean": [],
                        "error": [],
                    },
                )
                row["shuffle"].append(shuffle)
                row["R@1"].append(metrics["R@1"])
                row["geometric_mean"].append(metrics["geometric_mean"])
                row["error"].append(getattr(estimator, "marginal_error_", np.nan))
        print(
            f"  fold {fold + 1}/{N_FOLDS * len(SHUFFLES)} done in "
            f"{time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return raw, results


def best(rows, metric, shuffle=None):
    """The candidate with the highest mean ``metric`` (first in grid order on a tie)."""

    def mean(row):
        values = np.array(row[metric])
        if shuffle is not None:
            values = values[np.array(row["shuffle"]) == shuffle]
        return values.mean()

    candidates = [row for row in rows if row["candidate"]]
    return max(candidates, key=mean)  # max keeps the first of equal keys


def cv_report(name, rows, raw, out):
    """The table of one study, its choice, and the choice per shuffle; returns the choice."""
    raw_r1 = np.array([metrics["R@1"] for metrics in raw])
    shuffles = np.array(rows[0]["shuffle"])
    chosen = best(rows, "R@1")
    is_sn = name == "SN"
    header = (
        f"  {'parameters':<26}{'R@1 mean':>9}{'std':>6}{'vs raw':>8}{'vs best':>9}"
        + "".join(f"{f'shuf{s}':>8}" for s in SHUFFLES)
        + f"{'GM mean':>9}"
        + (f"{'marg.err':>10}" if is_sn else "")
    )
    out(f"\n{name}\n{header}")
    for row in rows:
        r1 = np.array(row["R@1"])
        per_shuffle = "".join(f"{r1[shuffles == s].mean():>8.2f}" for s in SHUFFLES)
        line = (
            f"  {describe(row['params']) + ('' if row['candidate'] else ' *'):<26}"
            f"{r1.mean():>9.2f}{r1.std():>6.2f}{(r1 - raw_r1).mean():>+8.2f}"
            f"{(r1 - np.array(chosen['R@1'])).mean():>+9.2f}{per_shuffle}"
            f"{np.mean(row['geometric_mean']):>9.2f}"
        )
        if is_sn:
            line += f"{np.mean(row['error']):>10.3g}"
        out(line)
    per_shuffle = "; ".join(
        f"shuffle {s}: {describe(best(rows, 'R@1', s)['params'])}" for s in SHUFFLES
    )
    out(f"  chosen (R@1, 15 folds): {describe(chosen['params'])}   per shuffle: {per_shuffle}")
    out(f"  geometric mean would choose: {describe(best(rows, 'geometric_mean')['params'])}")
    return chosen["params"]


def bootstrap_interval(differences, samples):
    """Percentile 95% interval of the mean of per-query differences over resampled queries."""
    return np.percentile(differences[samples].mean(axis=1), [2.5, 97.5])


def test_report(task, chosen, out):
    """Test R@1 change against raw, with bootstrap intervals, for each chosen default."""
    raw_hits = hits_at_1(task.test_sims, task.test_gt)
    # The same resamples for every line, whichever studies run.
    samples = np.random.default_rng(0).integers(0, len(raw_hits), (N_BOOTSTRAP, len(raw_hits)))
    out(
        f"\nTest task (read only now): raw R@1 = {100 * raw_hits.mean():.2f}; change in R@1 "
        f"against raw, paired bootstrap 95% interval ({N_BOOTSTRAP} resamples of the "
        f"{len(raw_hits)} queries)"
    )
    out(
        f"  {'method':<16}{'setting':<10}{'parameters':<30}{'bank':<12}{'R@1':>7}"
        f"{'change':>9}{'95% interval':>20}"
    )
    for name, params_list in chosen.items():
        cls, _, _, uses_gallery_bank = STUDIES[name]
        for setting, params in params_list:
            for bank_name, bank in task.test_banks.items():
                gallery_bank = task.test_gallery_bank if uses_gallery_bank else None
                estimator = fitted(cls, params, bank, gallery_bank)
                hits = hits_at_1(estimator.transform(task.test_sims), task.test_gt)
                differences = 100.0 * (hits.astype(float) - raw_hits)
                low, high = bootstrap_interval(differences, samples)
                error = getattr(estimator, "marginal_error_", None)
                out(
                    f"  {name:<16}{setting:<10}{describe(params):<30}{bank_name:<12}"
                    f"{100 * hits.mean():>7.2f}{differences.mean():>+9.2f}"
                    f"{f'[{low:+.2f}, {high:+.2f}]':>20}"
                    + ("" if error is None else f"   marginal error {error:.3g}")
                )


def gridsearch_check(task, studies, out):
    """The literal GridSearchCV over the whole training gallery (one shuffle), for contrast."""
    out("\nLiteral GridSearchCV check (whole training gallery; KFold(5, shuffle, 0); R@1)")
    scorer = make_retrieval_scorer("R@1")
    raw = [
        retrieval_metrics(task.train_sims[held_out], held_out)["R@1"]
        for _, held_out in KFold(N_FOLDS, shuffle=True, random_state=0).split(task.train_sims)
    ]
    out(f"  raw CV R@1 on the 3,000-word gallery: {np.mean(raw):.2f}")
    n_gallery = 2000  # DBNorm: words[:2000] the gallery, words[2000:] the gallery bank
    for name, (cls, candidates, _, uses_gallery_bank) in studies.items():
        if len(candidates) < 2:
            continue
        if uses_gallery_bank:
            sims = task.train_sims[:n_gallery, :n_gallery]
            fit_params = {"gallery_bank": task.word_sims[n_gallery:, :n_gallery]}
        else:
            sims, fit_params = task.train_sims, {}
        search = GridSearchCV(
            cls(n_jobs=1),
            [{k: [v] for k, v in p.items()} for p in candidates],
            scoring=scorer,
            cv=KFold(N_FOLDS, shuffle=True, random_state=0),
            n_jobs=1,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            search.fit(sims, np.arange(len(sims)), **fit_params)
        out(
            f"  {name:<16}chooses {describe(search.best_params_):<28}"
            f"(CV R@1 {search.best_score_:.2f})"
        )


class Report:
    """``out(line)`` prints a line as it comes; ``out.save(path)`` writes them all, if a path."""

    def __init__(self):
        self.lines = []

    def __call__(self, line=""):
        print(line, flush=True)
        self.lines.append(line)

    def save(self, path):
        if path:
            with open(path, "w") as handle:
                handle.write("\n".join(self.lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="also write the printed tables to this file")
    parser.add_argument("--only", nargs="+", choices=list(STUDIES), help="a subset of studies")
    parser.add_argument(
        "--gridsearch-check",
        action="store_true",
        help="also run the literal GridSearchCV over the whole gallery",
    )
    args = parser.parse_args()
    studies = {name: STUDIES[name] for name in (args.only or STUDIES)}
    out = Report()

    started = time.perf_counter()
    task = Task(load_wordnet_revdict())
    out(
        f"Training task: {task.train_sims.shape[0]} gloss -> word pairs (bank glosses with the "
        f"gallery-bank words); {N_FOLDS} paired-disjoint folds x {len(SHUFFLES)} shuffles "
        "(fold gallery = held-out words, querybank = other glosses, gallery bank = other words)"
    )
    raw, results = cross_validate(task, studies)
    raw_r1 = np.array([metrics["R@1"] for metrics in raw])
    out(
        f"raw R@1 over the 15 folds: {raw_r1.mean():.2f} +- {raw_r1.std():.2f} "
        f"(geometric mean {np.mean([m['geometric_mean'] for m in raw]):.2f}); "
        "* = published default off the grid, not a candidate"
    )
    out(
        "vs raw, vs best: mean paired difference in R@1 over the 15 folds from raw and from "
        "the chosen point; shufN: mean over shuffle N's 5 folds; GM: geometric mean R@1/5/10"
    )
    chosen = {}
    for name in studies:
        rows = [row for (study, _), row in results.items() if study == name]
        choice = cv_report(name, rows, raw, out)
        settings = [("chosen", choice)] + [
            ("published", params) for params in STUDIES[name][2] if params != choice
        ]
        if name == "MP":  # no hyperparameter: both methods are reported
            settings = [("method", row["params"]) for row in rows]
        chosen[name] = settings
    if args.gridsearch_check:
        gridsearch_check(task, studies, out)
    test_report(task, chosen, out)
    out(f"\n(total {time.perf_counter() - started:.0f} s)")
    out.save(args.output)


if __name__ == "__main__":
    main()
