"""Book chapter 07.label_semantic_roles (PaddlePaddle/book, the Fluid 1.8 train.py) with only the import changed:
eight LoD id features (word, predicate, five context words, mark) through fluid.embedding (the word table 'emb'
loaded from conll05.get_embedding() and frozen), fc tanh per feature, sums, an 8-deep stack of dynamic_lstm
alternating direction with relu candidates and sigmoid cells, linear_chain_crf over the targets with the 'crfw'
transition parameter, crf_decoding reusing it, SGD with exponential_decay, DataFeeder over nine LoD variables,
and infer() on create_random_int_lodtensor inputs with return_numpy=False, on generated CoNLL-05 files, scaled
down to 40 passes of one batch (the CRF loss falls from 15 to about 6). chunk_eval scores the decoded tags as the
chapter's evaluation does."""
import math

import numpy as np

import fluidlite as fluid
import fluidlite as paddle

word_dim = 32
mark_dim = 5
hidden_dim = 512
depth = 8
mix_hidden_lr = 1e-3

IS_SPARSE = True
PASS_NUM = 40
BATCH_SIZE = 10

embedding_name = 'emb'


def load_parameter(file_name, h, w):
    with open(file_name, 'rb') as f:
        f.read(16)  # skip header.
        return np.fromfile(f, dtype=np.float32).reshape(h, w)


def db_lstm(word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark, word_dict_len, pred_dict_len,
            label_dict_len, mark_dict_len=2, **ignored):
    # 8 features
    predicate_embedding = fluid.embedding(input=predicate, size=[pred_dict_len, word_dim], dtype='float32',
                                          is_sparse=IS_SPARSE, param_attr='vemb')

    mark_embedding = fluid.embedding(input=mark, size=[mark_dict_len, mark_dim], dtype='float32',
                                     is_sparse=IS_SPARSE)

    word_input = [word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2]
    emb_layers = [
        fluid.embedding(size=[word_dict_len, word_dim], input=x,
                        param_attr=fluid.ParamAttr(name=embedding_name, trainable=False))
        for x in word_input
    ]
    emb_layers.append(predicate_embedding)
    emb_layers.append(mark_embedding)

    hidden_0_layers = [fluid.layers.fc(input=emb, size=hidden_dim, act='tanh') for emb in emb_layers]

    hidden_0 = fluid.layers.sums(input=hidden_0_layers)

    lstm_0 = fluid.layers.dynamic_lstm(input=hidden_0, size=hidden_dim, candidate_activation='relu',
                                       gate_activation='sigmoid', cell_activation='sigmoid')

    # stack L-LSTM and R-LSTM with direct edges
    input_tmp = [hidden_0, lstm_0]

    for i in range(1, depth):
        mix_hidden = fluid.layers.sums(input=[
            fluid.layers.fc(input=input_tmp[0], size=hidden_dim, act='tanh'),
            fluid.layers.fc(input=input_tmp[1], size=hidden_dim, act='tanh')
        ])

        lstm = fluid.layers.dynamic_lstm(input=mix_hidden, size=hidden_dim, candidate_activation='relu',
                                         gate_activation='sigmoid', cell_activation='sigmoid',
                                         is_reverse=((i % 2) == 1))

        input_tmp = [mix_hidden, lstm]

    feature_out = fluid.layers.sums(input=[
        fluid.layers.fc(input=input_tmp[0], size=label_dict_len, act='tanh'),
        fluid.layers.fc(input=input_tmp[1], size=label_dict_len, act='tanh')
    ])

    return feature_out


