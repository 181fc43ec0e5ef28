"""A seeded corpus of English sentences with gold word-to-word relations (chapter 3, empirical head roles).

Chapter 3 asks which heads of a trained encoder track grammar. To score a
head we need sentences whose grammar we know exactly, so this module writes
them: a handful of templates filled from word lists written for this book,
each template placing words so that every gold relation is known by
construction, plus hand-written pronoun minimal pairs in which one word flips
the antecedent of the pronoun.

The relations are :class:`~mha.corpora.annotation.Relation` arrows between word indices, of the kinds
:mod:`mha.corpora.annotation` lists (``det_noun``: determiner -> noun, ...); import the types from there.

The relations listed for a sentence are correct but not exhaustive: a pronoun
item, for instance, is annotated only for what the minimal pair tests (and the
determiners of its two candidate nouns).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from mha.core.argument_checks import check_items_of
from mha.core.validation import check_flag, check_seed, check_whole_number
from mha.corpora.annotation import RELATION_KINDS, AnnotatedSentence, Relation

__all__ = [
    "DETERMINERS",
    "ADJECTIVES",
    "NOUNS",
    "VERBS",
    "PREPOSITIONS",
    "POSSESSIVE_PRONOUNS",
    "AUXILIARIES",
    "PERSONAL_PRONOUNS",
    "TEMPLATE_NAMES",
    "generate_corpus",
    "pronoun_pairs",
    "relation_counts",
]

# --- word lists, written for this book -------------------------------------------------

DETERMINERS_SINGULAR = ("the", "a", "this", "that", "every", "each")
DETERMINERS_PLURAL = ("the", "these", "those", "some")
DETERMINERS: frozenset[str] = frozenset(DETERMINERS_SINGULAR + DETERMINERS_PLURAL + ("an",))

# (singular, plural) pairs
PEOPLE = (
    ("teacher", "teachers"), ("farmer", "farmers"), ("doctor", "doctors"), ("pilot", "pilots"),
    ("baker", "bakers"), ("singer", "singers"), ("neighbour", "neighbours"), ("student", "students"),
    ("writer", "writers"), ("driver", "drivers"), ("sailor", "sailors"), ("painter", "painters"),
    ("nurse", "nurses"), ("child", "children"), ("woman", "women"), ("gardener", "gardeners"),
)
ANIMALS = (
    ("dog", "dogs"), ("cat", "cats"), ("horse", "horses"), ("owl", "owls"),
    ("goat", "goats"), ("parrot", "parrots"), ("pony", "ponies"), ("monkey", "monkeys"),
)
PEOPLE_AND_ANIMALS = PEOPLE + ANIMALS
THINGS = (
    ("book", "books"), ("letter", "letters"), ("apple", "apples"), ("ball", "balls"),
    ("window", "windows"), ("song", "songs"), ("car", "cars"), ("map", "maps"),
    ("cake", "cakes"), ("picture", "pictures"), ("chair", "chairs"), ("key", "keys"),
    ("box", "boxes"), ("lamp", "lamps"), ("door", "doors"), ("boat", "boats"),
    ("coat", "coats"), ("basket", "baskets"), ("bottle", "bottles"), ("umbrella", "umbrellas"),
)
PLACES = (
    ("garden", "gardens"), ("river", "rivers"), ("table", "tables"), ("bridge", "bridges"),
    ("station", "stations"), ("house", "houses"), ("market", "markets"), ("hill", "hills"),
    ("office", "offices"), ("kitchen", "kitchens"), ("forest", "forests"), ("school", "schools"),
)
ADJECTIVES: tuple[str, ...] = (
    "old", "young", "small", "big", "quiet", "happy", "tall", "clever", "brave", "tired",
    "red", "heavy", "bright", "angry", "gentle", "busy", "famous", "new", "green", "strange",
)
# transitive verbs in the past tense (no agreement to worry about)
TRANSITIVE_PAST = (
    "saw", "found", "carried", "painted", "opened", "watched", "liked", "moved", "cleaned",
    "dropped", "lifted", "held", "sold", "bought", "wanted", "noticed", "borrowed", "fixed",
    "kept", "chose",
)
# (base form, past participle) for auxiliary constructions
BASE_AND_PARTICIPLE = (
    ("see", "seen"), ("find", "found"), ("carry", "carried"), ("paint", "painted"),
    ("open", "opened"), ("watch", "watched"), ("move", "moved"), ("clean", "cleaned"),
    ("lift", "lifted"), ("sell", "sold"), ("buy", "bought"), ("fix", "fixed"),
    ("keep", "kept"), ("choose", "chosen"), ("borrow", "borrowed"), ("hide", "hidden"),
    ("take", "taken"), ("bring", "brought"),
)
ADVERBS_AFTER_AUXILIARY = ("not", "never", "often", "also")
MODALS = ("will", "can", "must", "should", "might", "could", "would")
# intransitive verbs in the present tense: (agrees with a singular subject, with a plural one)
INTRANSITIVE_PRESENT = (
    ("sleeps", "sleep"), ("waits", "wait"), ("laughs", "laugh"), ("sings", "sing"),
    ("smiles", "smile"), ("works", "work"), ("runs", "run"), ("rests", "rest"),
    ("listens", "listen"), ("arrives", "arrive"), ("stays", "stay"), ("complains", "complain"),
)
PLACE_PREPOSITIONS = (
    "in", "on", "near", "behind", "under", "beside", "across", "from", "above", "inside",
)
# prepositions that read naturally after a person ("the teacher near the windows")
ATTRACTOR_PREPOSITIONS = ("near", "behind", "beside", "with")
PREPOSITIONS: frozenset[str] = frozenset(PLACE_PREPOSITIONS + ATTRACTOR_PREPOSITIONS)
POSSESSIVE_PRONOUNS: tuple[str, ...] = ("my", "your", "his", "her", "its", "our", "their")
PERSONAL_PRONOUNS: tuple[str, ...] = ("it", "he", "she", "they")
AUXILIARIES: frozenset[str] = frozenset(MODALS + ("has", "have", "had"))

NOUNS: frozenset[str] = frozenset(w for pairs in (PEOPLE, ANIMALS, THINGS, PLACES) for pair in pairs for w in pair)
VERBS: frozenset[str] = frozenset(
    TRANSITIVE_PAST
    + tuple(w for pair in BASE_AND_PARTICIPLE for w in pair)
    + tuple(w for pair in INTRANSITIVE_PRESENT for w in pair)
)


# --- building one sentence --------------------------------------------------------------

class _SentenceBuilder:
    """Appends words one at a time and records relations by the indices it hands out."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.relations: list[Relation] = []

    def add(self, word: str) -> int:
        self.words.append(word)
        return len(self.words) - 1

    def relate(self, kind: str, source: int, target: int) -> None:
        self.relations.append(Relation(kind, source, target))

    def noun_phrase(self, rng: random.Random, noun: str, plural: bool, adjective_probability: float,
                    avoid_determiner: str = "") -> int:
        """determiner (adjective) noun; returns the noun's index and records det/adj -> noun."""
        choices = [d for d in (DETERMINERS_PLURAL if plural else DETERMINERS_SINGULAR) if d != avoid_determiner]
        det = self.add(rng.choice(choices))
        adj = self.add(rng.choice(ADJECTIVES)) if rng.random() < adjective_probability else None
        head = self.add(noun)
        self.relate("det_noun", det, head)
        if adj is not None:
            self.relate("adj_noun", adj, head)
        return head

    def build(self, origin: str, attractor: int | None = None) -> AnnotatedSentence:
        words = list(self.words)
        for i, word in enumerate(words[:-1]):  # a / an by the next word's first letter
            if word in ("a", "an"):
                words[i] = "an" if words[i + 1][0] in "aeiou" else "a"
        words[0] = words[0].capitalize()
        return AnnotatedSentence(tuple(words), tuple(self.relations), origin=origin, attractor=attractor)


