/*
 * c_repeat: a decoupled Triton backend in C.
 *
 * For a request with input IN (INT32, shape [n]) it sends n responses, the
 * i-th with OUT = [IN[i]] (INT32, [1]) and IDX = [i] (UINT32, [1]), from a
 * thread of its own through a response factory, then a final flags-only
 * response. The request is released as soon as its input is copied, before
 * the responses go out. The model config must say
 * model_transaction_policy { decoupled: true }. Build:
 *
 *   gcc -shared -fPIC -O2 -pthread -I"$(tritium-config --include)" repeat.c -o libtriton_c_repeat.so
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "triton/core/tritonbackend.h"

#define RETURN_IF_ERROR(X)                    \
  do {                                        \
    TRITONSERVER_Error* rie_err__ = (X);      \
    if (rie_err__ != NULL) return rie_err__;  \
  } while (0)

typedef struct {
  TRITONBACKEND_ResponseFactory* factory;
  int32_t* values;
  uint32_t count;
} Job;

static void log_and_delete(TRITONSERVER_Error* err)
{
  if (err == NULL) return;
  TRITONSERVER_Error* e = TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, TRITONSERVER_ErrorMessage(err));
  if (e != NULL) TRITONSERVER_ErrorDelete(e);
  TRITONSERVER_ErrorDelete(err);
}

static TRITONSERVER_Error* send_one(TRITONBACKEND_ResponseFactory* factory, int32_t value, uint32_t index)
{
  TRITONBACKEND_Response* response;
  TRITONBACKEND_Output* output;
  void* buffer;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  const int64_t shape[1] = {1};
  RETURN_IF_ERROR(TRITONBACKEND_ResponseNewFromFactory(&response, factory));
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_INT32, shape, 1);
  if (err == NULL) err = TRITONBACKEND_OutputBuffer(output, &buffer, sizeof value, &memory_type, &memory_type_id);
  if (err == NULL) {
    memcpy(buffer, &value, sizeof value);
    err = TRITONBACKEND_ResponseOutput(response, &output, "IDX", TRITONSERVER_TYPE_UINT32, shape, 1);
  }
  if (err == NULL) err = TRITONBACKEND_OutputBuffer(output, &buffer, sizeof index, &memory_type, &memory_type_id);
  if (err != NULL) {
    TRITONBACKEND_ResponseDelete(response);
    return err;
  }
  memcpy(buffer, &index, sizeof index);
  return TRITONBACKEND_ResponseSend(response, 0, NULL);
}

static void* run(void* arg)
{
  Job* job = (Job*)arg;
  for (uint32_t i = 0; i < job->count; ++i) log_and_delete(send_one(job->factory, job->values[i], i));
  log_and_delete(TRITONBACKEND_ResponseFactorySendFlags(job->factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL));
  log_and_delete(TRITONBACKEND_ResponseFactoryDelete(job->factory));
  free(job->values);
  free(job);
  return NULL;
}

/* Copy the input and start the thread that answers this request. */
static TRITONSERVER_Error* start(TRITONBACKEND_Request* request)
{
  TRITONBACKEND_Input* input;
  TRITONSERVER_DataType datatype;
  const int64_t* shape;
  uint32_t dims_count, buffer_count;
  uint64_t byte_size;
  const void* data;
  uint64_t data_size;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  RETURN_IF_ERROR(TRITONBACKEND_RequestInput(request, "IN", &input));
  RETURN_IF_ERROR(TRITONBACKEND_InputProperties(input, NULL, &datatype, &shape, &dims_count, &byte_size, &buffer_count));
  if (datatype != TRITONSERVER_TYPE_INT32 || buffer_count != 1) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "repeat: IN must be an INT32 tensor");
  }
  RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, 0, &data, &data_size, &memory_type, &memory_type_id));
  Job* job = (Job*)calloc(1, sizeof(Job));
  if (job == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "repeat: out of memory");
  job->count = (uint32_t)(data_size / sizeof(int32_t));
  job->values = (int32_t*)malloc(data_size ? data_size : 1);
  if (job->values == NULL) {
    free(job);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "repeat: out of memory");
  }
  if (data_size) memcpy(job->values, data, data_size);
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseFactoryNew(&job->factory, request);
  pthread_t thread;
  if (err == NULL && pthread_create(&thread, NULL, run, job) != 0) {
    TRITONBACKEND_ResponseFactoryDelete(job->factory);
    err = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "repeat: cannot start a thread");
  }
  if (err != NULL) {
    free(job->values);
    free(job);
    return err;
  }
  pthread_detach(thread);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  (void)instance;
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONSERVER_Error* err = start(requests[r]);
    if (err != NULL) { /* answer this request with the error */
      TRITONBACKEND_ResponseFactory* factory;
      TRITONBACKEND_Response* response;
      if (TRITONBACKEND_ResponseFactoryNew(&factory, requests[r]) == NULL) {
        if (TRITONBACKEND_ResponseNewFromFactory(&response, factory) == NULL) {
          log_and_delete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
        }
        TRITONBACKEND_ResponseFactoryDelete(factory);
      }
      TRITONSERVER_ErrorDelete(err);
    }
    log_and_delete(TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
  }
  return NULL;
}
