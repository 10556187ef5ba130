"""bls_decoupled: Business Logic Scripting on a decoupled model.

Sends IN = [n] to ``square_int32`` with ``exec(decoupled=True)`` and iterates over the streamed
responses (n of them with OUT = [n], then a last one that only carries the final flag and has
no outputs). Returns SUM, the sum of the OUT values (n * n), and COUNT, the number of responses
that carried an OUT. An error from the inner model becomes this request's error response.

With the optional input DECOUPLED = [false] it calls plain ``exec()`` instead, which is the
mistake Triton answers with "... Please use 'decoupled=True' argument to the 'exec' or
'async_exec' calls for decoupled models."
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inner = pb_utils.InferenceRequest(
                model_name="square_int32",
                requested_output_names=["OUT"],
                inputs=[pb_utils.Tensor("IN", pb_utils.get_input_tensor_by_name(request, "IN").as_numpy())],
            )
            flag = pb_utils.get_input_tensor_by_name(request, "DECOUPLED")
            decoupled = True if flag is None else bool(flag.as_numpy().reshape(-1)[0])
            results = inner.exec(decoupled=True) if decoupled else [inner.exec()]
            total, count, error = 0, 0, None
            for result in results:
                if result.has_error():
                    error = result.error()
                    break
                out = pb_utils.get_output_tensor_by_name(result, "OUT")
                if out is None:  # the empty response that carries the final flag
                    continue
                total += int(out.as_numpy().reshape(-1)[0])
                count += 1
            if error is not None:
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
                        pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32)),
                    ]
                )
            )
        return responses
