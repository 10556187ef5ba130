"""Running sum / count / mean of an audio stream, chunk by chunk, with implicit state.

Each request carries one chunk of FP32 samples (``AUDIO_CHUNK``, shape
``[1, n]``). The server hands the model the stream's accumulator
(``ACCUMULATOR_IN`` = [sum, count] as FP64; zeros on the first chunk) and keeps
the ``ACCUMULATOR_OUT`` the model returns for the next chunk, so the model
itself is stateless. Sums are in FP64, in sample order: results are exact and
deterministic (equal to ``numpy.cumsum`` over the concatenated stream).
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            ready = pb_utils.get_input_tensor_by_name(request, "READY").as_numpy().reshape(-1)[0]
            if not ready:  # a null request filling an idle batch slot: nothing to do
                responses.append(pb_utils.InferenceResponse([]))
                continue
            chunk = pb_utils.get_input_tensor_by_name(request, "AUDIO_CHUNK").as_numpy().astype(np.float64)
            acc = pb_utils.get_input_tensor_by_name(request, "ACCUMULATOR_IN").as_numpy().reshape(-1)
            total = acc[0] + chunk.sum()
            count = acc[1] + chunk.size
            mean = total / count if count else 0.0
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("SUM", np.array([[total]], np.float64)),
                        pb_utils.Tensor("COUNT", np.array([[count]], np.int64)),
                        pb_utils.Tensor("MEAN", np.array([[mean]], np.float64)),
                        pb_utils.Tensor("ACCUMULATOR_OUT", np.array([[total, count]], np.float64)),
                    ]
                )
            )
        return responses
