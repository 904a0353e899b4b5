"""Writes examples/text/{train,test}.txt: short fastText-format lines (`__label__topic words`)
about three topics, for the text-classification and word2vec walk-throughs (docs/). Each line
mixes a few of its topic's words with common words that every topic shares. Standard library only; a fixed seed, so the files are the same on every run."""
import random
from pathlib import Path

rng = random.Random(11)
topics = {
    "sports": "match team goal player coach score league season win referee ball stadium fans "
              "striker keeper",
    "cooking": "recipe oven flour butter garlic simmer bake pan sauce onion salt pepper dough "
               "roast kitchen",
    "weather": "rain cloud storm wind forecast sunny cold snow temperature humid fog thunder "
               "breeze frost umbrella",
}
common = ("the a of and to in is it for on with this was at by very today we our after "
          "before really").split()
topic_words = {t: ws.split() for t, ws in topics.items()}


def line():
    topic = rng.choice(sorted(topics))
    words = [rng.choice(topic_words[topic]) for _ in range(rng.randint(1, 3))]
    words += [rng.choice(common) for _ in range(rng.randint(3, 8))]
    # Words of another topic in a third of the lines and a label in twenty drawn at random, so
    # the task is no lookup table and test accuracy stays below 1.
    if rng.random() < 0.3:
        other = rng.choice([t for t in sorted(topics) if t != topic])
        words += [rng.choice(topic_words[other]) for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.05:
        topic = rng.choice(sorted(topics))
    rng.shuffle(words)
    return f"__label__{topic} {' '.join(words)}\n"


here = Path(__file__).parent
for name, n in [("train", 600), ("test", 150)]:
    (here / f"{name}.txt").write_text("".join(line() for _ in range(n)))
