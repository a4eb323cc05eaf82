"""Recurrent layers over LoD batches (Fluid 1.8's dynamic_lstm, dynamic_lstmp, dynamic_gru, gru_unit): the input is
a LoDTensor of already-projected gates; the kernels reorder the batch by length (kernels/helpers/sequence_batch.h)
so that each time step is one GEMM over the sequences still alive."""
from ..framework import Variable  # noqa: F401
from ..layer_helper import LayerHelper  # noqa: F401

__all__ = []

# ---------------------------------------------------------------- LSTM: dynamic_lstm, dynamic_lstmp

# ---------------------------------------------------------------- GRU: dynamic_gru, gru_unit

# ---------------------------------------------------------------- CRF: linear_chain_crf, crf_decoding, chunk_eval