def _pick(rng: random.Random, pairs: tuple[tuple[str, str], ...], plural: bool) -> str:
    return rng.choice(pairs)[1 if plural else 0]


def _simple_transitive(rng: random.Random) -> AnnotatedSentence:
    # The old farmer found a key .
    b = _SentenceBuilder()
    subject_plural, object_plural = rng.random() < 0.3, rng.random() < 0.3
    subject = b.noun_phrase(rng, _pick(rng, PEOPLE_AND_ANIMALS, subject_plural), subject_plural, 0.7)
    verb = b.add(rng.choice(TRANSITIVE_PAST))
    obj = b.noun_phrase(rng, _pick(rng, THINGS, object_plural), object_plural, 0.4)
    b.add(".")
    b.relate("subj_verb", subject, verb)
    b.relate("verb_obj", verb, obj)
    return b.build("simple_transitive")


def _prepositional_phrase(rng: random.Random) -> AnnotatedSentence:
    # The pilot left a coat under the old table .
    b = _SentenceBuilder()
    subject_plural, object_plural, place_plural = (rng.random() < 0.3 for _ in range(3))
    subject = b.noun_phrase(rng, _pick(rng, PEOPLE_AND_ANIMALS, subject_plural), subject_plural, 0.3)
    verb = b.add(rng.choice(TRANSITIVE_PAST))
    obj = b.noun_phrase(rng, _pick(rng, THINGS, object_plural), object_plural, 0.3)
    preposition = b.add(rng.choice(PLACE_PREPOSITIONS))
    place = b.noun_phrase(rng, _pick(rng, PLACES, place_plural), place_plural, 0.5)
    b.add(".")
    b.relate("subj_verb", subject, verb)
    b.relate("verb_obj", verb, obj)
    b.relate("prep_obj", preposition, place)
    return b.build("prepositional_phrase")


