"""Exporting a ``tf.compat.v1`` graph for ``hogwild tf-train``, the Rust runner, in one call.

>>> import tensorflow as tf
>>> from adam_async import runner
>>> graph = tf.Graph()
>>> with graph.as_default():
...     words = tf.compat.v1.ragged.placeholder(tf.int64, 1, [], name="words")
...     label = tf.compat.v1.placeholder(tf.int64, [None], name="label")
...     emb = tf.compat.v1.get_variable("emb", [100, 2])
...     logits = tf.reduce_mean(tf.gather(emb, words), axis=1)
...     loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
...         labels=label, logits=logits))
...     _ = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss)
>>> meta = runner.export("/tmp/bow.meta", inputs={"words": words, "label": label},
...                      outputs={"loss": loss})

The file is the MetaGraphDef the runner reads (docs/runner.md has the whole contract):

* ``signature_def["train"]``: one input per data-feed slot, keyed by the slot's name; a
  variable-length slot (a ``tf.RaggedTensor`` placeholder, or a ``(values, row_splits)`` pair) is
  two inputs, ``<slot>`` (all values of the batch, ``[N]``) and ``<slot>/row_splits`` (``[B+1]``,
  int64). Outputs are float32 scalars, keyed by the name the runner prints.
* collection ``train_op``: every op one step runs (by default the graph's own ``train_op``
  collection, where each ``minimize()`` puts its op: a model with two optimizers has two);
* collection ``init_op``: the op that initialises the variables when the runner does not restore;
* ``saver_def``: a ``tf.compat.v1.train.Saver``'s, so the runner's ``--save``/``--restore``
  write and read ordinary TensorFlow checkpoints (``saver.restore(sess, prefix)`` in Python).

:func:`export` refuses at once, naming the tensor, what the runner would refuse at load or at the
first step. :func:`export_saved_model` writes the same graph with its variables' current values as
a TF1 SavedModel directory. With ``cluster=True`` the graph gets the ops of the runner's
parameter-server protocol (``tf-train --ps-hosts``).

:func:`export_keras` writes a Keras 3 model with its loss and optimizer as a TF2 SavedModel whose
``train`` signature runs one optimizer step (and ``eval`` the same values without it), inputs
keyed by slot; :func:`load_keras_weights` reads what ``tf-train --save`` wrote back into the
model. docs/runner.md is the guide.
"""

import os
import pathlib
import re
import shutil
import tempfile
from typing import Mapping, NamedTuple, Optional, Sequence, Union

import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

__all__ = [
    "ExportError",
    "SIGNATURE",
    "Slot",
    "TRAIN_TAG",
    "export",
    "export_keras",
    "export_saved_model",
    "load_keras_weights",
    "read_feed",
]

SIGNATURE = "train"
"""The signature the runner reads."""
TRAIN_TAG = "train"
"""The tag :func:`export_saved_model` gives its MetaGraph (``tf-train --tag``'s default)."""
ROW_SPLITS = "/row_splits"
"""The suffix of the input key that carries a variable-length slot's row offsets."""
METHOD_NAME = "hogwild/train"
_INPUT_DTYPES = (tf.int64, tf.float32)
_CLUSTER_COUNTER = "hogwild/finished_workers"
# The collections of the runner's chief/worker protocol in a cluster (crates/hogwild-tf graph.rs).
_READY = "ready_op"
_FINISH = "hogwild/finish_op"
_FINISHED = "hogwild/finished_workers"
_FINISHED_INIT = "hogwild/finished_workers_init"

Tensorish = Union[tf.Tensor, tf.RaggedTensor, str, Sequence]


class ExportError(ValueError):
    """The graph breaks the runner's contract; the message names the tensor or op."""


class _Contract(NamedTuple):
    graph: tf.Graph
    signature: meta_graph_pb2.SignatureDef
    train_ops: list
    init_op: tf.Operation
    saver: tf.compat.v1.train.Saver


