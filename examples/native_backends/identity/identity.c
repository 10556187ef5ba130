/*
 * c_identity: a Triton backend in C whose outputs are copies of its inputs.
 *
 * Input "INPUT<k>" goes to output "OUTPUT<k>" with the same datatype and
 * shape (any datatype, BYTES included). Build (see README.md):
 *
 *   gcc -shared -fPIC -O2 -I"$(tritium-config --include)" identity.c -o libtriton_c_identity.so
 *
 * Uses only Triton's public backend API, so the same file compiles against
 * Triton's own headers (as C++: g++ -x c++ ...).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "triton/core/tritonbackend.h"

#define RETURN_IF_ERROR(X)                    \
  do {                                        \
    TRITONSERVER_Error* rie_err__ = (X);      \
    if (rie_err__ != NULL) return rie_err__;  \
  } while (0)

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend)
{
  const char* name;
  uint32_t major, minor;
  RETURN_IF_ERROR(TRITONBACKEND_BackendName(backend, &name));
  RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_UNSUPPORTED, "triton backend API version does not support this backend");
  }
  char msg[256];
  snprintf(msg, sizeof msg, "TRITONBACKEND_Initialize: %s (API %u.%u)", name, major, minor);
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, __FILE__, __LINE__, msg);
  if (err != NULL) TRITONSERVER_ErrorDelete(err);
  return NULL;
}

/* Fill one response: every requested OUTPUT<k> from INPUT<k>. */
static TRITONSERVER_Error* respond(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response)
{
  uint32_t input_count;
  RETURN_IF_ERROR(TRITONBACKEND_RequestInputCount(request, &input_count));
  for (uint32_t i = 0; i < input_count; ++i) {
    TRITONBACKEND_Input* input;
    const char* input_name;
    TRITONSERVER_DataType datatype;
    const int64_t* shape;
    uint32_t dims_count, buffer_count;
    uint64_t byte_size;
    RETURN_IF_ERROR(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    RETURN_IF_ERROR(TRITONBACKEND_InputProperties(
        input, &input_name, &datatype, &shape, &dims_count, &byte_size, &buffer_count));
    if (strncmp(input_name, "INPUT", 5) != 0) continue;
    char output_name[128];
    snprintf(output_name, sizeof output_name, "OUTPUT%s", input_name + 5);

    /* only the outputs the client asked for (all of them when it named none) */
    uint32_t requested_count;
    int requested = 0;
    RETURN_IF_ERROR(TRITONBACKEND_RequestOutputCount(request, &requested_count));
    for (uint32_t r = 0; r < requested_count; ++r) {
      const char* requested_name;
      RETURN_IF_ERROR(TRITONBACKEND_RequestOutputName(request, r, &requested_name));
      if (strcmp(requested_name, output_name) == 0) requested = 1;
    }
    if (!requested) continue;

    TRITONBACKEND_Output* output;
    void* out_buffer;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(response, &output, output_name, datatype, shape, dims_count));
    RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &out_buffer, byte_size, &memory_type, &memory_type_id));
    if (memory_type == TRITONSERVER_MEMORY_GPU) {
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "identity: GPU output buffers are not supported");
    }
    uint64_t copied = 0;
    for (uint32_t b = 0; b < buffer_count; ++b) {
      const void* in_buffer;
      uint64_t in_size;
      TRITONSERVER_MemoryType in_type = TRITONSERVER_MEMORY_CPU;
      int64_t in_type_id = 0;
      RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, b, &in_buffer, &in_size, &in_type, &in_type_id));
      if (copied + in_size > byte_size) {
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "identity: input buffers exceed the input size");
      }
      if (in_size) memcpy((char*)out_buffer + copied, in_buffer, in_size);
      copied += in_size;
    }
  }
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  uint64_t exec_start = now_ns();
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Request* request = requests[r];
    TRITONBACKEND_Response* response;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, request);
    if (err == NULL) {
      uint64_t compute_start = now_ns();
      TRITONSERVER_Error* failure = respond(request, response);
      uint64_t compute_end = now_ns();
      /* an error becomes the request's error response */
      err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
      TRITONSERVER_Error* stats = TRITONBACKEND_ModelInstanceReportStatistics(
          instance, request, failure == NULL, exec_start, compute_start, compute_end, now_ns());
      if (stats != NULL) TRITONSERVER_ErrorDelete(stats);
      if (failure != NULL) TRITONSERVER_ErrorDelete(failure);
    }
    if (err != NULL) {
      TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
    }
    err = TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
    if (err != NULL) TRITONSERVER_ErrorDelete(err);
  }
  uint64_t exec_end = now_ns();
  return TRITONBACKEND_ModelInstanceReportBatchStatistics(
      instance, request_count, exec_start, exec_start, exec_end, exec_end);
}