def _auxiliary(rng: random.Random) -> AnnotatedSentence:
    # The nurse will open the window . / The dogs have never hidden a ball .
    b = _SentenceBuilder()
    plural = rng.random() < 0.4
    subject = b.noun_phrase(rng, _pick(rng, PEOPLE_AND_ANIMALS, plural), plural, 0.4)
    base, participle = rng.choice(BASE_AND_PARTICIPLE)
    modal = rng.random() < 0.5
    aux = b.add(rng.choice(MODALS) if modal else rng.choice(("have" if plural else "has", "had")))
    if rng.random() < 0.4:  # an adverb between auxiliary and verb, so aux -> verb is not always offset +1
        b.add(rng.choice(ADVERBS_AFTER_AUXILIARY))
    verb = b.add(base if modal else participle)
    object_plural = rng.random() < 0.3
    obj = b.noun_phrase(rng, _pick(rng, THINGS, object_plural), object_plural, 0.4)
    b.add(".")
    b.relate("aux_verb", aux, verb)
    b.relate("subj_verb", subject, verb)
    b.relate("verb_obj", verb, obj)
    return b.build("auxiliary")


def _possessive_pronoun(rng: random.Random) -> AnnotatedSentence:
    # My tired neighbour borrowed their umbrella .
    b = _SentenceBuilder()
    possessor = b.add(rng.choice(POSSESSIVE_PRONOUNS))
    adj = b.add(rng.choice(ADJECTIVES)) if rng.random() < 0.5 else None
    subject = b.add(_pick(rng, PEOPLE_AND_ANIMALS, rng.random() < 0.3))
    verb = b.add(rng.choice(TRANSITIVE_PAST))
    object_possessor = b.add(rng.choice(POSSESSIVE_PRONOUNS))
    obj = b.add(_pick(rng, THINGS, rng.random() < 0.3))
    b.add(".")
    b.relate("poss_noun", possessor, subject)
    if adj is not None:
        b.relate("adj_noun", adj, subject)
    b.relate("subj_verb", subject, verb)
    b.relate("verb_obj", verb, obj)
    b.relate("poss_noun", object_possessor, obj)
    return b.build("possessive_pronoun")