def export(path: Union[str, os.PathLike], inputs: Mapping[str, Tensorish],
           outputs: Mapping[str, Tensorish], train_ops=None, init_op=None, saver=None,
           graph: Optional[tf.Graph] = None, cluster: bool = False
           ) -> meta_graph_pb2.MetaGraphDef:
    """Writes the MetaGraphDef that ``hogwild tf-train --graph PATH`` trains; returns it.

    Args:
      path: the file to write (binary protobuf); its directory is created. An existing file is
        replaced only once the new one is complete.
      inputs: data-feed slot name -> what the slot feeds: a placeholder (``tf.Tensor``; int64 for a
        ``uint64`` slot, float32 for a ``float`` slot; rank 1 ``[B]`` for one value per
        instance, rank 2 ``[B, width]`` for a fixed count), a ``tf.RaggedTensor`` placeholder
        (``tf.compat.v1.ragged.placeholder(dtype, 1, [])``) or a ``(values, row_splits)`` pair
        for a variable-length slot, or a tensor name such as ``"words:0"``.
      outputs: the name the runner prints -> a float32 scalar tensor (or its name); one named
        ``loss`` is printed first.
      train_ops: the op (or list of ops) one training step runs; default: every op of the
        graph's ``train_op`` collection, which each ``optimizer.minimize()`` joins.
      init_op: the op that initialises every variable; default: the graph's ``init_op``
        collection's op, else a new op grouping the global and local variable initialisers and
        the table initialisers.
      saver: the ``tf.compat.v1.train.Saver`` (or its ``SaverDef``) of ``--save``/``--restore``;
        default: the first of the graph's ``savers`` collection, else a new ``Saver`` of every
        global variable.
      graph: the graph; default: the graph of the outputs (else the default graph).
      cluster: add the ops of the runner's parameter-server protocol (``tf-train --ps-hosts``):
        a counter of finished workers on the first variable's device, left out of the default
        saver, and the ``ready_op`` the workers other than the chief poll. Build the graph under
        ``tf.compat.v1.train.replica_device_setter`` so that its variables sit on the ps tasks.

    Raises:
      ExportError: naming the slot, output or op, for what the runner would refuse: an input not
        in the graph or of another dtype than int64/float32, a ragged input of more than one
        ragged dimension or with row splits neither int64 nor int32, an output that is not a
        float32 scalar, no train op, or a placeholder the train ops, outputs or init op need that
        no input feeds.
    """
    contract = _contract(inputs, outputs, train_ops, init_op, saver, graph, cluster)
    with contract.graph.as_default():
        meta = tf.compat.v1.train.export_meta_graph(
            graph=contract.graph, saver_def=_saver_def(contract.saver))
    _set_runner_fields(meta, contract)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, meta.SerializeToString())
    return meta


