"""The bundled WordNet reverse-dictionary dataset."""

import json
from importlib import resources

import numpy as np
from sklearn.utils import Bunch

DATA_FILE = "wordnet_revdict.npz"



def packaged_arrays(name):
    """The arrays of the packaged ``.npz`` file ``name`` (in ``datasets/data``)."""
    with resources.files("skqbnorm.datasets").joinpath("data", name).open("rb") as handle:
        return dict(np.load(handle, allow_pickle=False))

def load_wordnet_revdict():
    """Load the WordNet reverse dictionary: find a noun from its definition.

    Queries are the definitions (glosses) of 2,000 WordNet 3.0 noun synsets, the
    gallery is their head words, and query ``i`` is answered by gallery item ``i``.
    Two querybanks come with it: the glosses of 4,000 other nouns (in-domain, a
    training split) and 2,000 English user-interface messages from gettext
    catalogues (far-domain). A gallery bank (gallery-modality samples outside the
    gallery, as DBNorm and DBSN use) holds the head words of the first 3,000
    in-domain bank nouns: ``bank_glosses[i]`` is the definition of
    ``gallery_bank_words[i]`` for ``i < len(gallery_bank_words)``, a training
    retrieval task disjoint in words from the test queries (WordNet repeats a few
    glosses verbatim: 2 test glosses also stand in the bank, for other nouns). All
    texts are embedded by the
    sentence encoder all-MiniLM-L6-v2 (384 dimensions, L2-normalised; stored as
    float16, returned as float32). See ``skqbnorm/datasets/data/README.md`` for
    provenance and licences; the source repository's ``scripts/build_wordnet_revdict.py``
    builds the file.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``gallery_embeddings`` (2000, 384), ``query_embeddings`` (2000, 384),
        ``bank_embeddings`` (4000, 384), ``far_bank_embeddings`` (2000, 384),
        ``gallery_bank_embeddings`` (3000, 384), ``query_gt`` (2000,),
        ``gallery_words``, ``query_glosses``, ``bank_glosses``,
        ``far_bank_domains`` (the message catalogue of each far-domain bank entry),
        ``gallery_bank_words``, ``provenance`` (dict) and ``DESCR``.

    Examples
    --------
    >>> from skqbnorm.datasets import load_wordnet_revdict
    >>> data = load_wordnet_revdict()
    >>> data.query_embeddings.shape, data.bank_embeddings.shape
    ((2000, 384), (4000, 384))
    >>> str(data.gallery_words[1]), str(data.query_glosses[1])
    ('receptiveness', 'willingness or readiness to receive (especially impressions or ideas)')

    The gallery bank, its words paired with the first in-domain bank glosses:

    >>> data.gallery_bank_embeddings.shape
    (3000, 384)
    >>> str(data.gallery_bank_words[0]), str(data.bank_glosses[0])
    ('tourism', 'the business of providing services to tourists')
    """
    arrays = packaged_arrays(DATA_FILE)
    embeddings = {
        name: arrays[name].astype(np.float32) for name in arrays if name.endswith("_embeddings")
    }
    return Bunch(
        **embeddings,
        query_gt=np.arange(len(arrays["gallery_words"])),
        gallery_words=arrays["gallery_words"],
        query_glosses=arrays["query_glosses"],
        bank_glosses=arrays["bank_glosses"],
        far_bank_domains=arrays["far_bank_domains"],
        gallery_bank_words=arrays["gallery_bank_words"],
        provenance=json.loads(str(arrays["provenance"])),
        DESCR=load_wordnet_revdict.__doc__.split("\n\n")[1],
    )
