/*
 * Test backend for request cancellation (not decoupled, max_batch_size 0): for each request, TAG
 * (STRING [1]) names its report. It writes <out_dir>/<TAG>.started, then polls
 * TRITONBACKEND_RequestIsCancelled every 10 ms for up to 60 s; once it answers true it asks the
 * request's response factory too (TRITONBACKEND_ResponseFactoryIsCancelled) and writes
 * <out_dir>/<TAG> as {"request": true|false, "factory": true|false}; then it answers OUT
 * (INT32 [1]): 1 when cancelled. out_dir is the model config parameter "out_dir".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "triton/core/tritonbackend.h"

#define RETURN_IF_ERROR(X)                    \
  do {                                        \
    TRITONSERVER_Error* rie_err__ = (X);      \
    if (rie_err__ != NULL) return rie_err__;  \
  } while (0)

typedef struct {
  char out_dir[1024];
} ModelState;

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  TRITONSERVER_Message* config;
  const char* json;
  size_t size;
  RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &config));
  RETURN_IF_ERROR(TRITONSERVER_MessageSerializeToJson(config, &json, &size));
  ModelState* state = (ModelState*)calloc(1, sizeof(ModelState));
  const char* key = strstr(json, "\"out_dir\"");
  const char* value = key ? strstr(key, "\"string_value\"") : NULL;
  const char* start = value ? strchr(value + strlen("\"string_value\""), '"') : NULL;
  const char* end = start ? strchr(start + 1, '"') : NULL;
  if (end != NULL && (size_t)(end - start - 1) < sizeof state->out_dir)
    memcpy(state->out_dir, start + 1, (size_t)(end - start - 1));
  TRITONSERVER_MessageDelete(config);
  if (state->out_dir[0] == '\0') {
    free(state);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "parameter out_dir is missing");
  }
  return TRITONBACKEND_ModelSetState(model, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  free(state);
  return NULL;
}

static void note(const ModelState* state, const char* tag, const char* suffix, const char* text)
{
  char path[2048], tmp[2100];
  snprintf(path, sizeof path, "%s/%s%s", state->out_dir, tag, suffix);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) return;
  fputs(text, f);
  fclose(f);
  rename(tmp, path);
}

static TRITONSERVER_Error* run(const ModelState* state, TRITONBACKEND_Request* request)
{
  TRITONBACKEND_Input* input;
  const void* data;
  uint64_t data_size;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  RETURN_IF_ERROR(TRITONBACKEND_RequestInput(request, "TAG", &input));
  RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, 0, &data, &data_size, &memory_type, &memory_type_id));
  char tag[256] = {0};
  uint32_t length = 0;
  if (data_size >= 4) memcpy(&length, data, 4);
  if (length >= sizeof tag || 4 + (uint64_t)length > data_size)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "bad TAG");
  memcpy(tag, (const char*)data + 4, length);

  note(state, tag, ".started", "true");
  bool cancelled = false, factory_cancelled = false;
  const struct timespec pause = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 6000 && !cancelled; ++i) {
    RETURN_IF_ERROR(TRITONBACKEND_RequestIsCancelled(request, &cancelled));
    if (!cancelled) nanosleep(&pause, NULL);
  }
  TRITONBACKEND_ResponseFactory* factory;
  RETURN_IF_ERROR(TRITONBACKEND_ResponseFactoryNew(&factory, request));
  RETURN_IF_ERROR(TRITONBACKEND_ResponseFactoryIsCancelled(factory, &factory_cancelled));
  RETURN_IF_ERROR(TRITONBACKEND_ResponseFactoryDelete(factory));
  char report[128];
  snprintf(report, sizeof report, "{\"request\": %s, \"factory\": %s}", cancelled ? "true" : "false",
           factory_cancelled ? "true" : "false");
  note(state, tag, "", report);

  TRITONBACKEND_Response* response;
  TRITONBACKEND_Output* output;
  void* buffer;
  const int64_t shape[1] = {1};
  int32_t value = cancelled ? 1 : 0;
  RETURN_IF_ERROR(TRITONBACKEND_ResponseNew(&response, request));
  RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(response, &output, "OUT", TRITONSERVER_TYPE_INT32, shape, 1));
  RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(output, &buffer, sizeof value, &memory_type, &memory_type_id));
  memcpy(buffer, &value, sizeof value);
  RETURN_IF_ERROR(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL));
  return TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  TRITONBACKEND_Model* model;
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONSERVER_Error* err = run((const ModelState*)state, requests[r]);
    if (err != NULL) return err;
  }
  return NULL;
}
