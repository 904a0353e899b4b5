"""Writes examples/ctr/{train,test}.txt: MultiSlot lines `1 user 1 item 1 hour 1 site 1 label` drawn
from a known model: per-id weights plus an hour-group x site-group interaction (which a
factorization machine can learn and logistic regression cannot). Standard library only."""
import math
import random
from pathlib import Path

rng = random.Random(7)
users, items, hours, sites = 1000, 500, 24, 50
w = {f: [rng.gauss(0, 0.5) for _ in range(n)] for f, n in
     [("user", users), ("item", items), ("hour", hours), ("site", sites)]}


def line():
    u, i, h, s = (rng.randrange(n) for n in (users, items, hours, sites))
    inter = 1.5 if (h % 3) == (s % 3) else -0.75
    logit = -1.0 + w["user"][u] + w["item"][i] + w["hour"][h] + w["site"][s] + inter
    y = int(rng.random() < 1 / (1 + math.exp(-logit)))
    return f"1 {u} 1 {i} 1 {h} 1 {s} 1 {y}\n"


here = Path(__file__).parent
for name, n in [("train", 20000), ("test", 5000)]:
    (here / f"{name}.txt").write_text("".join(line() for _ in range(n)))
