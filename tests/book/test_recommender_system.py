"""Book chapter 05.recommender_system (PaddlePaddle/book, the Fluid 1.6+ train.py) with only the import changed: the
user tower (fluid.data of shape [None] ids, four sparse fluid.embedding tables named by param_attr, fc each, concat,
fc tanh) and the movie tower (movie id embedding and fc, category ids as a LoD sequence through embedding and
sequence_pool sum, title words as a LoD sequence through embedding and nets.sequence_conv_pool), cos_sim scaled by
5, square_error_cost, SGD, the test clone evaluated after every batch, DataFeeder over eight variables of which two
are LoD, save_inference_model at batch 20 and infer() with 1-D numpy ids and create_lod_tensor sequences,
return_numpy=False, on generated MovieLens files. The chapter's inference ids (user 1, movie 783, its categories
and title words) are those of the real MovieLens data; here they are the first test sample's."""
import math

import numpy as np

import fluidlite as fluid
import fluidlite as paddle
import fluidlite.layers as layers
import fluidlite.nets as nets

IS_SPARSE = True
BATCH_SIZE = 8  # the chapter's 256, scaled down to the generated data
PASS_NUM = 3
SAVE_AT_BATCH = 4  # the chapter saves at batch_id == 20 of the first pass


def get_usr_combined_features():
    USR_DICT_SIZE = paddle.dataset.movielens.max_user_id() + 1
    uid = fluid.data(name='user_id', shape=[None], dtype='int64')
    usr_emb = fluid.embedding(input=uid, dtype='float32', size=[USR_DICT_SIZE, 32], param_attr='user_table',
                              is_sparse=IS_SPARSE)
    usr_fc = layers.fc(input=usr_emb, size=32)

    USR_GENDER_DICT_SIZE = 2
    usr_gender_id = fluid.data(name='gender_id', shape=[None], dtype='int64')
    usr_gender_emb = fluid.embedding(input=usr_gender_id, size=[USR_GENDER_DICT_SIZE, 16], param_attr='gender_table',
                                     is_sparse=IS_SPARSE)
    usr_gender_fc = layers.fc(input=usr_gender_emb, size=16)

    USR_AGE_DICT_SIZE = len(paddle.dataset.movielens.age_table)
    usr_age_id = fluid.data(name='age_id', shape=[None], dtype="int64")
    usr_age_emb = fluid.embedding(input=usr_age_id, size=[USR_AGE_DICT_SIZE, 16], is_sparse=IS_SPARSE,
                                  param_attr='age_table')
    usr_age_fc = layers.fc(input=usr_age_emb, size=16)

    USR_JOB_DICT_SIZE = paddle.dataset.movielens.max_job_id() + 1
    usr_job_id = fluid.data(name='job_id', shape=[None], dtype="int64")
    usr_job_emb = fluid.embedding(input=usr_job_id, size=[USR_JOB_DICT_SIZE, 16], param_attr='job_table',
                                  is_sparse=IS_SPARSE)
    usr_job_fc = layers.fc(input=usr_job_emb, size=16)

    concat_embed = layers.concat(input=[usr_fc, usr_gender_fc, usr_age_fc, usr_job_fc], axis=1)
    usr_combined_features = layers.fc(input=concat_embed, size=200, act="tanh")
    return usr_combined_features


def get_mov_combined_features():
    MOV_DICT_SIZE = paddle.dataset.movielens.max_movie_id() + 1
    mov_id = fluid.data(name='movie_id', shape=[None], dtype='int64')
    mov_emb = fluid.embedding(input=mov_id, dtype='float32', size=[MOV_DICT_SIZE, 32], param_attr='movie_table',
                              is_sparse=IS_SPARSE)
    mov_fc = layers.fc(input=mov_emb, size=32)

    CATEGORY_DICT_SIZE = len(paddle.dataset.movielens.movie_categories())
    category_id = fluid.data(name='category_id', shape=[None], dtype='int64', lod_level=1)
    mov_categories_emb = fluid.embedding(input=category_id, size=[CATEGORY_DICT_SIZE, 32], is_sparse=IS_SPARSE)
    mov_categories_hidden = layers.sequence_pool(input=mov_categories_emb, pool_type="sum")

    MOV_TITLE_DICT_SIZE = len(paddle.dataset.movielens.get_movie_title_dict())
    mov_title_id = fluid.data(name='movie_title', shape=[None], dtype='int64', lod_level=1)
    mov_title_emb = fluid.embedding(input=mov_title_id, size=[MOV_TITLE_DICT_SIZE, 32], is_sparse=IS_SPARSE)
    mov_title_conv = nets.sequence_conv_pool(input=mov_title_emb, num_filters=32, filter_size=3, act="tanh",
                                             pool_type="sum")

    concat_embed = layers.concat(input=[mov_fc, mov_categories_hidden, mov_title_conv], axis=1)
    mov_combined_features = layers.fc(input=concat_embed, size=200, act="tanh")
    return mov_combined_features


def inference_program():
    usr_combined_features = get_usr_combined_features()
    mov_combined_features = get_mov_combined_features()

    inference = layers.cos_sim(X=usr_combined_features, Y=mov_combined_features)
    scale_infer = layers.scale(x=inference, scale=5.0)

    label = fluid.data(name='score', shape=[None, 1], dtype='float32')
    square_cost = layers.square_error_cost(input=scale_infer, label=label)
    avg_cost = layers.mean(square_cost)
    return scale_infer, avg_cost


