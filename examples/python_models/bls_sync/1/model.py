"""bls_sync: Business Logic Scripting with the blocking ``InferenceRequest.exec()``.

Runs the model named by MODEL_NAME (meant for ``add_sub``) on INPUT0 and INPUT1 and returns
its OUTPUT0 and OUTPUT1. When the inner call fails (for example MODEL_NAME names a model that
does not exist) the error it returned is sent back as this request's error response.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy().reshape(-1)[0]
            if isinstance(name, bytes):
                name = name.decode("utf-8")
            inner = pb_utils.InferenceRequest(
                model_name=name,
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[
                    pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                    pb_utils.get_input_tensor_by_name(request, "INPUT1"),
                ],
            )
            result = inner.exec()
            if result.has_error():
                responses.append(pb_utils.InferenceResponse(error=result.error()))
                continue
            outputs = [
                pb_utils.Tensor(n, pb_utils.get_output_tensor_by_name(result, n).as_numpy())
                for n in ("OUTPUT0", "OUTPUT1")
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
