"""bls_async: Business Logic Scripting with ``async def execute`` and ``async_exec()``.

Runs the model named by MODEL_NAME (meant for ``add_sub``) twice at once with
``asyncio.gather``: on (INPUT0, INPUT1) and on (INPUT1, INPUT0). Returns the first call's
OUTPUT0 (sum) and OUTPUT1 (INPUT0 - INPUT1) and, as OUTPUT2, the second call's OUTPUT1
(INPUT1 - INPUT0). When an inner call fails, ``execute`` raises TritonModelException with
its message, so the whole batch fails with that message.
"""

import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy().reshape(-1)[0]
            if isinstance(name, bytes):
                name = name.decode("utf-8")
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            calls = [
                pb_utils.InferenceRequest(
                    model_name=name,
                    requested_output_names=["OUTPUT0", "OUTPUT1"],
                    inputs=[pb_utils.Tensor("INPUT0", x), pb_utils.Tensor("INPUT1", y)],
                ).async_exec()
                for x, y in ((a, b), (b, a))
            ]
            forward, backward = await asyncio.gather(*calls)
            for result in (forward, backward):
                if result.has_error():
                    raise pb_utils.TritonModelException(result.error().message())
            out0 = pb_utils.get_output_tensor_by_name(forward, "OUTPUT0").as_numpy()
            out1 = pb_utils.get_output_tensor_by_name(forward, "OUTPUT1").as_numpy()
            out2 = pb_utils.get_output_tensor_by_name(backward, "OUTPUT1").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", out0),
                        pb_utils.Tensor("OUTPUT1", out1),
                        pb_utils.Tensor("OUTPUT2", out2),
                    ]
                )
            )
        return responses