def optimizer_func():
    return fluid.optimizer.SGD(learning_rate=0.2)


def train(params_dirname):
    place = fluid.CPUPlace()
    train_reader = fluid.io.batch(fluid.io.shuffle(paddle.dataset.movielens.train(), buf_size=8192),
                                  batch_size=BATCH_SIZE)
    test_reader = fluid.io.batch(paddle.dataset.movielens.test(), batch_size=BATCH_SIZE)
    feed_order = ['user_id', 'gender_id', 'age_id', 'job_id', 'movie_id', 'category_id', 'movie_title', 'score']

    main_program = fluid.default_main_program()
    star_program = fluid.default_startup_program()
    main_program.random_seed = 90  # the chapter's --enable_ce seed
    star_program.random_seed = 90

    scale_infer, avg_cost = inference_program()

    test_program = main_program.clone(for_test=True)
    sgd_optimizer = optimizer_func()
    sgd_optimizer.minimize(avg_cost)
    exe = fluid.Executor(place)

    def train_test(program, reader):
        count = 0
        feed_var_list = [program.global_block().var(var_name) for var_name in feed_order]
        feeder_test = fluid.DataFeeder(feed_list=feed_var_list, place=place)
        test_exe = fluid.Executor(place)
        accumulated = 0
        for test_data in reader():
            avg_cost_np = test_exe.run(program=program, feed=feeder_test.feed(test_data), fetch_list=[avg_cost])
            accumulated += avg_cost_np[0]
            count += 1
        return accumulated / count

    losses, test_costs = [], []

    def train_loop():
        feed_list = [main_program.global_block().var(var_name) for var_name in feed_order]
        feeder = fluid.DataFeeder(feed_list, place)
        exe.run(star_program)
        for pass_id in range(PASS_NUM):
            for batch_id, data in enumerate(train_reader()):
                outs = exe.run(program=main_program, feed=feeder.feed(data), fetch_list=[avg_cost])
                out = np.array(outs[0])
                losses.append(float(out.ravel()[0]))
                test_avg_cost = train_test(test_program, test_reader)
                test_costs.append(float(np.asarray(test_avg_cost).ravel()[0]))
                if pass_id == PASS_NUM - 1 and batch_id == SAVE_AT_BATCH:
                    if params_dirname is not None:
                        fluid.io.save_inference_model(params_dirname, [
                            "user_id", "gender_id", "age_id", "job_id", "movie_id", "category_id", "movie_title"
                        ], [scale_infer], exe)
                    return
                if math.isnan(float(out[0])):
                    raise AssertionError("got NaN loss, training failed.")

    train_loop()
    return losses, test_costs


def infer(params_dirname, sample):
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inferencer, feed_target_names, fetch_targets] = fluid.io.load_inference_model(params_dirname, exe)
        uid, gender, age, job, mid, categories, title = sample[:7]
        assert feed_target_names[0] == "user_id"
        user_id = np.array([uid]).astype("int64").reshape(-1)
        assert feed_target_names[1] == "gender_id"
        gender_id = np.array([gender]).astype("int64").reshape(-1)
        assert feed_target_names[2] == "age_id"
        age_id = np.array([age]).astype("int64").reshape(-1)
        assert feed_target_names[3] == "job_id"
        job_id = np.array([job]).astype("int64").reshape(-1)
        assert feed_target_names[4] == "movie_id"
        movie_id = np.array([mid]).astype("int64").reshape(-1)
        assert feed_target_names[5] == "category_id"
        category_id = fluid.create_lod_tensor(np.array(categories, dtype='int64'), [[len(categories)]], place)
        assert feed_target_names[6] == "movie_title"
        movie_title = fluid.create_lod_tensor(np.array(title, dtype='int64'), [[len(title)]], place)
        results = exe.run(inferencer, feed={
            feed_target_names[0]: user_id, feed_target_names[1]: gender_id, feed_target_names[2]: age_id,
            feed_target_names[3]: job_id, feed_target_names[4]: movie_id, feed_target_names[5]: category_id,
            feed_target_names[6]: movie_title}, fetch_list=fetch_targets, return_numpy=False)
        return np.array(results[0])


def test_recommender_system_trains_saves_and_infers(chapter, book_data, monkeypatch):
    import fakes
    # ratings the towers can learn: users rate movies of their own parity high (movie ids are even: id / 2)
    fakes.install_movielens(book_data, n_users=12, n_movies=16, n_ratings=160, monkeypatch=monkeypatch,
                            rate=lambda user, movie: 5 if user % 2 == (movie // 2) % 2 else 1)
    losses, test_costs = train("recommender_system.inference.model")
    assert all(np.isfinite(losses)) and all(np.isfinite(test_costs))
    # the test cost (the whole test set after every step) falls as the towers learn the ratings
    assert np.mean(test_costs[-3:]) < 0.5 * np.mean(test_costs[:3]), test_costs
    sample = next(paddle.dataset.movielens.test()())
    rating = infer("recommender_system.inference.model", sample)
    assert rating.shape == (1, 1) and -5.0 <= rating[0, 0] <= 5.0  # 5 * cos_sim
