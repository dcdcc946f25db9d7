"""Readable pseudo-words for synthetic corpora.

``"words"`` style builds words from consonant-vowel syllables; every word that a planted
topic owns starts with that topic's stem, so a topic's top words are easy to recognise
(``kabe kalo kami ...``). ``"tagged"`` style spells the owner out: ``t03_w0012`` is word 12
of topic 3. The vocabulary depends only on its size and the number of topics, not on the
data seed.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
SYLLABLES = tuple(c + v for c in CONSONANTS for v in VOWELS)  # 70
_WORD_SEED = 20240601  # fixed: the vocabulary does not change with the data seed


@functools.lru_cache(maxsize=4)
def _all_of_length(n_syllables: int) -> tuple[str, ...]:
    return tuple("".join(p) for p in itertools.product(SYLLABLES, repeat=n_syllables))


def _shortest_first(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct syllable strings: all 1-syllable ones (shuffled), then 2, then 3, ..."""
    out: list[str] = []
    length = 1
    while len(out) < n:
        group = _all_of_length(length)
        order = rng.permutation(len(group))[: n - len(out)]
        out.extend(group[i] for i in order)
        length += 1
    return out


def block_owner(n_words: int, k: int) -> np.ndarray:
    """The topic that owns each word: k contiguous blocks of (nearly) equal size."""
    return (np.arange(n_words, dtype=np.int64) * k) // n_words


def topic_vocab(n_words: int, k: int, style: str = "words") -> list[str]:
    """``n_words`` distinct words; word w belongs to topic ``block_owner(n_words, k)[w]``.

    Within a block the words are listed in the order the planted topic ranks them (its most
    probable word first).
    """
    if style not in ("words", "tagged"):
        raise ValueError(f"vocab_style must be 'words' or 'tagged', got {style!r}")
    if k < 1 or n_words < k:
        raise ValueError(
            f"need 1 <= k <= n_words for a topic vocabulary, got k={k}, n_words={n_words}"
        )
    owner = block_owner(n_words, k)
    sizes = np.bincount(owner, minlength=k)
    if style == "tagged":
        tw, ww = len(str(k - 1)), len(str(int(sizes.max()) - 1))
        return [f"t{t:0{tw}d}_w{j:0{ww}d}" for t in range(k) for j in range(int(sizes[t]))]
    rng = np.random.default_rng(_WORD_SEED)
    stem_len = 1
    while len(SYLLABLES) ** stem_len < k:
        stem_len += 1
    stems = _all_of_length(stem_len)
    stems = [stems[i] for i in rng.permutation(len(stems))[:k]]
    words: list[str] = []
    for t in range(k):
        # equal-length stems make stem + suffix unique across topics
        words.extend(stems[t] + s for s in _shortest_first(int(sizes[t]), rng))
    return words
