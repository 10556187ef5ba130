/*
 * Test backend that reports what the C API tells it, as one BYTES output
 * REPORT (a line of "key=value" facts), so the tests can check the API
 * surface with exact values. ModelInitialize auto-completes the config with
 * that output (TRITONBACKEND_ModelSetConfig).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "triton/core/tritonbackend.h"

#define CHECK(X)                                   \
  do {                                             \
    TRITONSERVER_Error* e__ = (X);                 \
    if (e__ != NULL) return e__;                   \
  } while (0)

typedef struct {
  char facts[2048];
} ModelState;

static void append(char* buffer, size_t size, const char* text)
{
  size_t used = strlen(buffer);
  snprintf(buffer + used, size - used, "%s%s", used ? " " : "", text);
}

static int error_facts(char* out, size_t size)
{
  TRITONSERVER_Error* e = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_ALREADY_EXISTS, "dup");
  int n = snprintf(out, size, "error=%d/%s/%s", (int)TRITONSERVER_ErrorCode(e), TRITONSERVER_ErrorCodeString(e),
                   TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  return n;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  ModelState* state = (ModelState*)calloc(1, sizeof(ModelState));
  char item[512];
  uint32_t major, minor;
  CHECK(TRITONBACKEND_ApiVersion(&major, &minor));
  snprintf(item, sizeof item, "backend_api=%u.%u", major, minor);
  append(state->facts, sizeof state->facts, item);
  CHECK(TRITONSERVER_ApiVersion(&major, &minor));
  snprintf(item, sizeof item, "server_api=%u.%u", major, minor);
  append(state->facts, sizeof state->facts, item);

  const char* name;
  uint64_t version;
  TRITONBACKEND_ArtifactType artifact;
  const char* location;
  CHECK(TRITONBACKEND_ModelName(model, &name));
  CHECK(TRITONBACKEND_ModelVersion(model, &version));
  CHECK(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  const char* slash = strrchr(location, '/');
  snprintf(item, sizeof item, "model=%s/%llu repo=%s artifact=%d", name, (unsigned long long)version,
           slash ? slash + 1 : location, (int)artifact);
  append(state->facts, sizeof state->facts, item);

  TRITONBACKEND_Backend* backend;
  const char* backend_name;
  TRITONSERVER_Message* backend_config;
  const char* json;
  size_t json_size;
  CHECK(TRITONBACKEND_ModelBackend(model, &backend));
  CHECK(TRITONBACKEND_BackendName(backend, &backend_name));
  CHECK(TRITONBACKEND_BackendConfig(backend, &backend_config));
  CHECK(TRITONSERVER_MessageSerializeToJson(backend_config, &json, &json_size));
  snprintf(item, sizeof item, "backend=%s greeting=%s", backend_name,
           strstr(json, "\"greeting\": \"hi\"") ? "hi" : "missing");
  append(state->facts, sizeof state->facts, item);

  snprintf(item, sizeof item, "types=%s,%s,%s,%u,%u,%d,%d", TRITONSERVER_DataTypeString(TRITONSERVER_TYPE_FP32),
           TRITONSERVER_DataTypeString(TRITONSERVER_TYPE_BF16), TRITONSERVER_DataTypeString((TRITONSERVER_DataType)99),
           TRITONSERVER_DataTypeByteSize(TRITONSERVER_TYPE_INT64), TRITONSERVER_DataTypeByteSize(TRITONSERVER_TYPE_BYTES),
           (int)TRITONSERVER_StringToDataType("UINT16"), (int)TRITONSERVER_StringToDataType("nope"));
  append(state->facts, sizeof state->facts, item);
  snprintf(item, sizeof item, "memory=%s,%s kinds=%s", TRITONSERVER_MemoryTypeString(TRITONSERVER_MEMORY_CPU_PINNED),
           TRITONSERVER_MemoryTypeString(TRITONSERVER_MEMORY_GPU),
           TRITONSERVER_InstanceGroupKindString(TRITONSERVER_INSTANCEGROUPKIND_MODEL));
  append(state->facts, sizeof state->facts, item);
  error_facts(item, sizeof item);
  append(state->facts, sizeof state->facts, item);

  TRITONBACKEND_MemoryManager* manager;
  void* buffer = NULL;
  CHECK(TRITONBACKEND_BackendMemoryManager(backend, &manager));
  TRITONSERVER_Error* gpu = TRITONBACKEND_MemoryManagerAllocate(manager, &buffer, TRITONSERVER_MEMORY_GPU, 0, 16);
  snprintf(item, sizeof item, "gpu_alloc=%s", gpu ? TRITONSERVER_ErrorCodeString(gpu) : "ok");
  TRITONSERVER_ErrorDelete(gpu);
  append(state->facts, sizeof state->facts, item);
  CHECK(TRITONBACKEND_MemoryManagerAllocate(manager, &buffer, TRITONSERVER_MEMORY_CPU, 0, 16));
  CHECK(TRITONBACKEND_MemoryManagerFree(manager, buffer, TRITONSERVER_MEMORY_CPU, 0));

  TRITONSERVER_Message* config;
  TRITONSERVER_Error* bad = TRITONBACKEND_ModelConfig(model, 2, &config);
  snprintf(item, sizeof item, "config_v2=%s", bad ? TRITONSERVER_ErrorCodeString(bad) : "ok");
  TRITONSERVER_ErrorDelete(bad);
  append(state->facts, sizeof state->facts, item);

  bool auto_complete;
  CHECK(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete));
  CHECK(TRITONBACKEND_ModelConfig(model, 1, &config));
  CHECK(TRITONSERVER_MessageSerializeToJson(config, &json, &json_size));
  if (auto_complete && strstr(json, "\"REPORT\"") == NULL) {
    /* add the output: the JSON ends with '}'; a repeated "output" key wins over the earlier one */
    const char* extra = ", \"output\": [{\"name\": \"REPORT\", \"data_type\": \"TYPE_STRING\", \"dims\": [1]}]}";
    size_t end = json_size;
    while (end > 0 && json[end - 1] != '}') --end;
    char* text = (char*)malloc(end + strlen(extra) + 1);
    memcpy(text, json, end - 1);
    strcpy(text + end - 1, extra);
    TRITONSERVER_Message* completed;
    CHECK(TRITONSERVER_MessageNewFromSerializedJson(&completed, text, strlen(text)));
    free(text);
    CHECK(TRITONBACKEND_ModelSetConfig(model, 1, completed));
    CHECK(TRITONSERVER_MessageDelete(completed));
  }
  CHECK(TRITONSERVER_MessageDelete(config));
  snprintf(item, sizeof item, "auto_complete=%d", (int)auto_complete);
  append(state->facts, sizeof state->facts, item);
  return TRITONBACKEND_ModelSetState(model, state);
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* state;
  CHECK(TRITONBACKEND_ModelState(model, &state));
  free(state);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance)
{
  /* a set-after-ModelInitialize must fail */
  TRITONBACKEND_Model* model;
  TRITONSERVER_Message* config;
  CHECK(TRITONBACKEND_ModelInstanceModel(instance, &model));
  CHECK(TRITONBACKEND_ModelConfig(model, 1, &config));
  TRITONSERVER_Error* late = TRITONBACKEND_ModelSetConfig(model, 1, config);
  TRITONSERVER_MessageDelete(config);
  if (late == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "late ModelSetConfig was accepted");
  TRITONSERVER_ErrorDelete(late);
  /* says whether the instance is passive (instance_group.passive) */
  const char* name;
  bool passive;
  CHECK(TRITONBACKEND_ModelInstanceName(instance, &name));
  CHECK(TRITONBACKEND_ModelInstanceIsPassive(instance, &passive));
  char line[256];
  snprintf(line, sizeof line, "probe instance %s passive=%d", name, (int)passive);
  return TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, "probe.c", 43, line);
}

