"""Fluid's unique naming: ``generate("fc")`` gives fc_0, fc_1, ...; ``guard()`` starts a fresh namespace."""
import collections
import contextlib


class UniqueNameGenerator:
    def __init__(self, prefix=""):
        self.ids = collections.defaultdict(int)
        self.prefix = prefix

    def __call__(self, key):
        n = self.ids[key]
        self.ids[key] += 1
        return "%s%s_%d" % (self.prefix, key, n)


_generator = UniqueNameGenerator()


def generate(key):
    return _generator(key)


def generate_with_ignorable_key(key):
    return _generator(key)


def switch(new_generator=None):
    global _generator
    old = _generator
    _generator = new_generator or UniqueNameGenerator()
    return old


@contextlib.contextmanager
def guard(new_generator=None):
    if isinstance(new_generator, str):
        new_generator = UniqueNameGenerator(new_generator)
    old = switch(new_generator)
    try:
        yield
    finally:
        switch(old)
