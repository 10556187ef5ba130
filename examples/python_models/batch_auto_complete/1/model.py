"""batch_auto_complete: add/sub with batching, configured by ``auto_complete_config``.

config.pbtxt names only the backend; ``auto_complete_config`` declares INPUT0/INPUT1 and
OUTPUT0/OUTPUT1 (FP32 [4], so [-1, 4] with the batch dimension), max_batch_size 4 and the
dynamic batcher. Entries already in the configuration are kept rather than added twice.
"""

import json

import triton_python_backend_utils as pb_utils

MAX_BATCH_SIZE = 4
INPUTS = [
    {"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
    {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]},
]
OUTPUTS = [
    {"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
    {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]},
]


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config.as_dict()
        have_inputs = {i["name"] for i in config.get("input", [])}
        have_outputs = {o["name"] for o in config.get("output", [])}
        for spec in INPUTS:
            if spec["name"] not in have_inputs:
                auto_complete_model_config.add_input(spec)
        for spec in OUTPUTS:
            if spec["name"] not in have_outputs:
                auto_complete_model_config.add_output(spec)
        auto_complete_model_config.set_max_batch_size(MAX_BATCH_SIZE)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.out0_dtype = pb_utils.triton_string_to_numpy(
            pb_utils.get_output_config_by_name(config, "OUTPUT0")["data_type"]
        )
        self.out1_dtype = pb_utils.triton_string_to_numpy(
            pb_utils.get_output_config_by_name(config, "OUTPUT1")["data_type"]
        )

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", (a + b).astype(self.out0_dtype)),
                        pb_utils.Tensor("OUTPUT1", (a - b).astype(self.out1_dtype)),
                    ]
                )
            )
        return responses
