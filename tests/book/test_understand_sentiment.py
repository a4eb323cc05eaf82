"""Book chapter 06.understand_sentiment (PaddlePaddle/book, the Fluid 1.8 train_conv.py and train_stacked_lstm.py)
with only the import changed: word ids fed as a LoD batch through DataFeeder (fluid.data shape [None], lod_level 1),
fluid.embedding on LoD ids, the convolution net (two nets.sequence_conv_pool with sqrt pooling) and the stacked
bidirectional LSTM net (fc + dynamic_lstm, alternating is_reverse, sequence_pool max), softmax, cross_entropy,
accuracy, Adagrad, the test clone and test loop, save_inference_model and infer() with create_lod_tensor and
return_numpy=False, on generated IMDB files, scaled down to a few small batches. The dynamic-RNN variant is the
chapter's train_dyn_rnn.py from before it moved to dynamic_lstm (book commit fd28d16, Fluid 1.5): an LSTM written
out of fc layers inside layers.DynamicRNN, on fluid.layers.data inputs."""
import math

import numpy as np
import pytest

import fluidlite as fluid
import fluidlite as paddle
from _book import assert_loss_decreased

CLASS_DIM = 2
EMB_DIM = 128
HID_DIM = 512
STACKED_NUM = 3
BATCH_SIZE = 16  # the chapter's 128, scaled down
STEPS = 12


# ---- train_conv.py
def convolution_net(data, input_dim, class_dim, emb_dim, hid_dim):
    emb = fluid.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    conv_3 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=3, act="tanh",
                                           pool_type="sqrt")
    conv_4 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=4, act="tanh",
                                           pool_type="sqrt")
    prediction = fluid.layers.fc(input=[conv_3, conv_4], size=class_dim, act="softmax")
    return prediction


# ---- train_stacked_lstm.py
def stacked_lstm_net(data, input_dim, class_dim, emb_dim, hid_dim, stacked_num):
    emb = fluid.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)

    fc1 = fluid.layers.fc(input=emb, size=hid_dim)
    lstm1, cell1 = fluid.layers.dynamic_lstm(input=fc1, size=hid_dim)

    inputs = [fc1, lstm1]

    for i in range(2, stacked_num + 1):
        fc = fluid.layers.fc(input=inputs, size=hid_dim)
        lstm, cell = fluid.layers.dynamic_lstm(input=fc, size=hid_dim, is_reverse=(i % 2) == 0)
        inputs = [fc, lstm]

    fc_last = fluid.layers.sequence_pool(input=inputs[0], pool_type='max')
    lstm_last = fluid.layers.sequence_pool(input=inputs[1], pool_type='max')

    prediction = fluid.layers.fc(input=[fc_last, lstm_last], size=class_dim, act='softmax')
    return prediction


# ---- train_dyn_rnn.py (book commit fd28d16)
LSTM_SIZE = 128


def dynamic_rnn_lstm(data, input_dim, class_dim, emb_dim, lstm_size):
    emb = fluid.layers.embedding(
        input=data, size=[input_dim, emb_dim], is_sparse=True)
    sentence = fluid.layers.fc(input=emb, size=lstm_size, act='tanh')

    rnn = fluid.layers.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(sentence)
        prev_hidden = rnn.memory(value=0.0, shape=[lstm_size])
        prev_cell = rnn.memory(value=0.0, shape=[lstm_size])

        def gate_common(ipt, hidden, size):
            gate0 = fluid.layers.fc(input=ipt, size=size, bias_attr=True)
            gate1 = fluid.layers.fc(input=hidden, size=size, bias_attr=False)
            return gate0 + gate1

        forget_gate = fluid.layers.sigmoid(x=gate_common(word, prev_hidden,
                                                         lstm_size))
        input_gate = fluid.layers.sigmoid(x=gate_common(word, prev_hidden,
                                                        lstm_size))
        output_gate = fluid.layers.sigmoid(x=gate_common(word, prev_hidden,
                                                         lstm_size))
        cell_gate = fluid.layers.sigmoid(x=gate_common(word, prev_hidden,
                                                       lstm_size))

        cell = forget_gate * prev_cell + input_gate * cell_gate
        hidden = output_gate * fluid.layers.tanh(x=cell)
        rnn.update_memory(prev_cell, cell)
        rnn.update_memory(prev_hidden, hidden)
        rnn.output(hidden)

    last = fluid.layers.sequence_last_step(rnn())
    prediction = fluid.layers.fc(input=last, size=class_dim, act="softmax")
    return prediction


