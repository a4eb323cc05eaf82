"""fluid.metrics: Python-side accumulators of evaluation metrics over mini-batches (Fluid 1.x).

The user fetches numpy values from Executor.run and feeds them to ``update``; ``eval`` computes the metric
over everything since the last ``reset``. As in Fluid, a metric's state is its attributes whose names do not
start with ``_``: ``reset`` sets them back (int to 0, float to 0.0, ndarray to zeros, anything else to None)
and ``get_config`` returns ``{"name": ..., "states": deep copy of them}``. ``Auc`` keeps its histograms in
``_stat_pos``/``_stat_neg``, so, as in Fluid, ``reset`` does not clear them (make a new ``Auc`` instead).
``DetectionMAP`` is not provided (detection models are out of scope, docs/compat.md)."""
import copy

import numpy as np

__all__ = ["MetricBase", "CompositeMetric", "Precision", "Recall", "Accuracy", "ChunkEvaluator", "EditDistance",
           "Auc"]


def _is_numpy_(var):
    return isinstance(var, (np.ndarray, np.generic))


def _is_number_(var):
    return isinstance(var, (int, float, np.int64)) or (isinstance(var, np.ndarray) and var.shape == (1,))


def _is_number_or_matrix_(var):
    return _is_number_(var) or isinstance(var, np.ndarray)


def _scalar(v):
    """A count fetched as an array of shape (1,) (or a numpy scalar) as a Python number; anything else as it is."""
    return v.item() if isinstance(v, (np.ndarray, np.generic)) and v.size == 1 else v


class MetricBase(object):
    """Base of every metric: ``update`` adds one mini-batch to the state, ``eval`` computes the metric.

    name: the metric's name (default: the class name), returned by str(metric)."""

    def __init__(self, name):
        self._name = str(name) if name is not None else self.__class__.__name__

    def __str__(self):
        return self._name

    def _states(self):
        return {attr: value for attr, value in self.__dict__.items() if not attr.startswith("_")}

    def reset(self):
        """Sets every state (attribute not starting with ``_``) back: int 0, float 0.0, ndarray zeros, else None."""
        for attr, value in self._states().items():
            if isinstance(value, int):
                setattr(self, attr, 0)
            elif isinstance(value, float):
                setattr(self, attr, 0.0)
            elif isinstance(value, (np.ndarray, np.generic)):
                setattr(self, attr, np.zeros_like(value))
            else:
                setattr(self, attr, None)

    def get_config(self):
        """{"name": the metric's name, "states": a deep copy of its states}."""
        return {"name": self._name, "states": copy.deepcopy(self._states())}

    def update(self, preds, labels):
        raise NotImplementedError("Should not use it directly, please extend it.")

    def eval(self):
        raise NotImplementedError("Should not use it directly, please extend it.")


class CompositeMetric(MetricBase):
    """Several metrics updated with the same (preds, labels); eval() returns the list of their results."""

    def __init__(self, name=None):
        super(CompositeMetric, self).__init__(name)
        self._metrics = []

    def add_metric(self, metric):
        if not isinstance(metric, MetricBase):
            raise ValueError("SubMetric should be inherit from MetricBase.")
        self._metrics.append(metric)

    def update(self, preds, labels):
        for m in self._metrics:
            m.update(preds, labels)

    def eval(self):
        return [m.eval() for m in self._metrics]


def _check_preds_labels(preds, labels):
    if not _is_numpy_(preds):
        raise ValueError("The 'preds' must be a numpy ndarray.")
    if not _is_numpy_(labels):
        raise ValueError("The 'labels' must be a numpy ndarray.")


class Precision(MetricBase):
    """Binary precision tp / (tp + fp): preds are rounded (np.rint) to 0/1; 0.0 when nothing was predicted 1."""

    def __init__(self, name=None):
        super(Precision, self).__init__(name)
        self.tp = 0  # true positives
        self.fp = 0  # false positives

    def update(self, preds, labels):
        _check_preds_labels(preds, labels)
        preds = np.rint(preds).astype("int32")
        for i in range(labels.shape[0]):
            if preds[i] == 1:
                if preds[i] == labels[i]:
                    self.tp += 1
                else:
                    self.fp += 1

    def eval(self):
        ap = self.tp + self.fp
        return float(self.tp) / ap if ap != 0 else 0.0


class Recall(MetricBase):
    """Binary recall tp / (tp + fn): preds are rounded (np.rint) to 0/1; 0.0 when no label is 1."""

    def __init__(self, name=None):
        super(Recall, self).__init__(name)
        self.tp = 0  # true positives
        self.fn = 0  # false negatives

    def update(self, preds, labels):
        _check_preds_labels(preds, labels)
        preds = np.rint(preds).astype("int32")
        for i in range(labels.shape[0]):
            if labels[i] == 1:
                if preds[i] == labels[i]:
                    self.tp += 1
                else:
                    self.fn += 1

    def eval(self):
        recall = self.tp + self.fn
        return float(self.tp) / recall if recall != 0 else 0.0


