"""Decode an image and lay it out as EfficientNet-Lite0's input (as examples/image_client.py does).

IMAGE: BYTES [B, 1], each element an encoded image (JPEG, PNG, ...).
PIXELS: FP32 [B, 3, 224, 224]: RGB, bilinear resize to 224x224, scaled to [-1, 1] (x / 127.5 - 1).
An element that is not an image fails its request with the decoder's message.
"""

import io

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image, UnidentifiedImageError

SIZE = 224


def preprocess(encoded: bytes) -> np.ndarray:
    """One encoded image -> FP32 [3, 224, 224]."""
    img = Image.open(io.BytesIO(encoded))
    img.load()
    resized = np.array(img.convert("RGB").resize((SIZE, SIZE), Image.BILINEAR)).astype(np.float32)
    return np.ascontiguousarray(np.transpose(resized / 127.5 - 1, (2, 0, 1)), dtype=np.float32)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
            try:
                pixels = np.stack([preprocess(bytes(element)) for element in images.reshape(-1)])
            except UnidentifiedImageError:
                error = pb_utils.TritonError("cannot decode IMAGE: not an image file Pillow can read")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            except (OSError, ValueError) as exc:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"cannot decode IMAGE: {exc}")))
                continue
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PIXELS", pixels)]))
        return responses
