"""Ranking tools by a query: BM25 over each tool's name and description, with boosts for an exact
name and for name prefixes. Local and deterministic: no network, no model.

Names are split where people split them (``server__create_issue``, ``getIssue``, ``v2list``), words
are lower-cased and lightly stemmed (``issues`` finds ``issue``), and a query word that is no word
of any tool is read as a prefix (``calc`` finds ``calculate``) at half weight. Name words count
twice as much as description words. Ties keep the catalog's order.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

# BM25's usual constants: term-frequency saturation and length normalisation.
K1 = 1.2
B = 0.75
NAME_WEIGHT = 2.0
PREFIX_WEIGHT = 0.5
MIN_PREFIX = 3  # shorter query words are not read as prefixes: "a" would match everything
EXACT_NAME_BOOST = 100.0
NAME_PREFIX_BOOST = 10.0

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it of on or that the this to with".split()
)


@lru_cache(maxsize=65536)  # vocabularies are small next to the words seen: thousands of tools share them
def stem(word: str) -> str:
    """A light English stem, the same for query and tools: plurals and -ing / -ed endings."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    return word


def words(text: str) -> list[str]:
    """The stemmed, lower-cased words of a name or a description, stopwords left out."""
    return list(_words(text))


# A re-list rebuilds the index with mostly the same texts: their words are not worked out again.
@lru_cache(maxsize=32768)
def _words(text: str) -> tuple[str, ...]:
    lowered = (match.lower() for match in _WORD.findall(text))
    return tuple(stem(word) for word in lowered if word not in _STOPWORDS)


@dataclass(frozen=True)
class Document:
    """What one tool is found by: its name(s) and its description."""

    name: str  # the name the model calls (server__tool)
    description: str
    aliases: tuple[str, ...] = ()  # other names that count as exact (the server's own name)


class _Field:
    """One field of every document: its words' postings and the lengths BM25 needs."""

    def __init__(self, texts: Iterable[Sequence[str]]) -> None:
        self.postings: dict[str, list[tuple[int, int]]] = {}
        self.lengths: list[int] = []
        postings = self.postings
        for index, terms in enumerate(texts):
            self.lengths.append(len(terms))
            counts: dict[str, int] = {}
            for term in terms:
                counts[term] = counts.get(term, 0) + 1
            for term, count in counts.items():
                if term in postings:
                    postings[term].append((index, count))
                else:
                    postings[term] = [(index, count)]
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0

    def add_scores(self, term: str, weight: float, total: int, scores: dict[int, float]) -> None:
        postings = self.postings.get(term)
        if not postings:
            return
        idf = math.log(1 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
        for index, count in postings:
            norm = K1 * (1 - B + B * self.lengths[index] / (self.average or 1))
            scores[index] = scores.get(index, 0.0) + weight * idf * count * (K1 + 1) / (count + norm)


class ToolIndex:
    """An index of tool documents, searched with :meth:`search`."""

    def __init__(self, documents: Sequence[Document]) -> None:
        self.documents = list(documents)
        self._names = _Field(_words(" ".join((d.name, *d.aliases))) for d in self.documents)
        self._descriptions = _Field(_words(d.description) for d in self.documents)
        self._vocabulary = sorted(set(self._names.postings) | set(self._descriptions.postings))
        self._exact: dict[str, list[int]] = {}
        for index, document in enumerate(self.documents):
            for name in {document.name.lower(), *(alias.lower() for alias in document.aliases)}:
                self._exact.setdefault(name, []).append(index)
        self._lowered = [document.name.lower() for document in self.documents]

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, limit: int) -> list[Document]:
        """The best ``limit`` documents for ``query``, best first; none when nothing matches."""
        scores: dict[int, float] = {}
        total = len(self.documents)
        for term, weight in self._expanded(words(query)).items():
            self._names.add_scores(term, NAME_WEIGHT * weight, total, scores)
            self._descriptions.add_scores(term, weight, total, scores)
        phrase = query.strip().lower()
        for index in self._exact.get(phrase, ()):
            scores[index] = scores.get(index, 0.0) + EXACT_NAME_BOOST
        if len(phrase) >= MIN_PREFIX and not phrase.isspace() and " " not in phrase:
            for index, name in enumerate(self._lowered):
                if name.startswith(phrase) or name.partition("__")[2].startswith(phrase):
                    scores[index] = scores.get(index, 0.0) + NAME_PREFIX_BOOST
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return [self.documents[index] for index, _ in ranked[:limit]]

    def _expanded(self, terms: list[str]) -> dict[str, float]:
        """Each query word with its weight; a word no tool has stands for the words it begins."""
        expanded: dict[str, float] = {}
        for term in terms:
            if term in self._names.postings or term in self._descriptions.postings:
                expanded[term] = expanded.get(term, 0.0) + 1.0
                continue
            if len(term) < MIN_PREFIX:
                continue
            start = bisect_left(self._vocabulary, term)
            for word in self._vocabulary[start:]:
                if not word.startswith(term):
                    break
                expanded[word] = max(expanded.get(word, 0.0), PREFIX_WEIGHT)
        return expanded