def inference_program(word_dict, net):
    dict_dim = len(word_dict)
    if net == "dyn_rnn":  # the fd28d16 chapter's inputs
        data = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        return dynamic_rnn_lstm(data, dict_dim, CLASS_DIM, EMB_DIM, LSTM_SIZE)
    data = fluid.data(name="words", shape=[None], dtype="int64", lod_level=1)
    if net == "conv":
        return convolution_net(data, dict_dim, CLASS_DIM, EMB_DIM, HID_DIM)
    return stacked_lstm_net(data, dict_dim, CLASS_DIM, EMB_DIM, HID_DIM, STACKED_NUM)


def train_program(prediction):
    label = fluid.data(name="label", shape=[None, 1], dtype="int64")
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=prediction, label=label)
    return [avg_cost, accuracy]


def optimizer_func():
    return fluid.optimizer.Adagrad(learning_rate=0.002)


def train(params_dirname, net):
    place = fluid.CPUPlace()
    word_dict = paddle.dataset.imdb.word_dict()
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.imdb.train(word_dict), buf_size=25000),
                                batch_size=BATCH_SIZE)
    test_reader = paddle.batch(paddle.dataset.imdb.test(word_dict), batch_size=BATCH_SIZE)
    feed_order = ['words', 'label']

    main_program = fluid.default_main_program()
    star_program = fluid.default_startup_program()
    main_program.random_seed = 90  # the chapter's --enable_ce seed
    star_program.random_seed = 90

    prediction = inference_program(word_dict, net)
    train_func_outputs = train_program(prediction)
    avg_cost = train_func_outputs[0]

    test_program = main_program.clone(for_test=True)

    sgd_optimizer = optimizer_func()
    sgd_optimizer.minimize(avg_cost)
    exe = fluid.Executor(place)

    def train_test(program, reader):
        count = 0
        feed_var_list = [program.global_block().var(var_name) for var_name in feed_order]
        feeder_test = fluid.DataFeeder(feed_list=feed_var_list, place=place)
        test_exe = fluid.Executor(place)
        accumulated = len(train_func_outputs) * [0]
        for test_data in reader():
            avg_cost_np = test_exe.run(program=program, feed=feeder_test.feed(test_data),
                                       fetch_list=train_func_outputs)
            accumulated = [x[0] + x[1][0] for x in zip(accumulated, avg_cost_np)]
            count += 1
        return [x / count for x in accumulated]

    feed_var_list_loop = [main_program.global_block().var(var_name) for var_name in feed_order]
    feeder = fluid.DataFeeder(feed_list=feed_var_list_loop, place=place)
    exe.run(star_program)
    losses, tests = [], []
    step = 0
    while step < STEPS:  # scaled down: epochs until STEPS batches
        for data in train_reader():
            metrics = exe.run(main_program, feed=feeder.feed(data), fetch_list=[var.name for var in train_func_outputs])
            losses.append(metrics[0])
            if (step + 1) % 6 == 0:
                tests.append(train_test(test_program, test_reader))
            if math.isnan(float(metrics[0])):
                raise AssertionError("got NaN loss, training failed.")
            step += 1
            if step == STEPS:
                break
    fluid.io.save_inference_model(params_dirname, ["words"], prediction, exe)
    return word_dict, losses, tests


def infer(word_dict, params_dirname):
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inferencer, feed_target_names, fetch_targets] = fluid.io.load_inference_model(params_dirname, exe)
        reviews_str = ['read the book forget the movie', 'this is a great movie', 'this is very bad']
        reviews = [c.split() for c in reviews_str]
        UNK = word_dict['<unk>']
        lod = []
        for c in reviews:
            lod.append([np.int64(word_dict.get(words, UNK)) for words in c])
        base_shape = [[len(c) for c in lod]]
        tensor_words = fluid.create_lod_tensor(lod, base_shape, place)
        assert feed_target_names[0] == "words"
        results = exe.run(inferencer, feed={feed_target_names[0]: tensor_words}, fetch_list=fetch_targets,
                          return_numpy=False)
        return np.array(results[0])


@pytest.fixture
def imdb_data(book_data, monkeypatch):
    import fakes
    # enough reviews that the sentiment words pass word_dict()'s cutoff of 150 occurrences
    fakes.install_imdb(book_data, n_per_class=120, monkeypatch=monkeypatch)
    return book_data


@pytest.mark.parametrize("net", ["conv", "stacked_lstm", "dyn_rnn"])
def test_understand_sentiment_trains_saves_and_infers(chapter, imdb_data, net):
    word_dict, losses, tests = train("understand_sentiment_%s.inference.model" % net, net)
    assert {"good", "bad", "<unk>"} <= set(word_dict)
    assert_loss_decreased(losses, k=3, factor=0.9)
    assert len(tests) == 2 and tests[1][0] < tests[0][0]  # test cost falls
    probs = infer(word_dict, "understand_sentiment_%s.inference.model" % net)
    assert probs.shape == (3, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