def train(save_dirname):
    conll05 = paddle.dataset.conll05
    word_dict, verb_dict, label_dict = conll05.get_dict()
    dims = dict(word_dict_len=len(word_dict), label_dict_len=len(label_dict), pred_dict_len=len(verb_dict))

    word = fluid.data(name='word_data', shape=[None, 1], dtype='int64', lod_level=1)
    predicate = fluid.data(name='verb_data', shape=[None, 1], dtype='int64', lod_level=1)
    ctx_n2 = fluid.data(name='ctx_n2_data', shape=[None, 1], dtype='int64', lod_level=1)
    ctx_n1 = fluid.data(name='ctx_n1_data', shape=[None, 1], dtype='int64', lod_level=1)
    ctx_0 = fluid.data(name='ctx_0_data', shape=[None, 1], dtype='int64', lod_level=1)
    ctx_p1 = fluid.data(name='ctx_p1_data', shape=[None, 1], dtype='int64', lod_level=1)
    ctx_p2 = fluid.data(name='ctx_p2_data', shape=[None, 1], dtype='int64', lod_level=1)
    mark = fluid.data(name='mark_data', shape=[None, 1], dtype='int64', lod_level=1)

    fluid.default_startup_program().random_seed = 90  # the chapter's --enable_ce seed
    fluid.default_main_program().random_seed = 90

    # define network topology
    feature_out = db_lstm(word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark, **dims)
    target = fluid.layers.data(name='target', shape=[1], dtype='int64', lod_level=1)
    crf_cost = fluid.layers.linear_chain_crf(input=feature_out, label=target,
                                             param_attr=fluid.ParamAttr(name='crfw', learning_rate=mix_hidden_lr))

    avg_cost = fluid.layers.mean(crf_cost)

    sgd_optimizer = fluid.optimizer.SGD(learning_rate=fluid.layers.exponential_decay(
        learning_rate=0.01, decay_steps=100000, decay_rate=0.5, staircase=True))

    sgd_optimizer.minimize(avg_cost)

    crf_decode = fluid.layers.crf_decoding(input=feature_out, param_attr=fluid.ParamAttr(name='crfw'))
    (precision, recall, f1_score, num_infer_chunks, num_label_chunks, num_correct_chunks) = fluid.layers.chunk_eval(
        input=crf_decode, label=target, chunk_scheme="IOB", num_chunk_types=int(math.ceil((len(label_dict) - 1) / 2.0)))

    train_data = paddle.batch(paddle.reader.shuffle(paddle.dataset.conll05.test(), buf_size=8192),
                              batch_size=BATCH_SIZE)

    place = fluid.CPUPlace()
    feeder = fluid.DataFeeder(feed_list=[word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, predicate, mark, target],
                              place=place)
    exe = fluid.Executor(place)

    exe.run(fluid.default_startup_program())
    embedding_param = fluid.global_scope().find_var(embedding_name).get_tensor()
    embedding_param.set(load_parameter(conll05.get_embedding(), len(word_dict), word_dim), place)
    loaded = np.array(embedding_param)

    costs, f1s = [], []
    for pass_id in range(PASS_NUM):  # noqa: B007  (the chapter prints it)
        for data in train_data():
            cost, f1 = exe.run(fluid.default_main_program(), feed=feeder.feed(data), fetch_list=[avg_cost, f1_score])
            costs.append(float(np.array(cost).ravel()[0]))
            f1s.append(float(np.array(f1).ravel()[0]))
    # the frozen table is unchanged by training
    np.testing.assert_array_equal(np.array(fluid.global_scope().find_var(embedding_name).get_tensor()), loaded)
    fluid.io.save_inference_model(save_dirname, ['word_data', 'verb_data', 'ctx_n2_data', 'ctx_n1_data',
                                                 'ctx_0_data', 'ctx_p1_data', 'ctx_p2_data', 'mark_data'],
                                  [feature_out], exe)
    return costs, f1s, dims


def infer(save_dirname, word_dict_len, pred_dict_len, mark_dict_len=2, **ignored):
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names, fetch_targets] = fluid.io.load_inference_model(save_dirname, exe)
        lod = [[3, 4, 2]]
        base_shape = [1]
        # The range of random integers is [low, high]
        word = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=word_dict_len - 1)
        pred = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=pred_dict_len - 1)
        ctx_n2 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=word_dict_len - 1)
        ctx_n1 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=word_dict_len - 1)
        ctx_0 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=word_dict_len - 1)
        ctx_p1 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=word_dict_len - 1)
        ctx_p2 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=word_dict_len - 1)
        mark = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0, high=mark_dict_len - 1)
        assert feed_target_names == ['word_data', 'verb_data', 'ctx_n2_data', 'ctx_n1_data', 'ctx_0_data',
                                     'ctx_p1_data', 'ctx_p2_data', 'mark_data']
        results = exe.run(inference_program, feed={
            feed_target_names[0]: word, feed_target_names[1]: pred, feed_target_names[2]: ctx_n2,
            feed_target_names[3]: ctx_n1, feed_target_names[4]: ctx_0, feed_target_names[5]: ctx_p1,
            feed_target_names[6]: ctx_p2, feed_target_names[7]: mark}, fetch_list=fetch_targets, return_numpy=False)
        return results[0].lod(), np.array(results[0])


def test_label_semantic_roles_trains_decodes_and_infers(chapter, book_data, monkeypatch):
    import fakes
    fakes.install_conll05(book_data, monkeypatch=monkeypatch)
    costs, f1s, dims = train("label_semantic_roles.inference.model")
    assert all(np.isfinite(costs)) and costs[0] > 0
    assert np.mean(costs[-3:]) < 0.5 * np.mean(costs[:3]), costs  # the CRF loss falls
    assert all(0.0 <= f <= 1.0 for f in f1s) and max(f1s[-3:]) > f1s[0], f1s  # decoding improves
    lod, out = infer("label_semantic_roles.inference.model", **dims)
    assert lod == [[0, 3, 7, 9]] and out.shape == (9, dims["label_dict_len"]) and np.isfinite(out).all()
