"""A retrieval task on scikit-learn's digits: corrupted views query clean images."""

from numbers import Integral, Real

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler, normalize
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import validate_params

from .._validation import NotBool, check_float_dtype

#: Images in scikit-learn's digits, and in its smallest class.
N_DIGITS, SMALLEST_CLASS = 1797, 174


@validate_params(
    {
        "n_gallery": [NotBool(Integral, 1, N_DIGITS - 1, closed="both")],
        "drop": [NotBool(Real, 0, 1, closed="both")],
        "noise": [NotBool(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "dtype": "no_validation",
    },
    prefer_skip_nested_validation=True,
)
def load_digits_retrieval(*, n_gallery=800, drop=0.5, noise=2.5, random_state=0, dtype=np.float32):
    """Image-to-image retrieval on scikit-learn's handwritten digits.

    The gallery holds ``n_gallery`` clean digit images; each query is a corrupted
    view of one of them (a random ``drop`` share of its pixels zeroed, Gaussian
    pixel noise of standard deviation ``noise``), and must retrieve its own
    image. The querybank is corrupted views of the *other* digits (the training
    split), as in the QB-Norm paper's protocol. Images are standardised on the
    training split and compared by cosine similarity, in 64 dimensions where
    hubness is strong.

    Parameters
    ----------
    n_gallery : int, default=800
        Number of test images (gallery items, one query each), in [1, 1796]: the
        other digits make the querybank.
    drop : float, default=0.5
        Share of pixels zeroed in a query view, in [0, 1].
    noise : float, default=2.5
        Standard deviation of the pixel noise, >= 0 (pixels range over 0-16).
    random_state : int, RandomState instance or None, default=0
        Seed of the split and the corruptions.
    dtype : float dtype, default=np.float32
        Dtype of the similarity matrices.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``query_sims`` (n_gallery, n_gallery), ``query_gt`` (n_gallery,),
        ``bank_sims`` (n_bank, n_gallery), ``gallery_labels`` (digit classes),
        and ``DESCR``.

    Examples
    --------
    >>> from skqbnorm.datasets import load_digits_retrieval
    >>> data = load_digits_retrieval(n_gallery=100)
    >>> data.query_sims.shape, data.bank_sims.shape
    ((100, 100), (1697, 100))
    """
    dtype = check_float_dtype(dtype)
    rng = check_random_state(random_state)
    digits = load_digits()
    train, test = train_test_split(np.arange(len(digits.data)), test_size=n_gallery, random_state=rng)
    scaler = StandardScaler().fit(digits.data[train])

    def embed(images):
        return normalize(scaler.transform(images)).astype(dtype)

    def corrupt(images):
        kept = rng.random_sample(images.shape) >= drop
        return images * kept + rng.normal(scale=noise, size=images.shape)

    gallery = embed(digits.data[test])
    queries = embed(corrupt(digits.data[test]))
    bank = embed(corrupt(digits.data[train]))
    return Bunch(
        query_sims=queries @ gallery.T,
        query_gt=np.arange(n_gallery),
        bank_sims=bank @ gallery.T,
        gallery_labels=digits.target[test],
        DESCR=load_digits_retrieval.__doc__.split("\n\n")[1],
    )


@validate_params(
    {
        "n_labeled_per_class": [NotBool(Integral, 1, SMALLEST_CLASS, closed="both")],
        "n_pool": [NotBool(Integral, 1, None, closed="left")],
        "noise": [NotBool(Real, 0, None, closed="left"), None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def load_digits_reranking(*, n_labeled_per_class=2, n_pool=400, noise=None, random_state=0):
    """Visual reranking lists on scikit-learn's handwritten digits.

    A weak "text" engine — a logistic regression trained on ``n_labeled_per_class``
    labelled images per class — scores a pool of ``n_pool`` unlabelled images for
    each of the ten digit classes (one query per class). Each query's list is the
    whole pool, its initial scores the classifier's probabilities for the class,
    its relevant items the images of that class, and the features for the visual
    graph the images' pixels scaled to [0, 1]. With ``noise`` set, the engine is
    instead the class indicator plus Gaussian noise of that standard deviation
    (drawn per query and image): a text-like score that knows relevance only
    through noise, whose errors the pixels can correct.

    Parameters
    ----------
    n_labeled_per_class : int, default=2
        Labelled images per class used to train the initial scorer, in [1, 174]
        (the smallest class).
    n_pool : int, default=400
        Images in every query's list, at most the 1,797 digits less the labelled
        ones.
    noise : float or None, default=None
        None: the logistic-regression engine; a float >= 0: the indicator-plus-noise
        engine with that standard deviation (the labelled images are then unused,
        and left out of the pool all the same).
    random_state : int, RandomState instance or None, default=0
        Seed of the labelled set and the pool.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``features`` (10 n_pool, 64), ``initial_scores`` (10 n_pool,),
        ``groups`` (the query class of each row), ``relevance`` (bool) and
        ``DESCR``, lists stacked query after query.

    Examples
    --------
    >>> from skqbnorm.datasets import load_digits_reranking
    >>> from skqbnorm.metrics import mean_average_precision
    >>> data = load_digits_reranking()
    >>> data.features.shape
    (4000, 64)
    >>> round(mean_average_precision(data.initial_scores, data.relevance, data.groups), 3)
    0.824
    >>> noisy = load_digits_reranking(n_pool=500, noise=1.0)
    >>> round(mean_average_precision(noisy.initial_scores, noisy.relevance, noisy.groups), 3)
    0.299
    """
    rng = check_random_state(random_state)
    digits = load_digits()
    labelled = np.concatenate([
        rng.choice(np.flatnonzero(digits.target == k), n_labeled_per_class, replace=False)
        for k in range(10)
    ])
    unlabelled = np.setdiff1d(np.arange(len(digits.target)), labelled)
    if n_pool > len(unlabelled):
        raise ValueError(
            f"n_pool={n_pool} exceeds the {len(unlabelled)} digits left unlabelled by "
            f"n_labeled_per_class={n_labeled_per_class}."
        )
    pool = rng.choice(unlabelled, n_pool, replace=False)
    groups = np.repeat(np.arange(10), n_pool)
    relevance = np.tile(digits.target[pool], 10) == groups
    if noise is None:
        scorer = LogisticRegression(C=0.01, max_iter=2000).fit(digits.data[labelled],
                                                               digits.target[labelled])
        initial = scorer.predict_proba(digits.data[pool]).T.ravel()
    else:
        initial = relevance + noise * rng.standard_normal(len(relevance))
    return Bunch(
        features=np.tile(digits.data[pool] / 16, (10, 1)),
        initial_scores=initial,
        groups=groups,
        relevance=relevance,
        DESCR=load_digits_reranking.__doc__.split("\n\n")[1],
    )
