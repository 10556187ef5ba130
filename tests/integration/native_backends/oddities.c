/*
 * Test backend for the host's edge cases, chosen by the request id:
 *   "bytes"     BYTES output OUT = ["ab", ""] (serialized by the backend)
 *   "size"      OutputBuffer with the wrong size; that error becomes the response
 *   "nobuffer"  an output without a buffer
 *   "twice"     two final responses: execute returns the second send's error
 *   "release2"  the request released twice: execute returns the second release's error
 *   "delete"    a response created, deleted, then another one sent
 *   "bf16"      BF16 output OUT = INPUT (2-byte elements)
 *   "addr"      INT64 output OUT = {address of INPUT's buffer, address of OUT's buffer}
 */
#include <string.h>

#include "triton/core/tritonbackend.h"

static TRITONSERVER_Error* one(TRITONBACKEND_Request* request)
{
  const char* id;
  TRITONBACKEND_Response* response;
  TRITONBACKEND_Output* output;
  void* buffer;
  TRITONSERVER_Error* err;
  const int64_t two[1] = {2};
  TRITONBACKEND_RequestId(request, &id);
  if (strcmp(id, "delete") == 0) {
    TRITONBACKEND_ResponseNew(&response, request);
    TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_INT32, two, 1);
    TRITONBACKEND_OutputBuffer(output, &buffer, 8, NULL, NULL); /* given back by the delete */
    TRITONBACKEND_ResponseSetIntParameter(response, "dropped", 1);
    TRITONBACKEND_ResponseDelete(response);
  }
  err = TRITONBACKEND_ResponseNew(&response, request);
  if (err) return err;
  if (strcmp(id, "bytes") == 0) {
    const char data[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};
    TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_BYTES, two, 1);
    TRITONBACKEND_OutputBuffer(output, &buffer, sizeof data, NULL, NULL);
    memcpy(buffer, data, sizeof data);
    return TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
  }
  if (strcmp(id, "bf16") == 0) {
    TRITONBACKEND_Input* input;
    const void* in;
    uint64_t size;
    const int64_t* shape;
    uint32_t dims;
    TRITONBACKEND_RequestInput(request, "INPUT", &input);
    TRITONBACKEND_InputProperties(input, NULL, NULL, &shape, &dims, NULL, NULL);
    TRITONBACKEND_InputBuffer(input, 0, &in, &size, NULL, NULL);
    TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_BF16, shape, dims);
    TRITONBACKEND_OutputBuffer(output, &buffer, size, NULL, NULL);
    memcpy(buffer, in, size);
    return TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
  }
  if (strcmp(id, "addr") == 0) {
    TRITONBACKEND_Input* input;
    const void* in;
    uint64_t size;
    int64_t addresses[2];
    TRITONBACKEND_RequestInput(request, "INPUT", &input);
    TRITONBACKEND_InputBuffer(input, 0, &in, &size, NULL, NULL);
    TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_INT64, two, 1);
    TRITONBACKEND_OutputBuffer(output, &buffer, sizeof addresses, NULL, NULL);
    addresses[0] = (int64_t)(intptr_t)in;
    addresses[1] = (int64_t)(intptr_t)buffer;
    memcpy(buffer, addresses, sizeof addresses);
    return TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
  }
  TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_INT32, two, 1);
  if (strcmp(id, "size") == 0) {
    TRITONSERVER_Error* failure = TRITONBACKEND_OutputBuffer(output, &buffer, 4, NULL, NULL);
    err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
    TRITONSERVER_ErrorDelete(failure);
    return err;
  }
  if (strcmp(id, "nobuffer") == 0) return TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
  TRITONBACKEND_OutputBuffer(output, &buffer, 8, NULL, NULL);
  memset(buffer, 0, 8);
  err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
  if (err) return err;
  if (strcmp(id, "twice") == 0) {
    err = TRITONBACKEND_ResponseNew(&response, request);
    if (err) return err;
    return TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL);
  }
  if (strcmp(id, "release2") == 0) {
    TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
    return TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  (void)instance;
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONSERVER_Error* err = one(requests[r]);
    if (err) return err;
  }
  return NULL;
}
