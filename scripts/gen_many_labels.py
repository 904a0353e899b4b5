"""A seeded text classification set of many labels, for the losses made for them (hierarchical
softmax, one-vs-all): labels of Zipf frequency (label r, from 0, drawn with weight 1 / (r + 1)),
each with its own words, so that the set is learnable and the frequent labels dominate as in
real tag sets.

Label r owns the words `t{r}x{0..5}`, and shares `t{r+1}x{0,1}` with its neighbour (so that
neighbours are confusable). A document has 10 to 30 tokens: each is one of its label's words
with probability 0.35, else a background word `b{j}` drawn by Zipf over 30,000 of them.

Library: `generate(docs, labels, seed)` gives `(label, tokens)` pairs (used by
scripts/bench_quality.py's `manylabels` set); run as a script it writes fastText lines:
  scripts/gen_many_labels.py --docs 1000 --labels 100 --seed 1 > build/many.txt
"""
import argparse
import bisect
import itertools
import random

BACKGROUND = 30_000
OWN_WORDS = 6


def zipf_cumulative(n):
    return list(itertools.accumulate(1.0 / (r + 1) for r in range(n)))


def generate(docs, labels, seed):
    rng = random.Random(seed)
    label_cum = zipf_cumulative(labels)
    word_cum = zipf_cumulative(BACKGROUND)
    out = []
    for _ in range(docs):
        label = bisect.bisect_left(label_cum, rng.random() * label_cum[-1])
        own = [f"t{label}x{k}" for k in range(OWN_WORDS)]
        own += [f"t{(label + 1) % labels}x{k}" for k in range(2)]
        tokens = []
        for _ in range(rng.randint(10, 30)):
            if rng.random() < 0.35:
                tokens.append(rng.choice(own))
            else:
                tokens.append(f"b{bisect.bisect_left(word_cum, rng.random() * word_cum[-1])}")
        out.append((label, tokens))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=300_000)
    p.add_argument("--labels", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    for label, tokens in generate(args.docs, args.labels, args.seed):
        print(f"__label__{label} " + " ".join(tokens))


if __name__ == "__main__":
    main()