def export_saved_model(directory: Union[str, os.PathLike], inputs: Mapping[str, Tensorish],
                       outputs: Mapping[str, Tensorish], train_ops=None, init_op=None,
                       saver=None, graph: Optional[tf.Graph] = None,
                       session: Optional[tf.compat.v1.Session] = None,
                       tags: Sequence[str] = (TRAIN_TAG,)) -> pathlib.Path:
    """Writes the graph and its variables as a TF1 SavedModel that ``hogwild tf-train --graph
    DIRECTORY`` trains, starting from the saved values; returns the directory.

    The arguments ``inputs`` to ``graph`` are :func:`export`'s, with the same checks. The
    variables are saved with their values in ``session`` (one of ``graph``), or, without one, just
    after ``init_op`` ran in a new session. ``tags`` tag the MetaGraph (``tf-train --tag``). The
    SavedModel is built beside ``directory`` and moved into place when complete; an existing
    directory is replaced then.
    """
    contract = _contract(inputs, outputs, train_ops, init_op, saver, graph, cluster=False)
    directory = pathlib.Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        built = staging / "model"
        own = session is None
        if own:
            session = tf.compat.v1.Session(graph=contract.graph)
        elif session.graph is not contract.graph:
            raise ExportError("session: it runs another graph than the one exported")
        try:
            if own:
                session.run(contract.init_op)
            with contract.graph.as_default():
                builder = tf.compat.v1.saved_model.Builder(str(built))
                builder.add_meta_graph_and_variables(
                    session, list(tags), signature_def_map={SIGNATURE: contract.signature},
                    saver=contract.saver, strip_default_attrs=False)
                builder.save()
        finally:
            if own:
                session.close()
        pb = built / "saved_model.pb"
        model = saved_model_pb2.SavedModel.FromString(pb.read_bytes())
        for meta in model.meta_graphs:
            _set_runner_fields(meta, contract)
        pb.write_bytes(model.SerializeToString())
        _replace_directory(built, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def _contract(inputs, outputs, train_ops, init_op, saver, graph, cluster) -> _Contract:
    """Resolves and checks every part of the runner's contract; may add the default init op,
    saver and cluster ops to the graph."""
    if not inputs:
        raise ExportError("inputs: none given; the runner feeds the graph from data-feed slots")
    if not outputs:
        raise ExportError("outputs: none given; the runner needs at least one scalar (the loss)")
    # The outputs' graph first: they are computed by the model, where a stray input is more
    # likely to be the one from another graph.
    graph = graph or _graph_of(outputs) or _graph_of(inputs) or tf.compat.v1.get_default_graph()
    signature = meta_graph_pb2.SignatureDef(method_name=METHOD_NAME)
    fed = {}
    for slot, value in inputs.items():
        for key, tensor in _input_tensors(graph, slot, value):
            if tensor.name in fed:
                raise ExportError(f'input "{key}": {tensor.name} is fed by input '
                                  f'"{fed[tensor.name]}" already; a tensor is fed from one slot')
            fed[tensor.name] = key
            signature.inputs[key].CopyFrom(_tensor_info(tensor))
    for name, value in outputs.items():
        tensor = _tensor(graph, value, f'output "{name}"')
        where = f'output "{name}" ({tensor.name})'
        if tensor.dtype != tf.float32:
            raise ExportError(f"{where} is {tensor.dtype.name}; the runner fetches float32 values "
                              "(tf.cast it)")
        if tensor.shape.rank != 0:
            shape = "of unknown shape" if tensor.shape.rank is None else f"has shape {tensor.shape}"
            raise ExportError(f"{where} {shape}; the runner fetches scalars (tf.reduce_mean it, "
                              "or tf.reshape(x, []) a value known to be one)")
        signature.outputs[name].CopyFrom(_tensor_info(tensor))

    if train_ops is None:
        train_ops = graph.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP)
        if not train_ops:
            raise ExportError("no train op: the graph's \"train_op\" collection is empty "
                              "(optimizer.minimize() adds its op there); pass train_ops=")
    elif not isinstance(train_ops, (list, tuple)):
        train_ops = [train_ops]
    if not train_ops:
        raise ExportError("train_ops: an empty list; the runner runs at least one train op")
    ops = []
    for i, op in enumerate(train_ops):
        op = _op(graph, op, f"train op {i}")
        if op not in ops:
            ops.append(op)
    train_ops = ops

    if cluster:
        counter_init = _add_cluster_protocol(graph)
    if init_op is None:
        found = graph.get_collection(tf.compat.v1.GraphKeys.INIT_OP)
        if found:
            init_op = _op(graph, found[0], 'the graph\'s "init_op" collection')
        else:
            with _modifying(graph, "init_op"):
                # Named as global_variables_initializer() names its op, where the name is free.
                variables = (graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
                             + graph.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES))
                init_op = tf.group(*[v.initializer for v in variables],
                                   tf.compat.v1.tables_initializer(), name="init")
    else:
        init_op = _op(graph, init_op, "init_op")
        if cluster:
            # The chief's init must also start the counter, which a given init may predate.
            with _modifying(graph, "init_op"):
                init_op = tf.group(init_op, counter_init, name="hogwild_init")

    if saver is None:
        savers = graph.get_collection(tf.compat.v1.GraphKeys.SAVERS)
        if savers:
            saver = savers[0]
        else:
            variables = [v for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
                         if not v.op.name.startswith(_CLUSTER_COUNTER)]
            if not variables:
                raise ExportError("saver: the graph has no global variables to save; the runner "
                                  "needs a saver")
            with _modifying(graph, "saver"):
                saver = tf.compat.v1.train.Saver(variables)
    saver_def = _saver_def(saver)
    for name in (saver_def.filename_tensor_name, saver_def.save_tensor_name):
        _tensor(graph, name, "saver")
    _op(graph, saver_def.restore_op_name, "saver")

    # A placeholder that a step, a fetched value or the init op needs but no slot feeds fails the
    # runner's first step: name it now.
    needs = [(f'train op "{op.name}"', op) for op in train_ops]
    needs += [(f'output "{name}"', graph.get_tensor_by_name(info.name).op)
              for name, info in signature.outputs.items()]
    needs.append((f'init op "{init_op.name}"', init_op))
    for what, op in needs:
        for placeholder in _placeholders(op):
            if placeholder.outputs[0].name not in fed:
                raise ExportError(
                    f"{what} needs placeholder {placeholder.outputs[0].name}, which no input "
                    "feeds; add it to inputs under its slot's name (or give it a default with "
                    "tf.compat.v1.placeholder_with_default)")
    return _Contract(graph, signature, train_ops, init_op, saver)


