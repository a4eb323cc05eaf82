"""MovieLens 1M (Fluid 1.x ``paddle.dataset.movielens``): ml-1m.zip of grouplens.org.

``train()``/``test()`` split ``ratings.dat`` line by line: a line goes to the test set iff a draw of
``numpy.random.RandomState(0).random_sample()`` is below 0.1, the same draws as Fluid's
``np.random.seed(0); np.random.random()`` (fluidlite does not reseed numpy's global generator). Each
sample is ``[user id, gender (M 0, F 1), age index in age_table, job id, movie id, [category ids],
[title word ids], [rating * 2 - 5.0]]``. Titles lose their ``(year)`` suffix and are lower-cased and
split on whitespace. Files are decoded as latin-1.

**Deterministic ids.** Fluid numbered title words and categories by enumerating Python sets, so its
ids changed from run to run (string hashing is randomised). fluidlite numbers them in order of first
appearance in ``movies.dat`` (a movie's categories left to right, then its title words).
Cached in ``<data home>/movielens/``.
"""
import functools
import re
import zipfile

import numpy as np

from . import common

__all__ = ["train", "test", "get_movie_title_dict", "max_movie_id", "max_user_id", "max_job_id",
           "movie_categories", "user_info", "movie_info", "age_table", "fetch", "MovieInfo", "UserInfo"]

age_table = [1, 18, 25, 35, 45, 50, 56]
URL = "http://files.grouplens.org/datasets/movielens/ml-1m.zip"
MIRROR_URL = "https://dataset.bj.bcebos.com/movielens%2Fml-1m.zip"
MD5 = "c4d9eecfca2ab87c1945afe126590906"


class MovieInfo:
    """A movie's id, categories and title."""

    def __init__(self, index, categories, title):
        self.index = int(index)
        self.categories = categories
        self.title = title

    def value(self):
        return [self.index, [CATEGORIES_DICT[c] for c in self.categories],
                [MOVIE_TITLE_DICT[w.lower()] for w in self.title.split()]]

    def __repr__(self):
        return "<MovieInfo id(%d), title(%s), categories(%s)>" % (self.index, self.title, self.categories)


class UserInfo:
    """A user's id, gender, age bucket and job."""

    def __init__(self, index, gender, age, job_id):
        self.index = int(index)
        self.is_male = gender == "M"
        self.age = age_table.index(int(age))
        self.job_id = int(job_id)

    def value(self):
        return [self.index, 0 if self.is_male else 1, self.age, self.job_id]

    def __repr__(self):
        return "<UserInfo id(%d), gender(%s), age(%d), job(%d)>" % (
            self.index, "M" if self.is_male else "F", age_table[self.age], self.job_id)


MOVIE_INFO = None
MOVIE_TITLE_DICT = None
CATEGORIES_DICT = None
USER_INFO = None
_loaded_from = None
_TITLE = re.compile(r"^(.*)\((\d+)\)$")


def _path():
    return common.get_file("movielens", "ml-1m.zip", MD5, [MIRROR_URL, URL], aliases=("movielens%2Fml-1m.zip",))


def _lines(package, name):
    with package.open(name) as f:
        for line in f:
            yield line.decode("latin-1")


def _initialize_meta_info():
    global MOVIE_INFO, MOVIE_TITLE_DICT, CATEGORIES_DICT, USER_INFO, _loaded_from
    fn = _path()
    if _loaded_from == fn:
        return fn
    movies, titles, categories, users = {}, {}, {}, {}
    with zipfile.ZipFile(fn) as package:
        for line in _lines(package, "ml-1m/movies.dat"):
            movie_id, title, cats = line.strip().split("::")
            cats = cats.split("|")
            for c in cats:
                categories.setdefault(c, len(categories))
            m = _TITLE.match(title)
            if m is None:
                raise ValueError("movielens: movie %s's title %r does not end in '(year)'" % (movie_id, title))
            title = m.group(1)
            for w in title.split():
                titles.setdefault(w.lower(), len(titles))
            movies[int(movie_id)] = MovieInfo(movie_id, cats, title)
        for line in _lines(package, "ml-1m/users.dat"):
            uid, gender, age, job, _ = line.strip().split("::")
            users[int(uid)] = UserInfo(uid, gender, age, job)
    MOVIE_INFO, MOVIE_TITLE_DICT, CATEGORIES_DICT, USER_INFO, _loaded_from = movies, titles, categories, users, fn
    return fn


def _reader(rand_seed=0, test_ratio=0.1, is_test=False):
    fn = _initialize_meta_info()
    draws = np.random.RandomState(rand_seed)
    with zipfile.ZipFile(fn) as package:
        for line in _lines(package, "ml-1m/ratings.dat"):
            if (draws.random_sample() < test_ratio) == is_test:
                uid, mov_id, rating, _ = line.strip().split("::")
                rating = float(rating) * 2 - 5.0
                yield USER_INFO[int(uid)].value() + MOVIE_INFO[int(mov_id)].value() + [[rating]]


def _reader_creator(**kwargs):
    _initialize_meta_info()  # download and parse when the creator is called, as Fluid did
    return lambda: _reader(**kwargs)


train = functools.partial(_reader_creator, is_test=False)
test = functools.partial(_reader_creator, is_test=True)


def get_movie_title_dict():
    """Lower-cased title word -> id."""
    _initialize_meta_info()
    return MOVIE_TITLE_DICT


def max_movie_id():
    _initialize_meta_info()
    return max(m.index for m in MOVIE_INFO.values())


def max_user_id():
    _initialize_meta_info()
    return max(u.index for u in USER_INFO.values())


def max_job_id():
    _initialize_meta_info()
    return max(u.job_id for u in USER_INFO.values())


def movie_categories():
    """Category name -> id."""
    _initialize_meta_info()
    return CATEGORIES_DICT


def user_info():
    """User id -> UserInfo."""
    _initialize_meta_info()
    return USER_INFO


def movie_info():
    """Movie id -> MovieInfo."""
    _initialize_meta_info()
    return MOVIE_INFO


def fetch():
    """Download ml-1m.zip."""
    _path()
