"""Recurrent layers over LoD batches (Fluid 1.8's dynamic_lstm, dynamic_lstmp, dynamic_gru, gru_unit) and the CRF
layers that tag their output: the input is a LoDTensor of already-projected gates; the kernels reorder the batch by
length (kernels/helpers/sequence_batch.h) so that each time step is one GEMM over the sequences still alive. Each
section lists its own names."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- LSTM: dynamic_lstm, dynamic_lstmp

# ---------------------------------------------------------------- GRU: dynamic_gru, gru_unit

# ---------------------------------------------------------------- CRF: linear_chain_crf, crf_decoding, chunk_eval