def _graph_of(tensors):
    """The graph of the first graph tensor among the values of `tensors`, if any."""
    for value in tensors.values():
        if isinstance(value, tf.RaggedTensor):
            value = value.flat_values
        for x in (value if isinstance(value, (list, tuple)) else [value]):
            graph = getattr(x, "graph", None) if isinstance(x, tf.Tensor) else None
            if graph is not None:
                return graph
    return None


def _tensor(graph, value, where) -> tf.Tensor:
    if isinstance(value, str):
        try:
            return graph.get_tensor_by_name(value)
        except (KeyError, ValueError) as e:
            raise ExportError(f"{where}: no tensor {value!r} in the graph ({e})") from None
    if isinstance(value, tf.Operation):
        raise ExportError(f"{where}: op {value.name} is not a tensor; give one of its outputs")
    if not isinstance(value, tf.Tensor) or not hasattr(value, "graph"):
        raise ExportError(f"{where}: {type(value).__name__} {value!r} is not a graph tensor")
    if value.graph is not graph:
        raise ExportError(f"{where}: {value.name} is not in the graph being exported")
    return value


def _op(graph, value, where) -> tf.Operation:
    if isinstance(value, str):
        try:
            element = graph.as_graph_element(value, allow_tensor=True, allow_operation=True)
        except (KeyError, ValueError) as e:
            raise ExportError(f"{where}: no op {value!r} in the graph ({e})") from None
        return element if isinstance(element, tf.Operation) else element.op
    if isinstance(value, tf.Tensor):
        value = value.op
    if not isinstance(value, tf.Operation):
        raise ExportError(f"{where}: {type(value).__name__} {value!r} is not an op of the graph")
    if value.graph is not graph:
        raise ExportError(f"{where}: {value.name} is not in the graph being exported")
    return value


def _input_tensors(graph, slot, value):
    """The (signature key, tensor) pairs that slot `slot` feeds, checked."""
    where = f'input "{slot}"'
    if not isinstance(slot, str) or not slot:
        raise ExportError(f"inputs: slot name {slot!r} is not a non-empty string")
    if slot.endswith(ROW_SPLITS):
        raise ExportError(f"{where}: a slot name cannot end in {ROW_SPLITS!r}, the suffix of "
                          "the row-splits input of a variable-length slot")
    if isinstance(value, tf.RaggedTensor):
        if value.ragged_rank != 1:
            raise ExportError(f"{where}: a RaggedTensor of ragged_rank {value.ragged_rank}; a "
                              "slot is ragged in one dimension (ragged_rank 1)")
        values, splits = value.values, value.row_splits
    elif isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ExportError(f"{where}: a sequence of {len(value)} items; a variable-length "
                              "slot is a (values, row_splits) pair")
        values, splits = value
    else:
        tensor = _tensor(graph, value, where)
        _check_fed(graph, tensor, where, ranks=(1, 2))
        return [(slot, tensor)]
    values = _tensor(graph, values, f"{where} values")
    splits = _tensor(graph, splits, f'input "{slot}{ROW_SPLITS}"')
    _check_fed(graph, values, f"{where} values", ranks=(1,))
    if splits.dtype not in (tf.int64, tf.int32):
        raise ExportError(f'input "{slot}{ROW_SPLITS}" ({splits.name}) is {splits.dtype.name}; '
                          "the runner feeds row splits as int64 (or int32)")
    _check_fed(graph, splits, f'input "{slot}{ROW_SPLITS}"', ranks=(1,),
               dtypes=(tf.int64, tf.int32))
    return [(slot, values), (slot + ROW_SPLITS, splits)]


def _check_fed(graph, tensor, where, ranks, dtypes=_INPUT_DTYPES):
    where = f"{where} ({tensor.name})"
    if tensor.dtype not in dtypes:
        raise ExportError(f"{where} is {tensor.dtype.name}; the runner feeds int64 (uint64 slots) "
                          "or float32 (float slots)")
    rank = tensor.shape.rank
    if rank is not None and rank not in ranks:
        want = ("rank 1, the values of the batch concatenated" if ranks == (1,)
                else "rank 1 ([B]) or 2 ([B, width])")
        raise ExportError(f"{where} has shape {tensor.shape}; the runner feeds it {want}")
    if not graph.is_feedable(tensor):
        raise ExportError(f"{where} cannot be fed")


