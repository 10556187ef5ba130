"""repeat_int32 (decoupled): stream the elements of IN back, one response each.

For a request with IN = [v0, v1, ...], DELAY = [d0, d1, ...] (milliseconds) and WAIT = [w]:
wait d_i ms, send a response with OUT = [v_i] and IDX = [i]; after the last one wait w ms
and close the stream with a final flag that carries no response. An IN and a DELAY of
different shapes get one error response (with the final flag). Responses are sent from a
thread per request, so ``execute`` returns at once and requests overlap.
"""

import json
import threading
import time

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
        self.idx_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "IDX")["data_type"])
        self.lock = threading.Lock()
        self.in_flight = 0
        self.idle = threading.Condition(self.lock)

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()
            sender = request.get_response_sender()
            if values.shape != delays.shape:
                error = pb_utils.TritonError(
                    f"IN and DELAY must have the same shape, got {list(values.shape)} and {list(delays.shape)}"
                )
                sender.send(
                    pb_utils.InferenceResponse(error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            with self.lock:
                self.in_flight += 1
            worker = threading.Thread(
                target=self._stream,
                args=(sender, values.copy(), delays.copy(), int(wait.reshape(-1)[0])),
                daemon=True,
            )
            worker.start()
        # decoupled: the responses go through the senders, execute itself returns None
        return None

    def _stream(self, sender, values, delays, wait_ms):
        try:
            for i, (value, delay_ms) in enumerate(zip(values, delays)):
                time.sleep(int(delay_ms) / 1000.0)
                out = pb_utils.Tensor("OUT", np.array([value], dtype=self.out_dtype))
                idx = pb_utils.Tensor("IDX", np.array([i], dtype=self.idx_dtype))
                sender.send(pb_utils.InferenceResponse(output_tensors=[out, idx]))
            time.sleep(wait_ms / 1000.0)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.idle.notify_all()

    def finalize(self):
        # Let the streams that are still running finish before the model goes away.
        with self.lock:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout=30)
