/*
 * Test backend for one process hosting many models of one library, and
 * several instances of a model, each executing on its own thread
 * (tests/unit/core/backend/test_native_host.py).
 *
 * Model state: the model's name, its config parameter "offset"
 * (string_value, an integer) and how many instances it initialized.
 * Instance state: the instance's name and how many requests it served.
 *
 * A request's input IN (INT64, INT32, UINT16, or BF16 taken as its raw
 * 16 bits; any shape) gives the first output the request asks for: INT64,
 * one element per input element, each input element plus the offset. The
 * response carries the parameters "model", "instance", "datatype" (IN's),
 * "served" (by this instance, this request included) and "instances" (of
 * this model).
 *
 * The request id steers timing across threads:
 *   "meet<n>"  wait in execute until n executes (of any models and
 *              instances of this library) have arrived, then answer;
 *   "hold"     after the output buffer is handed out, wait until some model
 *              of this library is finalized, then fill it and answer.
 * Both give up after 10 s with an UNAVAILABLE error.
 *
 * ModelInitialize with auto-complete on and a config without "output" adds
 * the output "OUT_<model name>" (TRITONBACKEND_ModelSetConfig).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "triton/core/tritonbackend.h"

#define CHECK(X)                   \
  do {                             \
    TRITONSERVER_Error* e__ = (X); \
    if (e__ != NULL) return e__;   \
  } while (0)

#define WAIT_SECONDS 10

typedef struct {
  char name[128];
  int64_t offset;
  int64_t instances;
} ModelState;

typedef struct {
  char name[128];
  int64_t served;
  ModelState* model;
} InstanceState;

/* library-wide: shared by every model and instance in the process */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static unsigned arrived = 0;  /* executes waiting at the current meeting */
static unsigned meetings = 0; /* meetings completed */
static unsigned finalized = 0; /* models finalized */

static TRITONSERVER_Error* unavailable(const char* message)
{
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, message);
}

static struct timespec deadline(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += WAIT_SECONDS;
  return ts;
}

/* wait (holding `lock`) until *counter differs from seen; 0 on timeout */
static int wait_for_change(const unsigned* counter, unsigned seen)
{
  struct timespec until = deadline();
  int rc = 0;
  while (*counter == seen && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&changed, &lock, &until);
  return *counter != seen;
}

