"""square_int32 (decoupled): IN = [n] gives n responses, each with OUT = [n], then a final flag.

IN = [0] gives no response at all, only the final flag. The responses are sent from a thread,
so ``execute`` returns at once.
"""

import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                "model '{}' needs the decoupled transaction policy".format(args["model_name"])
            )
        self.out_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUT")["data_type"])
        self.lock = threading.Lock()
        self.in_flight = 0
        self.idle = threading.Condition(self.lock)

    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)[0])
            sender = request.get_response_sender()
            with self.lock:
                self.in_flight += 1
            threading.Thread(target=self._stream, args=(sender, count), daemon=True).start()
        # decoupled: the responses go through the senders, execute itself returns None
        return None

    def _stream(self, sender, count):
        try:
            for _ in range(count):
                out = pb_utils.Tensor("OUT", np.array([count], dtype=self.out_dtype))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.idle.notify_all()

    def finalize(self):
        with self.lock:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout=30)
