"""args_params: returns what the python backend handed to the model, as JSON.

ARGS is the JSON of the ``args`` dict ``initialize`` received, with ``model_config`` parsed
into an object and ``model_repository`` (an absolute path) cut to its last component, so the
answer does not depend on where the repository lives. PARAMETERS is ``request.parameters()``
as received (a JSON string).
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        stable = {}
        for key, value in args.items():
            if key == "model_config":
                value = json.loads(value)
            elif key == "model_repository":
                value = os.path.basename(os.path.normpath(value))
            stable[key] = value
        self.args_json = json.dumps(stable, sort_keys=True)

    def execute(self, requests):
        responses = []
        for request in requests:
            params = request.parameters()
            args_out = pb_utils.Tensor("ARGS", np.array([self.args_json.encode()], dtype=np.object_))
            params_out = pb_utils.Tensor("PARAMETERS", np.array([params.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[args_out, params_out]))
        return responses
