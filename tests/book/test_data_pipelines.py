"""The data code of the book chapters whose layers come with later issues (05 recommender_system,
06 understand_sentiment, 07 label_semantic_roles, 08 machine_translation, 09 gan): their input declarations,
reader pipelines and DataFeeder calls, written as the chapters write them with only the import changed, run
on generated data files. Each batch must reach the feed dict with the chapter's dtypes and LoD, so that these
chapters stop only at their first missing layer (docs/compat.md names it and its issue)."""
import numpy as np

import fluidlite as fluid
import fluidlite as paddle


def _first_batch(reader, feeder):
    batch = next(iter(reader()))
    return batch, feeder.feed(batch)


def _check_lod_slot(tensor, samples):
    """A lod_level-1 slot: one sequence per sample, the values concatenated in order."""
    assert tensor.recursive_sequence_lengths() == [[len(s) for s in samples]]
    assert tensor.has_valid_recursive_sequence_lengths()
    np.testing.assert_array_equal(np.array(tensor).reshape(-1), np.concatenate([np.asarray(s) for s in samples]))


def test_recommender_system_data(chapter, book_data, monkeypatch):
    import fakes
    fakes.install_movielens(book_data, monkeypatch=monkeypatch)
    assert paddle.dataset.movielens.max_user_id() >= 1 and paddle.dataset.movielens.max_movie_id() >= 1
    assert paddle.dataset.movielens.max_job_id() >= 0 and len(paddle.dataset.movielens.movie_categories()) >= 1
    uid = fluid.data(name="user_id", shape=[None, 1], dtype="int64")
    gender_id = fluid.data(name="gender_id", shape=[None, 1], dtype="int64")
    age_id = fluid.data(name="age_id", shape=[None, 1], dtype="int64")
    job_id = fluid.data(name="job_id", shape=[None, 1], dtype="int64")
    mov_id = fluid.data(name="movie_id", shape=[None, 1], dtype="int64")
    category_id = fluid.data(name="category_id", shape=[None, 1], dtype="int64", lod_level=1)
    mov_title_id = fluid.data(name="movie_title", shape=[None, 1], dtype="int64", lod_level=1)
    label = fluid.data(name="score", shape=[None, 1], dtype="float32")
    feed_list = [uid, gender_id, age_id, job_id, mov_id, category_id, mov_title_id, label]
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.movielens.train(), buf_size=8192), batch_size=4)
    feeder = fluid.DataFeeder(feed_list=feed_list, place=fluid.CPUPlace())
    batch, feed = _first_batch(train_reader, feeder)
    assert len(batch) == 4 and set(feed) == {v.name for v in feed_list}
    for i, var in enumerate(feed_list):
        t = feed[var.name]
        assert t._dtype() == var.dtype
        if var.lod_level:
            _check_lod_slot(t, [s[i] for s in batch])
        else:
            np.testing.assert_array_equal(np.array(t).reshape(-1), np.array([s[i] for s in batch]).reshape(-1))
            assert t.shape() == [4, 1]


def test_understand_sentiment_data(chapter, book_data, monkeypatch):
    import fakes
    fakes.install_imdb(book_data, monkeypatch=monkeypatch)
    word_dict = paddle.dataset.imdb.word_dict()
    data = fluid.data(name="words", shape=[None], dtype="int64", lod_level=1)
    label = fluid.data(name="label", shape=[None, 1], dtype="int64")
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.imdb.train(word_dict), buf_size=25000),
                                batch_size=3)
    feeder = fluid.DataFeeder(feed_list=[data, label], place=fluid.CPUPlace())
    batch, feed = _first_batch(train_reader, feeder)
    _check_lod_slot(feed["words"], [s[0] for s in batch])
    assert np.array(feed["words"]).max() <= len(word_dict)  # <unk> is len(word_dict)
    assert feed["label"].shape() == [3, 1] and set(np.array(feed["label"]).reshape(-1)) <= {0, 1}


def test_label_semantic_roles_data(chapter, book_data, monkeypatch):
    import fakes
    fakes.install_conll05(book_data, monkeypatch=monkeypatch)
    word_dict, verb_dict, label_dict = paddle.dataset.conll05.get_dict()
    assert paddle.dataset.conll05.get_embedding().endswith("emb")
    names = ["word_data", "ctx_n2_data", "ctx_n1_data", "ctx_0_data", "ctx_p1_data", "ctx_p2_data", "verb_data",
             "mark_data", "target"]
    feed_list = [fluid.data(name=n, shape=[None, 1], dtype="int64", lod_level=1) for n in names]
    train_data = paddle.batch(paddle.reader.shuffle(paddle.dataset.conll05.test(), buf_size=8192), batch_size=2)
    feeder = fluid.DataFeeder(feed_list=feed_list, place=fluid.CPUPlace())
    batch, feed = _first_batch(train_data, feeder)
    for i, n in enumerate(names):
        _check_lod_slot(feed[n], [s[i] for s in batch])
    assert np.array(feed["target"]).max() < len(label_dict) and np.array(feed["verb_data"]).max() < len(verb_dict)


def test_machine_translation_data(chapter, book_data, monkeypatch):
    import fakes
    fakes.install_wmt16(book_data, monkeypatch=monkeypatch)
    dict_size = 30
    src = fluid.data(name="src_word_id", shape=[None, 1], dtype="int64", lod_level=1)
    trg = fluid.data(name="target_language_word", shape=[None, 1], dtype="int64", lod_level=1)
    trg_next = fluid.data(name="target_language_next_word", shape=[None, 1], dtype="int64", lod_level=1)
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.wmt16.train(dict_size, dict_size),
                                                      buf_size=1000), batch_size=4)
    feeder = fluid.DataFeeder(feed_list=[src, trg, trg_next], place=fluid.CPUPlace())
    batch, feed = _first_batch(train_reader, feeder)
    for i, n in enumerate(["src_word_id", "target_language_word", "target_language_next_word"]):
        _check_lod_slot(feed[n], [s[i] for s in batch])
        assert np.array(feed[n]).max() < dict_size
    src_dict = paddle.dataset.wmt16.get_dict("en", dict_size, reverse=True)
    assert src_dict[0] == "<s>" and src_dict[1] == "<e>"


def test_gan_data(chapter, book_data):
    # 09.gan: MNIST images, scaled to [-1, 1], batched; noise drawn with numpy; both fed to fluid.data inputs
    img = fluid.data(name="img", shape=[None, 784], dtype="float32")
    noise = fluid.data(name="noise", shape=[None, 100], dtype="float32")
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.mnist.train(), buf_size=60000), batch_size=8)
    data = next(iter(train_reader()))
    real_image = np.array([x[0] for x in data]).reshape(-1, 784).astype("float32")
    assert real_image.min() >= -1 and real_image.max() <= 1
    noise_data = np.random.uniform(low=-1.0, high=1.0, size=[len(data), 100]).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace())
    total = fluid.layers.reduce_sum(img) + fluid.layers.reduce_sum(noise)
    out, = exe.run(feed={"img": real_image, "noise": noise_data}, fetch_list=[total])
    np.testing.assert_allclose(float(out), real_image.sum() + noise_data.sum(), rtol=1e-4)
