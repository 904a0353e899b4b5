"""Writes examples/ctr/{train,test}.txt: MultiSlot lines `1 user 1 item 1 hour 1 site 1 label` drawn
from a known model: per-id weights plus an hour-group x site-group interaction (which a
factorization machine can learn and logistic regression cannot). The first 4000 training and
1000 test lines are also written as libsvm (`.svm`), libffm (`.ffm`) and Vowpal Wabbit (`.vw`)
text, the input of the `hogwild convert` walk-through of docs/ctr.md. Standard library only."""
import math
import random
from pathlib import Path

rng = random.Random(7)
users, items, hours, sites = 1000, 500, 24, 50
w = {f: [rng.gauss(0, 0.5) for _ in range(n)] for f, n in
     [("user", users), ("item", items), ("hour", hours), ("site", sites)]}
# libsvm and libffm number features across all fields (from 1); libffm adds the field number.
offsets = [1, 1 + users, 1 + users + items, 1 + users + items + hours]


def draw():
    u, i, h, s = (rng.randrange(n) for n in (users, items, hours, sites))
    inter = 1.5 if (h % 3) == (s % 3) else -0.75
    logit = -1.0 + w["user"][u] + w["item"][i] + w["hour"][h] + w["site"][s] + inter
    y = int(rng.random() < 1 / (1 + math.exp(-logit)))
    return (u, i, h, s), y


def multislot(ids, y):
    return " ".join(f"1 {x}" for x in ids) + f" 1 {y}\n"


def libsvm(ids, y):
    return f"{y} " + " ".join(f"{o + x}:1" for o, x in zip(offsets, ids)) + "\n"


def libffm(ids, y):
    return f"{y} " + " ".join(f"{f}:{o + x}:1" for f, (o, x) in enumerate(zip(offsets, ids))) + "\n"


def vw(ids, y):
    # VW's labels are -1 and 1; one namespace per field.
    names = ["user", "item", "hour", "site"]
    return f"{2 * y - 1} " + " ".join(f"|{n} {n[0]}{x}" for n, x in zip(names, ids)) + "\n"


here = Path(__file__).parent
for name, n, n_other in [("train", 20000, 4000), ("test", 5000, 1000)]:
    lines = [draw() for _ in range(n)]
    (here / f"{name}.txt").write_text("".join(multislot(*l) for l in lines))
    for ext, fmt in [("svm", libsvm), ("ffm", libffm), ("vw", vw)]:
        (here / f"{name}.{ext}").write_text("".join(fmt(*l) for l in lines[:n_other]))