static TRITONSERVER_Error* meet(unsigned count)
{
  pthread_mutex_lock(&lock);
  unsigned mine = meetings;
  if (++arrived >= count) {
    arrived = 0;
    meetings += 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  int met = wait_for_change(&meetings, mine);
  if (!met) arrived -= 1;
  pthread_mutex_unlock(&lock);
  return met ? NULL : unavailable("meet: the other executes did not arrive within 10 s");
}

static unsigned finalized_now(void)
{
  pthread_mutex_lock(&lock);
  unsigned seen = finalized;
  pthread_mutex_unlock(&lock);
  return seen;
}

static TRITONSERVER_Error* hold(unsigned seen)
{
  pthread_mutex_lock(&lock);
  int done = wait_for_change(&finalized, seen);
  pthread_mutex_unlock(&lock);
  return done ? NULL : unavailable("hold: no model was finalized within 10 s");
}

/* the integer in "offset": {"string_value": "<n>"} of the config's parameters; 0 when absent */
static int64_t offset_of(const char* json)
{
  const char* key = strstr(json, "\"offset\"");
  const char* value = key ? strstr(key, "\"string_value\"") : NULL;
  const char* colon = value ? strchr(value + strlen("\"string_value\""), '"') : NULL;
  return colon ? strtoll(colon + 1, NULL, 10) : 0;
}

static TRITONSERVER_Error* auto_complete(TRITONBACKEND_Model* model, const char* name, const char* json, size_t size)
{
  char extra[256];
  snprintf(extra, sizeof extra, ", \"output\": [{\"name\": \"OUT_%s\", \"data_type\": \"TYPE_INT64\", \"dims\": [-1]}]}",
           name);
  size_t end = size;
  while (end > 0 && json[end - 1] != '}') --end;
  if (end == 0) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "config is not a JSON object");
  char* text = (char*)malloc(end + strlen(extra));
  memcpy(text, json, end - 1);
  strcpy(text + end - 1, extra);
  TRITONSERVER_Message* completed;
  TRITONSERVER_Error* err = TRITONSERVER_MessageNewFromSerializedJson(&completed, text, strlen(text));
  free(text);
  if (err) return err;
  err = TRITONBACKEND_ModelSetConfig(model, 1, completed);
  TRITONSERVER_MessageDelete(completed);
  return err;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  const char* name;
  bool complete;
  TRITONSERVER_Message* config;
  const char* json;
  size_t size;
  CHECK(TRITONBACKEND_ModelName(model, &name));
  CHECK(TRITONBACKEND_ModelAutoCompleteConfig(model, &complete));
  CHECK(TRITONBACKEND_ModelConfig(model, 1, &config));
  CHECK(TRITONSERVER_MessageSerializeToJson(config, &json, &size));
  ModelState* state = (ModelState*)calloc(1, sizeof(ModelState));
  snprintf(state->name, sizeof state->name, "%s", name);
  state->offset = offset_of(json);
  TRITONSERVER_Error* err = NULL;
  if (complete && strstr(json, "\"output\"") == NULL) err = auto_complete(model, name, json, size);
  TRITONSERVER_MessageDelete(config);
  if (err) {
    free(state);
    return err;
  }
  return TRITONBACKEND_ModelSetState(model, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* state;
  CHECK(TRITONBACKEND_ModelState(model, &state));
  free(state);
  pthread_mutex_lock(&lock);
  finalized += 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance)
{
  TRITONBACKEND_Model* model;
  void* model_state;
  const char* name;
  CHECK(TRITONBACKEND_ModelInstanceModel(instance, &model));
  CHECK(TRITONBACKEND_ModelState(model, &model_state));
  CHECK(TRITONBACKEND_ModelInstanceName(instance, &name));
  InstanceState* state = (InstanceState*)calloc(1, sizeof(InstanceState));
  snprintf(state->name, sizeof state->name, "%s", name);
  state->model = (ModelState*)model_state;
  pthread_mutex_lock(&lock);
  state->model->instances += 1;
  pthread_mutex_unlock(&lock);
  return TRITONBACKEND_ModelInstanceSetState(instance, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance)
{
  void* state;
  CHECK(TRITONBACKEND_ModelInstanceState(instance, &state));
  free(state);
  return NULL;
}

static TRITONSERVER_Error* read_input(
    TRITONBACKEND_Request* request, TRITONSERVER_DataType* datatype, const void** data, uint64_t* count)
{
  TRITONBACKEND_Input* input;
  uint64_t byte_size;
  CHECK(TRITONBACKEND_RequestInput(request, "IN", &input));
  CHECK(TRITONBACKEND_InputProperties(input, NULL, datatype, NULL, NULL, &byte_size, NULL));
  uint32_t width = TRITONSERVER_DataTypeByteSize(*datatype);
  if (*datatype != TRITONSERVER_TYPE_INT64 && *datatype != TRITONSERVER_TYPE_INT32 &&
      *datatype != TRITONSERVER_TYPE_UINT16 && *datatype != TRITONSERVER_TYPE_BF16)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "multi: IN must be INT64, INT32, UINT16 or BF16");
  uint64_t size;
  CHECK(TRITONBACKEND_InputBuffer(input, 0, data, &size, NULL, NULL));
  *count = size / width;
  return NULL;
}

static int64_t element(TRITONSERVER_DataType datatype, const void* data, uint64_t i)
{
  switch (datatype) {
    case TRITONSERVER_TYPE_INT64: { int64_t v; memcpy(&v, (const char*)data + 8 * i, 8); return v; }
    case TRITONSERVER_TYPE_INT32: { int32_t v; memcpy(&v, (const char*)data + 4 * i, 4); return v; }
    default: { uint16_t v; memcpy(&v, (const char*)data + 2 * i, 2); return v; }
  }
}

static TRITONSERVER_Error* answer(InstanceState* state, TRITONBACKEND_Request* request, TRITONBACKEND_Response* response)
{
  const char* id;
  const char* output_name;
  TRITONSERVER_DataType datatype;
  const void* data;
  uint64_t count;
  CHECK(TRITONBACKEND_RequestId(request, &id));
  if (strncmp(id, "meet", 4) == 0) CHECK(meet((unsigned)atoi(id + 4)));
  unsigned seen = finalized_now();
  CHECK(read_input(request, &datatype, &data, &count));
  CHECK(TRITONBACKEND_RequestOutputName(request, 0, &output_name));

  TRITONBACKEND_Output* output;
  void* buffer;
  const int64_t shape[1] = {(int64_t)count};
  CHECK(TRITONBACKEND_ResponseOutput(response, &output, output_name, TRITONSERVER_TYPE_INT64, shape, 1));
  CHECK(TRITONBACKEND_OutputBuffer(output, &buffer, count * sizeof(int64_t), NULL, NULL));
  if (strcmp(id, "hold") == 0) CHECK(hold(seen));
  for (uint64_t i = 0; i < count; ++i) {
    int64_t value = element(datatype, data, i) + state->model->offset;
    memcpy((char*)buffer + i * sizeof value, &value, sizeof value);
  }
  state->served += 1; /* one execute at a time per instance: no lock */
  pthread_mutex_lock(&lock);
  int64_t instances = state->model->instances;
  pthread_mutex_unlock(&lock);
  CHECK(TRITONBACKEND_ResponseSetStringParameter(response, "model", state->model->name));
  CHECK(TRITONBACKEND_ResponseSetStringParameter(response, "instance", state->name));
  CHECK(TRITONBACKEND_ResponseSetStringParameter(response, "datatype", TRITONSERVER_DataTypeString(datatype)));
  CHECK(TRITONBACKEND_ResponseSetIntParameter(response, "served", state->served));
  return TRITONBACKEND_ResponseSetIntParameter(response, "instances", instances);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  void* state;
  CHECK(TRITONBACKEND_ModelInstanceState(instance, &state));
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Response* response;
    CHECK(TRITONBACKEND_ResponseNew(&response, requests[r]));
    TRITONSERVER_Error* failure = answer((InstanceState*)state, requests[r], response);
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
    if (failure) TRITONSERVER_ErrorDelete(failure);
    if (err) return err;
    CHECK(TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL));
  }
  return NULL;
}
