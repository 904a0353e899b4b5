# DeepRec's AdamAsyncOptimizer example, unchanged apart from the imports: TF1 graph mode through
# tf.compat.v1, and AdamAsyncOptimizer from the adam_async package instead of tf.train.
import tensorflow.compat.v1 as tf
from adam_async import AdamAsyncOptimizer

tf.disable_v2_behavior()
tf.train.AdamAsyncOptimizer = AdamAsyncOptimizer

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
