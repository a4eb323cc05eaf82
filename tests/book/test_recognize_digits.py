"""Book chapter 02.recognize_digits (PaddlePaddle/book, the Fluid 1.6/1.7 train.py) with only the import
changed: the chapter's three networks (softmax regression, the MLP and the LeNet-style
convolutional_neural_network of fluid.nets.simple_img_conv_pool + batch_norm), the same data layers, reader
decorators, DataFeeder, Adam, accuracy, test clone, test loop and save/load of the inference model, on generated
MNIST files (gzip'd idx), scaled down to a few small batches."""
import numpy
import pytest

import fluidlite as fluid
import fluidlite as paddle
from _book import assert_loss_decreased


BATCH_SIZE = 16
PASS_NUM = 5
STEPS_PER_PASS = 4


def loss_net(hidden, label):
    prediction = fluid.layers.fc(input=hidden, size=10, act='softmax')
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_loss = fluid.layers.mean(loss)
    acc = fluid.layers.accuracy(input=prediction, label=label)
    return prediction, avg_loss, acc


def multilayer_perceptron(img, label):
    img = fluid.layers.fc(input=img, size=200, act='tanh')
    hidden = fluid.layers.fc(input=img, size=200, act='tanh')
    return loss_net(hidden, label)


def softmax_regression(img, label):
    return loss_net(img, label)


def convolutional_neural_network(img, label):
    conv_pool_1 = fluid.nets.simple_img_conv_pool(input=img, filter_size=5, num_filters=20, pool_size=2,
                                                  pool_stride=2, act="relu")
    conv_pool_1 = fluid.layers.batch_norm(conv_pool_1)
    conv_pool_2 = fluid.nets.simple_img_conv_pool(input=conv_pool_1, filter_size=5, num_filters=50, pool_size=2,
                                                  pool_stride=2, act="relu")
    return loss_net(conv_pool_2, label)


def train(nn_type, save_dirname, model_filename=None, params_filename=None):
    startup_program = fluid.default_startup_program()
    main_program = fluid.default_main_program()
    startup_program.random_seed = 90  # the chapter's --enable_ce seed
    main_program.random_seed = 90
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.mnist.train(), buf_size=500),
                                batch_size=BATCH_SIZE)
    test_reader = paddle.batch(paddle.dataset.mnist.test(), batch_size=BATCH_SIZE)

    img = fluid.data(name='img', shape=[None, 1, 28, 28], dtype='float32')
    label = fluid.data(name='label', shape=[None, 1], dtype='int64')

    net_conf = {"softmax_regression": softmax_regression, "multilayer_perceptron": multilayer_perceptron,
                "convolutional_neural_network": convolutional_neural_network}[nn_type]
    prediction, avg_loss, acc = net_conf(img, label)

    test_program = main_program.clone(for_test=True)
    optimizer = fluid.optimizer.Adam(learning_rate=0.001)
    optimizer.minimize(avg_loss)

    def train_test(train_test_program, train_test_feed, train_test_reader):
        acc_set = []
        avg_loss_set = []
        for test_data in train_test_reader():
            acc_np, avg_loss_np = exe.run(program=train_test_program, feed=train_test_feed.feed(test_data),
                                          fetch_list=[acc, avg_loss])
            acc_set.append(float(acc_np))
            avg_loss_set.append(float(avg_loss_np))
        acc_val_mean = numpy.array(acc_set).mean()
        avg_loss_val_mean = numpy.array(avg_loss_set).mean()
        return avg_loss_val_mean, acc_val_mean

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    feeder = fluid.DataFeeder(feed_list=[img, label], place=place)
    exe.run(startup_program)

    lists, losses = [], []
    for epoch_id in range(PASS_NUM):
        for step_id, data in enumerate(train_reader()):
            if step_id == STEPS_PER_PASS:  # scaled down: the same few batches each pass
                break
            metrics = exe.run(main_program, feed=feeder.feed(data), fetch_list=[avg_loss, acc])
            losses.append(metrics[0])
        avg_loss_val, acc_val = train_test(train_test_program=test_program, train_test_reader=test_reader,
                                           train_test_feed=feeder)
        lists.append((epoch_id, avg_loss_val, acc_val))
        fluid.io.save_inference_model(save_dirname, ["img"], [prediction], exe, model_filename=model_filename,
                                      params_filename=params_filename)
    best = sorted(lists, key=lambda list: float(list[1]))[0]
    assert 0.0 <= float(best[2]) <= 1.0
    return losses, test_program, prediction, exe


def infer(tensor_img, save_dirname, model_filename=None, params_filename=None):
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names, fetch_targets] = fluid.io.load_inference_model(
            save_dirname, exe, model_filename, params_filename)
        results = exe.run(inference_program, feed={feed_target_names[0]: tensor_img}, fetch_list=fetch_targets)
        lab = numpy.argsort(results)
        assert 0 <= lab[0][0][-1] < 10  # the chapter prints "Inference result of image/infer_3.png is: %d"
    return results


@pytest.mark.parametrize("nn_type,params_filename", [
    ("softmax_regression", None),
    ("multilayer_perceptron", "__params__"),
    ("convolutional_neural_network", None),
])
def test_recognize_digits_trains_saves_and_infers(chapter, book_data, nn_type, params_filename):
    save_dirname = "recognize_digits_" + nn_type + ".inference.model"
    losses, test_program, prediction, exe = train(nn_type, save_dirname, params_filename=params_filename)
    assert_loss_decreased(losses, k=3, factor=0.85)
    # the chapter's infer() reads one image (image/infer_3.png, scaled to [-1, 1]); here one generated test image
    sample = next(paddle.dataset.mnist.test()())
    tensor_img = numpy.array(sample[0]).reshape(1, 1, 28, 28).astype(numpy.float32)
    results = infer(tensor_img, save_dirname, params_filename=params_filename)
    assert len(results) == 1 and results[0].shape == (1, 10)
    numpy.testing.assert_allclose(results[0].sum(), 1.0, rtol=1e-5)
    expected, = exe.run(test_program, feed={"img": tensor_img, "label": numpy.zeros((1, 1), "int64")},
                        fetch_list=[prediction])
    numpy.testing.assert_allclose(results[0], expected, rtol=1e-5, atol=1e-6)
