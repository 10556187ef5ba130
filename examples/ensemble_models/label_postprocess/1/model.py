"""Top-1 of EfficientNet-Lite0's logits: the class name and index.

LOGITS: FP32 [B, 1000]. LABEL: BYTES [B, 1] (UTF-8 class name). CLASS_ID: INT32 [B, 1].
The names come from ``labels.txt`` next to config.pbtxt (line i = class i).
"""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        path = os.path.join(args["model_repository"], "labels.txt")
        with open(path, encoding="utf-8") as f:
            self.labels = [line.rstrip("\n") for line in f]

    def execute(self, requests):
        responses = []
        for request in requests:
            logits = pb_utils.get_input_tensor_by_name(request, "LOGITS").as_numpy()
            top = logits.argmax(axis=1).astype(np.int32)
            labels = np.array([[self.labels[i].encode("utf-8")] for i in top], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("LABEL", labels), pb_utils.Tensor("CLASS_ID", top.reshape(-1, 1))]
                )
            )
        return responses
