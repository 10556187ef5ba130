/*
 * c_accumulate: a stateful Triton backend in C.
 *
 * Each model instance keeps a running total (instance state, allocated in
 * TRITONBACKEND_ModelInstanceInitialize and freed in ...Finalize). A request
 * adds the elements of INPUT (INT64, any shape) to the total and gets back
 * TOTAL (INT64, [1]) and the response parameter "requests" (how many
 * requests this instance served). A request with the sequence-start flag
 * resets the total first. The model counts its instances (model state).
 * Build:
 *
 *   gcc -shared -fPIC -O2 -I"$(tritium-config --include)" accumulate.c -o libtriton_c_accumulate.so
 */
#include <stdlib.h>
#include <string.h>

#include "triton/core/tritonbackend.h"

#define RETURN_IF_ERROR(X)                    \
  do {                                        \
    TRITONSERVER_Error* rie_err__ = (X);      \
    if (rie_err__ != NULL) return rie_err__;  \
  } while (0)

typedef struct {
  uint32_t instances;
} ModelState;

typedef struct {
  int64_t total;
  int64_t requests;
} InstanceState;

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  ModelState* state = (ModelState*)calloc(1, sizeof(ModelState));
  if (state == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return TRITONBACKEND_ModelSetState(model, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  free(state);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance)
{
  TRITONBACKEND_Model* model;
  void* model_state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &model_state));
  ((ModelState*)model_state)->instances += 1;
  InstanceState* state = (InstanceState*)calloc(1, sizeof(InstanceState));
  if (state == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return TRITONBACKEND_ModelInstanceSetState(instance, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance)
{
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  free(state);
  return NULL;
}

static TRITONSERVER_Error* add(TRITONBACKEND_Request* request, InstanceState* state, TRITONBACKEND_Response* response)
{
  uint32_t flags;
  TRITONBACKEND_Input* input;
  TRITONSERVER_DataType datatype;
  uint64_t byte_size;
  const void* data;
  uint64_t data_size;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  RETURN_IF_ERROR(TRITONBACKEND_RequestFlags(request, &flags));
  RETURN_IF_ERROR(TRITONBACKEND_RequestInput(request, "INPUT", &input));
  RETURN_IF_ERROR(TRITONBACKEND_InputProperties(input, NULL, &datatype, NULL, NULL, &byte_size, NULL));
  if (datatype != TRITONSERVER_TYPE_INT64) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "accumulate: INPUT must be INT64");
  }
  RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, 0, &data, &data_size, &memory_type, &memory_type_id));
  if (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) state->total = 0;
  for (uint64_t i = 0; i < data_size / sizeof(int64_t); ++i) {
    int64_t value;
    memcpy(&value, (const char*)data + i * sizeof value, sizeof value);
    state->total += value;
  }
  state->requests += 1;

  TRITONBACKEND_Output* output;
  void* buffer;
  const int64_t shape[1] = {1};
  RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(response, &output, "TOTAL", TRITONSERVER_TYPE_INT64, shape, 1));
  RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &buffer, sizeof(int64_t), &memory_type, &memory_type_id));
  memcpy(buffer, &state->total, sizeof(int64_t));
  return TRITONBACKEND_ResponseSetIntParameter(response, "requests", state->requests);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Response* response;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, requests[r]);
    if (err == NULL) {
      TRITONSERVER_Error* failure = add(requests[r], (InstanceState*)state, response);
      err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
      if (failure != NULL) TRITONSERVER_ErrorDelete(failure);
    }
    if (err != NULL) TRITONSERVER_ErrorDelete(err);
    err = TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL);
    if (err != NULL) TRITONSERVER_ErrorDelete(err);
  }
  return NULL;
}