def _possessive_noun(rng: random.Random) -> AnnotatedSentence:
    # The farmer 's dog found a ball .   ("'s" is its own word, as in UD English)
    b = _SentenceBuilder()
    owner = b.noun_phrase(rng, _pick(rng, PEOPLE, False), False, 0.0)
    b.add("'s")
    owned = b.add(_pick(rng, ANIMALS, rng.random() < 0.3))
    verb = b.add(rng.choice(TRANSITIVE_PAST))
    object_plural = rng.random() < 0.3
    obj = b.noun_phrase(rng, _pick(rng, THINGS, object_plural), object_plural, 0.3)
    b.add(".")
    b.relate("poss_noun", owner, owned)
    b.relate("subj_verb", owned, verb)
    b.relate("verb_obj", verb, obj)
    return b.build("possessive_noun")


def _adjective_stack(rng: random.Random) -> AnnotatedSentence:
    # The tired old farmer sleeps in the garden .   (adjective -> noun at offsets 2 and 1)
    b = _SentenceBuilder()
    plural = rng.random() < 0.4
    det = b.add(rng.choice(DETERMINERS_PLURAL if plural else DETERMINERS_SINGULAR))
    first, second = rng.sample(ADJECTIVES, 2)
    adj1, adj2 = b.add(first), b.add(second)
    subject = b.add(_pick(rng, PEOPLE_AND_ANIMALS, plural))
    verb = b.add(_pick(rng, INTRANSITIVE_PRESENT, plural))
    preposition = b.add(rng.choice(PLACE_PREPOSITIONS))
    place = b.noun_phrase(rng, _pick(rng, PLACES, False), False, 0.0)
    b.add(".")
    for source in (det, adj1, adj2):
        b.relate("det_noun" if source == det else "adj_noun", source, subject)
    b.relate("subj_verb", subject, verb)
    b.relate("prep_obj", preposition, place)
    return b.build("adjective_stack")


def _attractor_prepositional(rng: random.Random) -> AnnotatedSentence:
    # The teacher near the windows sleeps .   (attractor "windows" disagrees in number with the subject)
    b = _SentenceBuilder()
    plural = rng.random() < 0.5
    subject_pair, attractor_pair = rng.sample(PEOPLE_AND_ANIMALS + THINGS + PLACES, 2)
    while subject_pair not in PEOPLE_AND_ANIMALS:  # the subject must be able to sleep, wait, sing ...
        subject_pair, attractor_pair = rng.sample(PEOPLE_AND_ANIMALS + THINGS + PLACES, 2)
    subject = b.noun_phrase(rng, subject_pair[plural], plural, 0.3)
    preposition = b.add(rng.choice(ATTRACTOR_PREPOSITIONS))
    attractor = b.noun_phrase(rng, attractor_pair[not plural], not plural, 0.0)
    verb = b.add(_pick(rng, INTRANSITIVE_PRESENT, plural))
    b.add(".")
    b.relate("subj_verb", subject, verb)
    b.relate("prep_obj", preposition, attractor)
    return b.build("attractor_prepositional", attractor=attractor)