def _tensor_info(tensor):
    return meta_graph_pb2.TensorInfo(name=tensor.name, dtype=tensor.dtype.as_datatype_enum,
                                     tensor_shape=tensor.shape.as_proto())


def _placeholders(op):
    """The Placeholder ops `op` depends on, through data and control edges."""
    seen, stack, found = {op}, [op], []
    while stack:
        current = stack.pop()
        if current.type == "Placeholder":
            found.append(current)
        for dep in [t.op for t in current.inputs] + list(current.control_inputs):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return sorted(found, key=lambda o: o.name)


class _modifying:
    """Turns the error of adding an op to a finalized graph into one naming what was added."""

    def __init__(self, graph, what):
        self.graph, self.what = graph, what

    def __enter__(self):
        if self.graph.finalized:
            raise ExportError(f"{self.what}: the graph is finalized, so none can be added; "
                              f"pass {self.what}= built before it was")
        self._scope = self.graph.as_default()
        self._scope.__enter__()

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)


def _add_cluster_protocol(graph):
    """The counter of finished workers and the collections the runner's cluster protocol reads
    (reused when the graph has them); returns the counter's initializer."""
    existing = graph.get_collection(_FINISHED_INIT)
    if existing:
        return existing[0]
    variables = graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    device = next((v.device for v in variables if v.device), "")
    if not device:
        raise ExportError("cluster: no variable of the graph is placed on a device; build it "
                          "under tf.compat.v1.train.replica_device_setter so that its variables "
                          "sit on the ps tasks")
    with _modifying(graph, "cluster"), tf.compat.v1.device(device):
        finished = tf.compat.v1.get_variable(
            _CLUSTER_COUNTER, [], tf.int64, initializer=tf.compat.v1.zeros_initializer(),
            trainable=False, use_resource=True)
    with _modifying(graph, "cluster"):
        add = tf.compat.v1.add_to_collection
        add(_READY, tf.compat.v1.report_uninitialized_variables())
        add(_FINISH, finished.assign_add(1, read_value=False))
        add(_FINISHED, finished.read_value())
        add(_FINISHED_INIT, finished.initializer)
    return finished.initializer


def _saver_def(saver):
    if isinstance(saver, tf.compat.v1.train.SaverDef):
        return saver
    return saver.as_saver_def()


def _set_runner_fields(meta, contract):
    """The train signature and the train_op and init_op collections, as the runner reads them."""
    meta.signature_def[SIGNATURE].CopyFrom(contract.signature)
    for key, ops in ((tf.compat.v1.GraphKeys.TRAIN_OP, contract.train_ops),
                     (tf.compat.v1.GraphKeys.INIT_OP, [contract.init_op])):
        collection = meta.collection_def[key]
        collection.Clear()
        collection.node_list.value.extend(op.name for op in ops)
    if not meta.HasField("saver_def"):
        meta.saver_def.CopyFrom(_saver_def(contract.saver))


def _write_atomically(path, data):
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _replace_directory(new, directory):
    """Moves `new` to `directory`; an existing `directory` is removed only after the move."""
    if not directory.exists():
        os.rename(new, directory)
        return
    old = pathlib.Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=directory.parent))
    os.rename(directory, old / "model")
    os.rename(new, directory)
    shutil.rmtree(old, ignore_errors=True)


# --- Keras 3: a TF2 SavedModel with train and eval signatures --------------------------------

class Slot(NamedTuple):
    """A slot of a data feed description: its name and type (``uint64`` or ``float``)."""
    name: str
    type: str


def read_feed(path: Union[str, os.PathLike]) -> list:
    """The used slots (``is_used: true``) of the DataFeedDesc at ``path`` (protobuf text format,
    Paddle's ``data.prototxt``), in order, as :class:`Slot` tuples."""
    path = pathlib.Path(path)
    text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
    slots = []
    for i, block in enumerate(re.findall(r"\bslots\s*\{([^}]*)\}", text)):
        fields = dict(re.findall(r"(\w+)\s*:\s*(\"[^\"]*\"|\S+)", block))
        name = fields.get("name", "").strip('"')
        kind = fields.get("type", "").strip('"')
        if not name:
            raise ExportError(f"{path}: slot {i} has no name")
        if kind not in ("uint64", "float"):
            raise ExportError(f'{path}: slot "{name}": type "{kind}"; a slot is "uint64" or '
                              '"float"')
        if fields.get("is_used", "false") == "true":
            slots.append(Slot(name, kind))
    if not slots:
        raise ExportError(f"{path}: no used slot (is_used: true)")
    return slots


