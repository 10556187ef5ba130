"""The data of an inference: requests, responses, tensors and their datatypes (Triton's and KServe's).

:mod:`.request` and :mod:`.response` (the in-process request and response), :mod:`.tensor`
(the BYTES codec and tensor helpers), :mod:`.types` (datatypes and their numpy forms),
:mod:`.tensor_metadata` (the inputs and outputs model metadata lists). Plain data: no I/O, no
event loop; worker processes import them too.
"""
