"""The book's word2vec chapter (N-gram model: four context words through one shared embedding, concat, a
sigmoid hidden layer) with an nce loss instead of the full softmax, written as a Fluid 1.x script with
`import fluidlite as fluid`, trained on generated 5-grams from a small deterministic language: the loss falls,
the trained model ranks the true next word above most of the vocabulary, and training is reproducible under
program.random_seed."""
import numpy as np

import fluidlite as fluid

DICT_SIZE = 60
EMBED_SIZE = 16
HIDDEN_SIZE = 64
N = 5
BATCH = 64


def make_corpus(rng, n):
    """5-grams whose fifth word is determined by the fourth (plus a little noise)."""
    words = rng.randint(0, DICT_SIZE, (n, 4))
    nxt = (7 * words[:, 3] + 3) % DICT_SIZE
    noise = rng.rand(n) < 0.05
    nxt[noise] = rng.randint(0, DICT_SIZE, noise.sum())
    return np.concatenate([words, nxt[:, None]], axis=1).astype("int64")


def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 90
    with fluid.program_guard(main, startup):
        words = [fluid.layers.data(name=n, shape=[1], dtype="int64")
                 for n in ("firstw", "secondw", "thirdw", "forthw", "nextw")]
        embs = [fluid.layers.embedding(input=w, size=[DICT_SIZE, EMBED_SIZE], dtype="float32",
                                       param_attr="shared_w") for w in words[:4]]
        concat_embed = fluid.layers.concat(input=embs, axis=1)
        hidden1 = fluid.layers.fc(input=concat_embed, size=HIDDEN_SIZE, act="sigmoid")
        cost = fluid.layers.nce(input=hidden1, label=words[4], num_total_classes=DICT_SIZE, param_attr="nce_w",
                                bias_attr="nce_b", num_neg_samples=10, sampler="uniform")
        avg_cost = fluid.layers.mean(cost)
        fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)
    return main, startup, avg_cost


def feed_of(batch):
    names = ("firstw", "secondw", "thirdw", "forthw", "nextw")
    return {n: batch[:, i:i + 1] for i, n in enumerate(names)}


def train(steps):
    main, startup, avg_cost = build()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    rng = np.random.RandomState(0)
    corpus = make_corpus(rng, steps * BATCH)
    losses = []
    with fluid.scope_guard(scope):
        exe.run(startup)
        for s in range(steps):
            batch = corpus[s * BATCH:(s + 1) * BATCH]
            losses.append(float(exe.run(main, feed=feed_of(batch), fetch_list=[avg_cost])[0][0]))
    return losses, scope


def test_word2vec_nce_trains_and_ranks_the_next_word():
    losses, scope = train(300)
    first, last = np.mean(losses[:10]), np.mean(losses[-20:])
    assert last < 0.5 * first, (first, last)
    # score every word for held-out contexts with the trained weights: the true next word ranks near the top
    w = np.array(scope.find_var("shared_w").get_tensor())
    nce_w = np.array(scope.find_var("nce_w").get_tensor())
    nce_b = np.array(scope.find_var("nce_b").get_tensor())
    fc_w = [v for v in scope.local_var_names() if v.startswith("fc_") and v.endswith(".w_0")]
    fc_b = [v for v in scope.local_var_names() if v.startswith("fc_") and v.endswith(".b_0")]
    assert len(fc_w) == 1 and len(fc_b) == 1
    fw, fb = np.array(scope.find_var(fc_w[0]).get_tensor()), np.array(scope.find_var(fc_b[0]).get_tensor())
    test = make_corpus(np.random.RandomState(1), 200)
    hidden = 1 / (1 + np.exp(-(w[test[:, :4]].reshape(200, -1) @ fw + fb)))
    scores = hidden @ nce_w.T + nce_b[:, 0]
    rank = (scores > scores[np.arange(200), test[:, 4]][:, None]).sum(1)
    assert np.median(rank) < 3, np.median(rank)  # chance: about 30 of 60


def test_word2vec_nce_is_reproducible_under_random_seed():
    a, _ = train(5)
    b, _ = train(5)
    assert a == b
