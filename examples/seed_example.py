# DeepRec's AdamAsyncOptimizer example (its AdamAsync document), run on TensorFlow 2.
# Two changes from DeepRec's script: `import tensorflow as tf` became TensorFlow's own way of
# running TF1 code on TF 2 (the compat.v1 import and disable_v2_behavior: every TF1 script needs
# them, AdamAsync or not, as tf.get_variable and tf.Session are TF1 APIs); and one line is added,
# `import adam_async.compat`, which makes tf.train.AdamAsyncOptimizer this package's optimizer.
import tensorflow.compat.v1 as tf
import adam_async.compat

tf.disable_v2_behavior()

var = tf.get_variable("var_0", shape=[10,16],
                       initializer=tf.ones_initializer(tf.float32))

emb = tf.nn.embedding_lookup(var, tf.cast([0,1,2,5,6,7], tf.int64))
fun = tf.multiply(emb, 2.0, name='multiply')
loss = tf.reduce_sum(fun, name='reduce_sum')

gs= tf.train.get_or_create_global_step()
opt = tf.train.AdamAsyncOptimizer(0.1)

g_v = opt.compute_gradients(loss)
train_op = opt.apply_gradients(g_v)

init = tf.global_variables_initializer()

sess_config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)
with tf.Session(config=sess_config) as sess:
  sess.run([init])
  print(sess.run([emb, train_op, loss]))
  print(sess.run([emb, train_op, loss]))
  print(sess.run([emb, train_op, loss]))
