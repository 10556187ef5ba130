/*
 * Test backend for iterative sequences (not decoupled, max_batch_size 0, one sequence at a time):
 * a START request (or any, when nothing is left) sets the count to IN (INT32 [1]); each run takes one off and, while some is
 * left, releases the request with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE and no response; the
 * last run answers RUNS (INT32 [1]), how many runs the request took.
 */
#include <string.h>

#include "triton/core/tritonbackend.h"

#define RETURN_IF_ERROR(X)                    \
  do {                                        \
    TRITONSERVER_Error* rie_err__ = (X);      \
    if (rie_err__ != NULL) return rie_err__;  \
  } while (0)

static int32_t left = 0, runs = 0;

static TRITONSERVER_Error* answer(TRITONBACKEND_Request* request)
{
  TRITONBACKEND_Response* response;
  TRITONBACKEND_Output* output;
  void* buffer;
  const int64_t shape[1] = {1};
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  RETURN_IF_ERROR(TRITONBACKEND_ResponseNew(&response, request));
  RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(response, &output, "RUNS", TRITONSERVER_TYPE_INT32, shape, 1));
  RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &buffer, sizeof(int32_t), &memory_type, &memory_type_id));
  memcpy(buffer, &runs, sizeof runs);
  return TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
}

static TRITONSERVER_Error* run(TRITONBACKEND_Request* request)
{
  uint32_t flags;
  RETURN_IF_ERROR(TRITONBACKEND_RequestFlags(request, &flags));
  if ((flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) || left <= 0) {
    TRITONBACKEND_Input* input;
    const void* data;
    uint64_t data_size;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    RETURN_IF_ERROR(TRITONBACKEND_RequestInput(request, "IN", &input));
    RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, 0, &data, &data_size, &memory_type, &memory_type_id));
    memcpy(&left, data, sizeof left);
    runs = 0;
  }
  left -= 1;
  runs += 1;
  if (left > 0) return TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
  RETURN_IF_ERROR(answer(request));
  return TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  (void)instance;
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONSERVER_Error* err = run(requests[r]);
    if (err != NULL) return err;
  }
  return NULL;
}
