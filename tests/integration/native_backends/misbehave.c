/*
 * Test backend: INPUT0 (INT32, [1]) picks what execute does.
 *   0: OUTPUT0 = INPUT0        1: segfault          2: abort()
 *   3: loop forever            4: execute returns INVALID_ARG "native says no"
 *   5: an UNSUPPORTED error response for the request
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "triton/core/tritonbackend.h"

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  (void)instance;
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Input* input;
    const void* data;
    uint64_t size;
    int32_t value = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    TRITONSERVER_Error* err = TRITONBACKEND_RequestInput(requests[r], "INPUT0", &input);
    if (err == NULL) err = TRITONBACKEND_InputBuffer(input, 0, &data, &size, &memory_type, &memory_type_id);
    if (err != NULL) return err;
    memcpy(&value, data, sizeof value);
    if (value == 1) *(volatile int*)0 = 1;
    if (value == 2) abort();
    if (value == 3) for (;;) {}
    if (value == 4) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "native says no");
  }
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Input* input;
    TRITONBACKEND_Response* response;
    TRITONBACKEND_Output* output;
    const void* data;
    void* buffer;
    uint64_t size;
    int32_t value;
    const int64_t shape[1] = {1};
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    TRITONBACKEND_RequestInput(requests[r], "INPUT0", &input);
    TRITONBACKEND_InputBuffer(input, 0, &data, &size, &memory_type, &memory_type_id);
    memcpy(&value, data, sizeof value);
    TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (value == 5) {
      TRITONSERVER_Error* failure = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "not this one");
      TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
      TRITONSERVER_ErrorDelete(failure);
    } else {
      TRITONBACKEND_ResponseOutput(response, &output, "OUTPUT0", TRITONSERVER_TYPE_INT32, shape, 1);
      TRITONBACKEND_OutputBuffer(output, &buffer, sizeof value, &memory_type, &memory_type_id);
      memcpy(buffer, &value, sizeof value);
      TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
    }
    TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  return NULL;
}