def _attractor_relative(rng: random.Random) -> AnnotatedSentence:
    # The singer that the children watched smiles .  /  The dogs that found the key wait .
    b = _SentenceBuilder()
    plural = rng.random() < 0.5
    subject = b.noun_phrase(rng, _pick(rng, PEOPLE_AND_ANIMALS, plural), plural, 0.0)
    b.add("that")
    if rng.random() < 0.5:  # object relative: the inner clause has its own subject
        inner_subject = b.noun_phrase(rng, _pick(rng, PEOPLE_AND_ANIMALS, not plural), not plural, 0.0,
                                      avoid_determiner="that")  # no "that that"
        inner_verb = b.add(rng.choice(TRANSITIVE_PAST))
        b.relate("subj_verb", inner_subject, inner_verb)
        attractor = inner_subject
    else:  # subject relative: the inner clause has an object
        inner_verb = b.add(rng.choice(TRANSITIVE_PAST))
        attractor = b.noun_phrase(rng, _pick(rng, THINGS, not plural), not plural, 0.0)
        b.relate("verb_obj", inner_verb, attractor)
    verb = b.add(_pick(rng, INTRANSITIVE_PRESENT, plural))
    b.add(".")
    b.relate("subj_verb", subject, verb)
    return b.build("attractor_relative", attractor=attractor)


_TEMPLATES = {
    "simple_transitive": _simple_transitive,
    "prepositional_phrase": _prepositional_phrase,
    "auxiliary": _auxiliary,
    "possessive_pronoun": _possessive_pronoun,
    "possessive_noun": _possessive_noun,
    "adjective_stack": _adjective_stack,
    "attractor_prepositional": _attractor_prepositional,
    "attractor_relative": _attractor_relative,
}
TEMPLATE_NAMES: tuple[str, ...] = tuple(_TEMPLATES)


# --- pronoun minimal pairs, written for this book ---------------------------------------
# (frame with one slot, first candidate, second candidate, pronoun,
#  filler that makes the pronoun mean the first candidate, filler for the second)
_PRONOUN_PAIRS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("the trophy does not fit in the suitcase because it is too {} .", "trophy", "suitcase", "it", "big", "small"),
    ("the piano does not fit through the doorway because it is too {} .", "piano", "doorway", "it", "wide", "narrow"),
    ("the book does not fit in the drawer because it is too {} .", "book", "drawer", "it", "thick", "full"),
    ("the cat could not climb the fence because it was too {} .", "cat", "fence", "it", "tired", "tall"),
    ("the rope could not hold the anchor because it was too {} .", "rope", "anchor", "it", "weak", "heavy"),
    ("the ladder could not reach the roof because it was too {} .", "ladder", "roof", "it", "short", "high"),
    ("the dog could not catch the rabbit because it was too {} .", "dog", "rabbit", "it", "slow", "quick"),
    ("the bridge could not carry the train because it was too {} .", "bridge", "train", "it", "fragile", "heavy"),
    ("the boat could not cross the river because it was too {} .", "boat", "river", "it", "leaky", "rough"),
    ("the lamp could not light the hall because it was too {} .", "lamp", "hall", "it", "dim", "large"),
    ("the horse could not jump the wall because it was too {} .", "horse", "wall", "it", "tired", "high"),
    ("the rock smashed the vase because it was {} .", "rock", "vase", "it", "heavy", "fragile"),
    ("the car passed the bicycle because it was {} .", "car", "bicycle", "it", "fast", "slow"),
    ("the fish ignored the worm because it was {} .", "fish", "worm", "it", "full", "rotten"),
    ("the coat did not keep out the wind because it was too {} .", "coat", "wind", "it", "thin", "strong"),
    ("the blanket did not cover the bed because it was too {} .", "blanket", "bed", "it", "small", "wide"),
    ("the nurse helped the patient because she was {} .", "nurse", "patient", "she", "kind", "sick"),
    ("the coach praised the player because he was {} .", "coach", "player", "he", "proud", "skilled"),
    ("the waiter thanked the guest because she was {} .", "waiter", "guest", "she", "grateful", "generous"),
    ("the student asked the teacher because she was {} .", "student", "teacher", "she", "confused", "wise"),
    ("the hikers avoided the bears because they were {} .", "hikers", "bears", "they", "afraid", "hungry"),
    ("the mice ran from the cats because they were {} .", "mice", "cats", "they", "frightened", "hungry"),
)