static TRITONSERVER_Error* report(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request,
                                  TRITONBACKEND_Response* response)
{
  TRITONBACKEND_Model* model;
  void* model_state;
  const char* instance_name;
  TRITONSERVER_InstanceGroupKind kind;
  int32_t device_id;
  bool passive, cancelled;
  CHECK(TRITONBACKEND_ModelInstanceModel(instance, &model));
  CHECK(TRITONBACKEND_ModelState(model, &model_state));
  CHECK(TRITONBACKEND_ModelInstanceName(instance, &instance_name));
  CHECK(TRITONBACKEND_ModelInstanceKind(instance, &kind));
  CHECK(TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
  CHECK(TRITONBACKEND_ModelInstanceIsPassive(instance, &passive));
  CHECK(TRITONBACKEND_RequestIsCancelled(request, &cancelled));

  char text[4096];
  char item[512];
  snprintf(text, sizeof text, "%s", ((ModelState*)model_state)->facts);
  snprintf(item, sizeof item, "instance=%s kind=%s device=%d passive=%d cancelled=%d", instance_name,
           TRITONSERVER_InstanceGroupKindString(kind), device_id, (int)passive, (int)cancelled);
  append(text, sizeof text, item);

  const char* id;
  uint32_t flags;
  uint64_t correlation, timeout;
  const char* correlation_string = "-";
  CHECK(TRITONBACKEND_RequestId(request, &id));
  CHECK(TRITONBACKEND_RequestFlags(request, &flags));
  CHECK(TRITONBACKEND_InferenceRequestTimeoutMicroseconds(request, &timeout));
  TRITONSERVER_Error* as_int = TRITONBACKEND_RequestCorrelationId(request, &correlation);
  if (as_int != NULL) {
    TRITONSERVER_ErrorDelete(as_int);
    correlation = 0;
    CHECK(TRITONBACKEND_RequestCorrelationIdString(request, &correlation_string));
  }
  snprintf(item, sizeof item, "id=%s flags=%u corr=%llu corr_str=%s timeout_us=%llu", id, flags,
           (unsigned long long)correlation, correlation_string, (unsigned long long)timeout);
  append(text, sizeof text, item);

  uint32_t inputs, outputs;
  CHECK(TRITONBACKEND_RequestInputCount(request, &inputs));
  for (uint32_t i = 0; i < inputs; ++i) {
    TRITONBACKEND_Input* input;
    const char* input_name;
    TRITONSERVER_DataType datatype;
    const int64_t* shape;
    uint32_t dims, buffers;
    uint64_t bytes;
    CHECK(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    CHECK(TRITONBACKEND_InputProperties(input, &input_name, &datatype, &shape, &dims, &bytes, &buffers));
    snprintf(item, sizeof item, "input=%s:%s:%u:%lld:%llu:%u", input_name, TRITONSERVER_DataTypeString(datatype),
             dims, dims ? (long long)shape[0] : -1LL, (unsigned long long)bytes, buffers);
    append(text, sizeof text, item);
  }
  TRITONBACKEND_Input* missing;
  TRITONSERVER_Error* nope = TRITONBACKEND_RequestInput(request, "NOPE", &missing);
  snprintf(item, sizeof item, "missing_input=%s", nope ? TRITONSERVER_ErrorMessage(nope) : "found?");
  TRITONSERVER_ErrorDelete(nope);
  append(text, sizeof text, item);
  CHECK(TRITONBACKEND_RequestOutputCount(request, &outputs));
  for (uint32_t i = 0; i < outputs; ++i) {
    const char* output_name;
    CHECK(TRITONBACKEND_RequestOutputName(request, i, &output_name));
    snprintf(item, sizeof item, "requested=%s", output_name);
    append(text, sizeof text, item);
  }

  /* REPORT: one BYTES element, in Triton's serialized form */
  uint32_t length = (uint32_t)strlen(text);
  const int64_t shape[1] = {1};
  TRITONBACKEND_Output* output;
  void* buffer;
  CHECK(TRITONBACKEND_ResponseOutput(response, &output, "REPORT", TRITONSERVER_TYPE_BYTES, shape, 1));
  CHECK(TRITONBACKEND_OutputBuffer(output, &buffer, sizeof length + length, NULL, NULL));
  memcpy(buffer, &length, sizeof length);
  memcpy((char*)buffer + sizeof length, text, length);
  CHECK(TRITONBACKEND_ResponseSetStringParameter(response, "str", "text"));
  CHECK(TRITONBACKEND_ResponseSetIntParameter(response, "int", -7));
  CHECK(TRITONBACKEND_ResponseSetBoolParameter(response, "bool", true));
  CHECK(TRITONBACKEND_ResponseSetDoubleParameter(response, "double", 0.5));
  return TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, "probe.c", 42, "probe answered");
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Response* response;
    CHECK(TRITONBACKEND_ResponseNew(&response, requests[r]));
    TRITONSERVER_Error* failure = report(instance, requests[r], response);
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure);
    if (failure) TRITONSERVER_ErrorDelete(failure);
    if (err) TRITONSERVER_ErrorDelete(err);
    TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  return NULL;
}
