"""Applies exported SavedModels to MultiSlot files, as a user without the op library would.

Run as a script by tests/test_export_saved_model.py, in a process of its own that never loads
the adam_async op library, so that a SavedModel needing an op of ours fails to load here:

    python export_predict.py jobs.json

`jobs.json` lists jobs `{"model": DIR, "feed": data.prototxt, "data": FILE, "out": NPZ}` (each
slot of the DataFeedDesc fed as `<slot>` values plus `<slot>/row_splits`, as the signature
names them) or `{"model": DIR, "words": [...], "out": NPZ}` for word2vec lookups; each job's
outputs are written to its `out` as arrays named by the signature's outputs. A job with
`"error": {...}` feeds those inputs instead and writes the error message as `error`.
"""

import json
import re
import sys

import numpy as np
import tensorflow as tf


def read_slots(feed):
    """The used slots of a DataFeedDesc, in order: (name, is_float)."""
    text = open(feed).read()
    slots = []
    for block in re.findall(r"slots\s*\{([^}]*)\}", text):
        name = re.search(r'name:\s*"([^"]+)"', block).group(1)
        kind = re.search(r'type:\s*"([^"]+)"', block).group(1)
        used = re.search(r"is_used:\s*(\w+)", block)
        if used is None or used.group(1) == "true":
            slots.append((name, kind == "float"))
    return slots


def read_multislot(feed, data):
    """Every slot's values and row splits from a MultiSlot file."""
    slots = read_slots(feed)
    cols = {name: ([], [0]) for name, _ in slots}
    for line in open(data):
        tokens = line.split()
        at = 0
        for name, is_float in slots:
            count = int(tokens[at])
            values = tokens[at + 1:at + 1 + count]
            at += 1 + count
            cols[name][0].extend(float(v) if is_float else int(v) for v in values)
            cols[name][1].append(len(cols[name][0]))
    return cols


def run(job):
    fn = tf.saved_model.load(job["model"]).signatures["serving_default"]
    specs = fn.structured_input_signature[1]
    if "words" in job:
        feed = {"words": tf.constant(job["words"])}
    elif "error" in job:
        feed = {k: tf.constant(v, specs[k].dtype) for k, v in job["error"].items()}
    else:
        cols = read_multislot(job["feed"], job["data"])
        feed = {}
        for key, spec in specs.items():
            if key.endswith("/row_splits"):
                feed[key] = tf.constant(cols[key[:-len("/row_splits")]][1], tf.int64)
            else:
                feed[key] = tf.constant(cols[key][0], spec.dtype)
    if "error" in job:
        try:
            fn(**feed)
            message = ""
        except tf.errors.OpError as e:
            message = e.message
        np.savez(job["out"], error=np.array(message))
        return
    out = {k: v.numpy() for k, v in fn(**feed).items()}
    # Strings (label names) as text, which np.load reads without pickles.
    out = {k: np.char.decode(v.astype(bytes)) if v.dtype == object else v
           for k, v in out.items()}
    np.savez(job["out"], inputs=np.array(sorted(specs)), **out)


if __name__ == "__main__":
    for job in json.load(open(sys.argv[1])):
        run(job)
