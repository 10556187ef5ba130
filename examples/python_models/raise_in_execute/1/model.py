"""raise_in_execute: ``execute`` raises ValueError when INPUT0 is [1]; otherwise identity.

Shows how an exception escaping ``execute`` reaches the client (Triton reports it for every
request of the batch, with the Python traceback) and that the model keeps serving afterwards.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if int(value.reshape(-1)[0]) == 1:
                raise ValueError("INPUT0 was 1")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", value)]))
        return responses