def pronoun_pairs() -> list[AnnotatedSentence]:
    """The pronoun -> antecedent minimal pairs, two sentences per pair (chapter 3, empirical head roles).

    Each pair shares a frame and differs in exactly one word, which flips the
    noun the pronoun refers to ("... because it is too big" -> trophy, "...
    too small" -> suitcase). Every item has ``pronoun``, ``candidates`` (the two
    nouns, in sentence order), ``antecedent``, a ``pron_antecedent`` relation
    (pronoun row -> antecedent column) and ``det_noun`` for the candidates.
    Returns 2 * 22 sentences, identical on every call (no randomness).
    """
    sentences = []
    for frame, first, second, pronoun, first_filler, second_filler in _PRONOUN_PAIRS:
        for filler, answer in ((first_filler, first), (second_filler, second)):
            words = frame.format(filler).split()
            candidates = (words.index(first), words.index(second))
            pronoun_index = words.index(pronoun)
            antecedent = words.index(answer)
            relations = [Relation("det_noun", c - 1, c) for c in candidates if words[c - 1] in DETERMINERS]
            relations.append(Relation("pron_antecedent", pronoun_index, antecedent))
            words[0] = words[0].capitalize()
            sentences.append(AnnotatedSentence(
                tuple(words), tuple(relations), origin="pronoun_pair", pair_id=f"{first}-{second}",
                pronoun=pronoun_index, candidates=candidates, antecedent=antecedent,
            ))
    return sentences


MOST_SENTENCES_PER_TEMPLATE = 10_000
"""The most sentences :func:`generate_corpus` is asked for per template: beyond it a template mostly repeats itself."""


def _template_sentences(rng: random.Random, sentences_per_template: int) -> Iterator[AnnotatedSentence]:
    """Round-robin over the templates, skipping any sentence already produced."""
    seen: set[str] = set()
    for _ in range(sentences_per_template):
        for name, template in _TEMPLATES.items():
            for _attempt in range(1000):
                sentence = template(rng)
                if sentence.text not in seen:
                    break
            else:
                raise RuntimeError(f"template {name!r} keeps repeating itself; ask for fewer sentences.")
            seen.add(sentence.text)
            yield sentence


def generate_corpus(
    sentences_per_template: int = 70, seed: int = 0, *, include_pronoun_pairs: bool = True
) -> list[AnnotatedSentence]:
    """A deterministic list of annotated English sentences (chapter 3, empirical head roles).

    Each of the :data:`TEMPLATE_NAMES` templates contributes
    ``sentences_per_template`` distinct sentences, interleaved (one from each
    template in turn), drawn from a ``random.Random(seed)`` so the same seed
    always gives the same corpus and global random state is never touched;
    the :func:`pronoun_pairs` (44 sentences, the same for every seed) follow
    when ``include_pronoun_pairs``. The default gives 8 * 70 + 44 = 604
    sentences of 6 to 14 words. Returns a list of :class:`~mha.corpora.annotation.AnnotatedSentence`.
    """
    sentences_per_template = check_whole_number("sentences_per_template", sentences_per_template, minimum=0,
                                                maximum=MOST_SENTENCES_PER_TEMPLATE,
                                                meaning="a template makes only so many different sentences")
    rng = random.Random(check_seed("seed", seed))
    sentences = list(_template_sentences(rng, sentences_per_template))
    if check_flag("include_pronoun_pairs", include_pronoun_pairs):
        sentences += pronoun_pairs()
    return sentences


def relation_counts(sentences: Iterable[AnnotatedSentence]) -> dict[str, int]:
    """How many gold relations of each kind ``sentences`` hold, in :data:`RELATION_KINDS` order, zeros included."""
    sentences = check_items_of("sentences", sentences, AnnotatedSentence, "an AnnotatedSentence, e.g. from "
                               "generate_corpus()")
    counts = dict.fromkeys(RELATION_KINDS, 0)
    for sentence in sentences:
        for relation in sentence.relations:
            counts[relation.kind] += 1
    return counts
