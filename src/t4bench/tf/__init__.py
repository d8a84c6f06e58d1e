"""The TensorFlow backend (`framework=tensorflow`): ResNet-50 v1.5 in Keras on tf.data and
tf.distribute, through the same MLflow contract, MLPerf log, progress and sweeps as the PyTorch
loop. Nothing under this package imports torch; see docs/tensorflow.md."""