class Accuracy(MetricBase):
    """The weighted mean of mini-batch accuracies: update(value, weight) with value the batch's accuracy
    (e.g. fetched from layers.accuracy) and weight its batch size."""

    def __init__(self, name=None):
        super(Accuracy, self).__init__(name)
        self.value = 0.0
        self.weight = 0.0

    def update(self, value, weight):
        if not _is_number_or_matrix_(value):
            raise ValueError("The 'value' must be a number(int, float) or a numpy ndarray.")
        if not _is_number_(weight):
            raise ValueError("The 'weight' must be a number(int, float).")
        if weight < 0:
            raise ValueError("The 'weight' can not be negative")
        self.value += value * weight
        self.weight += weight

    def eval(self):
        if self.weight == 0:
            raise ValueError("There is no data in Accuracy Metrics. Please check layers.accuracy output has added "
                             "to Accuracy.")
        return self.value / self.weight


class ChunkEvaluator(MetricBase):
    """Precision, recall and F1 of chunk detection from the counts layers.chunk_eval outputs per mini-batch
    (num_infer_chunks, num_label_chunks, num_correct_chunks), accumulated over batches."""

    def __init__(self, name=None):
        super(ChunkEvaluator, self).__init__(name)
        self.num_infer_chunks = 0
        self.num_label_chunks = 0
        self.num_correct_chunks = 0

    def update(self, num_infer_chunks, num_label_chunks, num_correct_chunks):
        if not _is_number_or_matrix_(num_infer_chunks):
            raise ValueError("The 'num_infer_chunks' must be a number(int) or a numpy ndarray.")
        if not _is_number_or_matrix_(num_label_chunks):
            raise ValueError("The 'num_label_chunks' must be a number(int, float) or a numpy ndarray.")
        if not _is_number_or_matrix_(num_correct_chunks):
            raise ValueError("The 'num_correct_chunks' must be a number(int, float) or a numpy ndarray.")
        self.num_infer_chunks += num_infer_chunks
        self.num_label_chunks += num_label_chunks
        self.num_correct_chunks += num_correct_chunks

    def eval(self):
        # chunk_eval's counts are fetched as arrays of shape (1,): their one element is the count
        infer, label, correct = (_scalar(v) for v in (self.num_infer_chunks, self.num_label_chunks,
                                                       self.num_correct_chunks))
        precision = float(correct) / infer if infer else 0
        recall = float(correct) / label if label else 0
        f1_score = float(2 * precision * recall) / (precision + recall) if correct else 0
        return precision, recall, f1_score


class EditDistance(MetricBase):
    """The mean edit distance and the instance error rate (the fraction of sequences with a nonzero distance)
    from layers.edit_distance's outputs: update(distances, seq_num) per mini-batch."""

    def __init__(self, name):
        super(EditDistance, self).__init__(name)
        self.total_distance = 0.0
        self.seq_num = 0
        self.instance_error = 0

    def update(self, distances, seq_num):
        if not _is_numpy_(distances):
            raise ValueError("The 'distances' must be a numpy ndarray.")
        if not _is_number_(seq_num):
            raise ValueError("The 'seq_num' must be a number(int, float).")
        seq_right_count = np.sum(distances == 0)
        self.seq_num += seq_num
        self.instance_error += seq_num - seq_right_count
        self.total_distance += np.sum(distances)

    def eval(self):
        if self.seq_num == 0:
            raise ValueError("There is no data in EditDistance Metric. Please check layers.edit_distance output "
                             "has been added to EditDistance.")
        seq_num = _scalar(self.seq_num)
        return _scalar(self.total_distance) / seq_num, _scalar(self.instance_error) / float(seq_num)


class Auc(MetricBase):
    """ROC AUC of a binary classifier, computed in Python from histograms of the positive-class probability.

    update(preds, labels): preds [N, 2] probabilities (column 1: the positive class), labels [N] or [N, 1];
    each row goes to bucket int(preds[i, 1] * num_thresholds) of the positive or negative histogram. eval():
    the trapezoid area under the ROC curve those buckets draw, 0.0 unless there are both positives and
    negatives. Only ROC is computed, as in Fluid: curve is accepted and recorded, and 'PR' gives the ROC area
    too (layers.auc likewise)."""

    def __init__(self, name, curve="ROC", num_thresholds=4095):
        super(Auc, self).__init__(name=name)
        self._curve = curve
        self._num_thresholds = num_thresholds
        self._stat_pos = [0] * (num_thresholds + 1)
        self._stat_neg = [0] * (num_thresholds + 1)

    def update(self, preds, labels):
        if not _is_numpy_(labels):
            raise ValueError("The 'labels' must be a numpy ndarray.")
        if not _is_numpy_(preds):
            raise ValueError("The 'predictions' must be a numpy ndarray.")
        for i, lbl in enumerate(labels):
            value = preds[i, 1]
            if not 0 <= value <= 1:
                raise ValueError("Auc.update: preds[%d, 1] = %s is not a probability in [0, 1]" % (i, float(value)))
            bin_idx = int(value * self._num_thresholds)
            if lbl:
                self._stat_pos[bin_idx] += 1.0
            else:
                self._stat_neg[bin_idx] += 1.0

    @staticmethod
    def trapezoid_area(x1, x2, y1, y2):
        return abs(x1 - x2) * (y1 + y2) / 2.0

    def eval(self):
        tot_pos = 0.0
        tot_neg = 0.0
        auc = 0.0
        for idx in range(self._num_thresholds, -1, -1):
            tot_pos_prev, tot_neg_prev = tot_pos, tot_neg
            tot_pos += self._stat_pos[idx]
            tot_neg += self._stat_neg[idx]
            auc += self.trapezoid_area(tot_neg, tot_neg_prev, tot_pos, tot_pos_prev)
        return auc / tot_pos / tot_neg if tot_pos > 0.0 and tot_neg > 0.0 else 0.0
