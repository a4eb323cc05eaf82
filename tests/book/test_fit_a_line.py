"""Book chapter 01.fit_a_line (PaddlePaddle/book, the Fluid 1.6/1.7 train.py) with only the import changed: the
same data layers, reader decorators, DataFeeder, fc/square_error_cost/mean, test clone, SGD, test loop and
save_inference_model/load_inference_model, on generated uci_housing files, scaled down to a few epochs."""
import math

import numpy

import fluidlite as fluid
import fluidlite as paddle
from _book import assert_loss_decreased


NUM_EPOCHS = 6


# For training test cost (the chapter's train_test)
def train_test(executor, program, reader, feeder, fetch_list):
    accumulated = 1 * [0]
    count = 0
    for data_test in reader():
        outs = executor.run(program=program, feed=feeder.feed(data_test), fetch_list=fetch_list)
        accumulated = [x_c[0] + x_c[1][0] for x_c in zip(accumulated, outs)]
        count += 1
    return [x_d / count for x_d in accumulated]


def train(params_dirname):
    batch_size = 20
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.uci_housing.train(), buf_size=500),
                                batch_size=batch_size)
    test_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.uci_housing.test(), buf_size=500),
                               batch_size=batch_size)

    # feature vector of length 13
    x = fluid.data(name='x', shape=[None, 13], dtype='float32')
    y = fluid.data(name='y', shape=[None, 1], dtype='float32')

    main_program = fluid.default_main_program()
    startup_program = fluid.default_startup_program()
    main_program.random_seed = 90  # the chapter's --enable_ce seed
    startup_program.random_seed = 90

    y_predict = fluid.layers.fc(input=x, size=1, act=None)
    cost = fluid.layers.square_error_cost(input=y_predict, label=y)
    avg_loss = fluid.layers.mean(cost)

    test_program = main_program.clone(for_test=True)

    sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.001)
    sgd_optimizer.minimize(avg_loss)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    feeder = fluid.DataFeeder(place=place, feed_list=[x, y])
    exe.run(startup_program)
    exe_test = fluid.Executor(place)

    losses, test_costs = [], []
    step = 0
    for _pass_id in range(NUM_EPOCHS):
        for data_train in train_reader():
            avg_loss_value, = exe.run(main_program, feed=feeder.feed(data_train), fetch_list=[avg_loss])
            losses.append(avg_loss_value)
            if step % 10 == 0:
                test_metics = train_test(executor=exe_test, program=test_program, reader=test_reader,
                                         fetch_list=[avg_loss], feeder=feeder)
                test_costs.append(test_metics[0])
            step += 1
            assert not math.isnan(float(avg_loss_value[0])), "got NaN loss, training failed."
        fluid.io.save_inference_model(params_dirname, ['x'], [y_predict], exe)
    return losses, test_costs, test_program, y_predict, exe


def infer(params_dirname):
    place = fluid.CPUPlace()
    infer_exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names, fetch_targets] = fluid.io.load_inference_model(params_dirname,
                                                                                              infer_exe)
        batch_size = 10
        infer_reader = paddle.batch(paddle.dataset.uci_housing.test(), batch_size=batch_size)
        infer_data = next(infer_reader())
        infer_feat = numpy.array([data[0] for data in infer_data]).astype("float32")
        infer_label = numpy.array([data[1] for data in infer_data]).astype("float32")
        assert feed_target_names[0] == 'x'
        results = infer_exe.run(inference_program, feed={feed_target_names[0]: numpy.array(infer_feat)},
                                fetch_list=fetch_targets)
        # the chapter's printout of the fetched predictions (each val a [1] row: a ScalarArray converts it).
        # Its next loop prints infer_label's rows the same way; infer_label is the script's own numpy array,
        # which numpy 2.4 refuses to format with "%.2f" whatever the framework (numpy < 2.4 only warns).
        lines = ["%d: %.2f" % (idx, val) for idx, val in enumerate(results[0])]
        assert len(lines) == batch_size and all(line.startswith("%d: " % i) for i, line in enumerate(lines))
    return infer_feat, infer_label, results


def test_fit_a_line_trains_saves_and_infers(chapter, book_data):
    losses, test_costs, test_program, y_predict, exe = train("fit_a_line.inference.model")
    assert len(losses) == NUM_EPOCHS * 20
    assert_loss_decreased(losses, k=10, factor=0.85)
    assert test_costs[-1] < 0.9 * test_costs[0]
    feat, label, results = infer("fit_a_line.inference.model")
    assert feat.shape == (10, 13) and label.shape == (10, 1)
    assert len(results) == 1 and results[0].shape == (10, 1) and results[0].dtype == numpy.float32
    # the saved model computes what the trained program computes in test mode
    expected, = exe.run(test_program, feed={"x": feat, "y": label}, fetch_list=[y_predict])
    numpy.testing.assert_allclose(results[0], expected, rtol=1e-6, atol=1e-6)