def export_keras(directory: Union[str, os.PathLike], model, loss, optimizer,
                 feed: Union[str, os.PathLike], label: str = "label",
                 metrics: Optional[Mapping[str, object]] = None) -> pathlib.Path:
    """Writes a Keras 3 model, its loss and its optimizer as a TF2 SavedModel that ``hogwild
    tf-train --graph DIRECTORY`` trains; returns the directory.

    The SavedModel (``tf.saved_model.save``) has two signatures, both keyed by data-feed slot:
    ``train`` runs one optimizer step and returns the batch's ``loss`` and metrics, ``eval`` the
    same values without the step (``tf-train --eval``). Its variables are the model's and the
    optimizer's, as they are now. After ``tf-train --save OUT``, :func:`load_keras_weights` puts the
    trained weights back into the model.

    Args:
      directory: the SavedModel directory to write; built beside it and moved into place when
        complete (an existing one is replaced then).
      model: a built Keras 3 model (functional, or any model whose ``model.inputs`` are named):
        each input is named after the slot that feeds it. An input of shape ``(B,)`` is fed one
        value per instance, ``(B, w)`` a fixed ``w`` values, and ``(B, None)`` a variable-length
        slot as values and row splits: a ``RaggedTensor`` where the input is ``ragged=True``,
        else padded with zeros to the batch's longest instance. Values are cast to the input's
        dtype.
      loss: what Keras' ``compile`` takes (a name, a ``keras.losses.Loss``, or a function
        ``(y_true, y_pred)``); the mean over the batch is the ``loss`` output, plus
        ``model.losses`` (regularisation).
      optimizer: a Keras optimizer (``adam_async.keras.AdamAsync`` or any other); it is built for
        the model's trainable variables.
      feed: the data feed description (``data.prototxt``); every used slot is a model input or
        the label slot, and every model input a used slot.
      label: the used slot the loss compares the prediction with (one value per instance), cast
        to float32 and given the prediction's shape when that is ``(B, 1)``.
      metrics: output name -> a function ``(y_true, y_pred)`` (``keras.metrics.binary_accuracy``),
        whose mean over the batch is that output. A stateful ``keras.metrics.Metric`` is refused:
        the runner averages each batch's value itself.

    Raises:
      ExportError: naming the slot, input or metric that breaks the contract.
    """
    import keras

    slots = read_feed(feed)
    kinds = {s.name: s.type for s in slots}
    if label not in kinds:
        raise ExportError(f'label: no used slot "{label}" in {feed} (used slots: '
                          f"{', '.join(kinds)})")
    try:
        model_inputs = {t.name: t for t in model.inputs}
        n_outputs = len(model.outputs)
    except (AttributeError, ValueError):
        raise ExportError(f"model: {type(model).__name__} has no symbolic inputs and outputs; "
                          "export a functional (or Sequential) model built on keras.Input"
                          ) from None
    if n_outputs != 1:
        raise ExportError(f"model: {n_outputs} outputs; the loss compares one prediction with "
                          "the label slot")
    for name in model_inputs:
        if name not in kinds:
            raise ExportError(f'model input "{name}": no used slot "{name}" in {feed} (used '
                              f"slots: {', '.join(kinds)}); name each input after its slot")
        if name == label:
            raise ExportError(f'model input "{name}": it is the label slot')
    for slot in kinds:
        if slot != label and slot not in model_inputs:
            raise ExportError(f'slot "{slot}": used in {feed} but no model input is named so '
                              f"(inputs: {', '.join(model_inputs)}); mark it is_used: false")
    metrics = dict(metrics or {})
    for name, fn in metrics.items():
        if isinstance(fn, keras.metrics.Metric) or not callable(fn):
            raise ExportError(f'metric "{name}": {fn!r} is not a function (y_true, y_pred); the '
                              "runner averages each batch's value, so give a stateless function "
                              "such as keras.metrics.binary_accuracy")
        if name == "loss":
            raise ExportError('metric "loss": the name of the loss output')
    loss_fn = keras.losses.get(loss)

    specs, convert = {}, {}
    for name, kind in kinds.items():
        dtype = tf.int64 if kind == "uint64" else tf.float32
        tensor = model_inputs.get(name)
        shape = tuple(tensor.shape[1:]) if tensor is not None else ()
        if name == label:
            specs[name] = tf.TensorSpec([None], dtype, name=name)
            continue
        where = f'model input "{name}" (shape {tuple(tensor.shape)})'
        if getattr(tensor, "sparse", False):
            raise ExportError(f"{where} is sparse; the runner feeds dense or ragged values")
        if len(shape) > 1:
            raise ExportError(f"{where}: the runner feeds a slot as (B,), (B, width) or a "
                              "variable-length (B, None)")
        if shape == (None,) or getattr(tensor, "ragged", False):
            splits = name + ROW_SPLITS
            specs[name] = tf.TensorSpec([None], dtype, name=name)
            specs[splits] = tf.TensorSpec([None], tf.int64, name=splits)
            convert[name] = _ragged_input(name, splits, tensor)
        else:
            specs[name] = tf.TensorSpec([None, *shape], dtype, name=name)
            convert[name] = _dense_input(name, tensor)

    optimizer.build(model.trainable_variables)

    def step(features, training):
        x = {name: fn(features) for name, fn in convert.items()}
        x = tf.nest.map_structure(lambda t: x[t.name], model.input)
        y_pred = model(x, training=training)
        y_true = tf.cast(features[label], tf.float32)
        if y_pred.shape.rank == 2 and y_pred.shape[1] == 1:
            y_true = tf.expand_dims(y_true, 1)
        out = {"loss": tf.reduce_mean(loss_fn(y_true, y_pred))}
        if model.losses:
            out["loss"] += tf.add_n(model.losses)
        for name, fn in metrics.items():
            out[name] = tf.cast(tf.reduce_mean(fn(y_true, y_pred)), tf.float32)
        return out

    @tf.function(input_signature=[specs])
    def train(features):
        with tf.GradientTape() as tape:
            out = step(features, training=True)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(out["loss"], variables), variables))
        return out

    @tf.function(input_signature=[specs])
    def evaluate(features):
        return step(features, training=False)

    root = tf.Module()
    # The variables themselves (tf.Variable under Keras' wrappers), tracked in lists: the
    # checkpoint keys are then model_variables/<i> in model.variables order, which
    # load_keras_weights reads back into a model of the same architecture.
    root.model_variables = [_tf_variable(v) for v in model.variables]
    root.optimizer_variables = [_tf_variable(v) for v in optimizer.variables]
    root.train, root.eval = train, evaluate
    directory = pathlib.Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        built = staging / "model"
        tf.saved_model.save(root, str(built), signatures={
            SIGNATURE: train.get_concrete_function(), "eval": evaluate.get_concrete_function()})
        _replace_directory(built, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def load_keras_weights(model, directory: Union[str, os.PathLike], optimizer=None) -> None:
    """Assigns the variables saved in the SavedModel ``directory`` (one :func:`export_keras`
    wrote, or ``hogwild tf-train --save`` wrote from it) to ``model`` (the same architecture) and,
    when given, ``optimizer``'s (to train on in Python)."""
    objects = {"model_variables": [_tf_variable(v) for v in model.variables]}
    if optimizer is not None:
        optimizer.build(model.trainable_variables)  # its variables exist only once built
        objects["optimizer_variables"] = [_tf_variable(v) for v in optimizer.variables]
    prefix = pathlib.Path(directory) / "variables" / "variables"
    status = tf.train.Checkpoint(**objects).read(str(prefix))
    status.assert_existing_objects_matched()


def _tf_variable(var):
    """The ``tf.Variable`` behind a Keras variable (or ``var`` itself)."""
    import keras

    return var.value if isinstance(var, keras.Variable) else var


def _ragged_input(values_key, splits_key, tensor):
    ragged = getattr(tensor, "ragged", False)
    dtype = tf.as_dtype(tensor.dtype)

    def convert(features):
        values = tf.cast(features[values_key], dtype)
        x = tf.RaggedTensor.from_row_splits(values, features[splits_key], validate=False)
        return x if ragged else x.to_tensor()
    return convert


def _dense_input(key, tensor):
    dtype = tf.as_dtype(tensor.dtype)
    return lambda features: tf.cast(features[key], dtype)
