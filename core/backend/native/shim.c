/*
 * tritium's side of Triton's backend C API (compiled by cffi into the
 * extension module that tritium.core.backend.native.build makes).
 *
 * The worker imports that module with RTLD_GLOBAL before it opens a backend
 * library, so the library's undefined TRITONBACKEND_* / TRITONSERVER_*
 * symbols resolve to the functions below. Accessors read C structs that the
 * Python host (host.py) fills in; what needs the worker (output buffers in
 * shared memory, sending responses, logging, configs) calls back into Python
 * through cffi "extern Python" functions, which take the GIL themselves.
 *
 * One process hosts many models and instances of a library, executing on
 * several threads at once: everything that belongs to a model or an
 * instance (its state, its config, its handle) is in its own struct, which
 * the host allocates per model and per instance; the only globals are the
 * log levels and the memory manager's token, the same for all.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define _COMPILING_TRITONSERVER 1
#define _COMPILING_TRITONBACKEND 1
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "triton/core/tritonbackend.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  char* message;
};

struct TRITONSERVER_Message {
  char* base;
  size_t size;
  int owned; /* 1: malloc'd here, freed by MessageDelete */
};

struct TRITONBACKEND_Backend {
  const char* name;
  const char* directory;
  TRITONSERVER_Message* config;
  void* state;
  int policy;
};

struct TRITONBACKEND_Model {
  int64_t handle;
  const char* name;
  uint64_t version;
  const char* repository;
  TRITONSERVER_Message* config;
  TRITONBACKEND_Backend* backend;
  void* state;
  bool auto_complete;
};

struct TRITONBACKEND_ModelInstance {
  const char* name;
  int kind;
  int32_t device_id;
  bool passive;
  TRITONBACKEND_Model* model;
  void* state;
};

struct TRITONBACKEND_Input {
  const char* name;
  int datatype;
  const int64_t* shape;
  uint32_t dims_count;
  uint64_t byte_size;
  const void* buffer;
};

struct TRITONBACKEND_Request {
  int64_t handle;
  const char* id;
  uint64_t correlation_id;
  const char* correlation_id_string; /* NULL: the id is an integer */
  uint32_t flags;
  uint64_t timeout_us;
  uint32_t input_count;
  TRITONBACKEND_Input* inputs;
  uint32_t output_count;
  const char** output_names;
  int released;
  int notify_release; /* 1: tell the host at release (decoupled models keep requests past execute) */
};

struct TRITONBACKEND_ResponseFactory {
  int64_t request;
};

/* Responses and their outputs live here until they are sent; the host sees
 * them at OutputBuffer (to hand out shared memory) and at ResponseSend. */
struct TRITONBACKEND_Output {
  TRITONBACKEND_Response* response;
  char* name;
  int datatype;
  int64_t* shape;
  uint32_t dims_count;
  int64_t buffer; /* the host's handle of the buffer; 0: none yet */
  TRITONBACKEND_Output* next;
};

struct TRITONBACKEND_Response {
  int64_t request;
  int64_t parameters; /* the host's handle of the parameters; 0: none */
  TRITONBACKEND_Output* first;
  TRITONBACKEND_Output* last;
};

/* Python callbacks (see host.py); each returns NULL or a new error. */
static TRITONSERVER_Error* tritium_py_output_buffer(
    TRITONBACKEND_Output* output, uint64_t byte_size, void** buffer);
static TRITONSERVER_Error* tritium_py_response_parameter(
    TRITONBACKEND_Response* response, const char* name, int type, const void* value);
static TRITONSERVER_Error* tritium_py_response_send(
    TRITONBACKEND_Response* response, uint32_t flags, TRITONSERVER_Error* error);
static void tritium_py_response_delete(TRITONBACKEND_Response* response);
static TRITONSERVER_Error* tritium_py_factory_send_flags(int64_t request, uint32_t flags);
static TRITONSERVER_Error* tritium_py_request_release(int64_t request, uint32_t flags);
static TRITONSERVER_Error* tritium_py_request_is_cancelled(int64_t request, bool* is_cancelled);
static void tritium_py_log(int level, const char* filename, int line, const char* msg);
static TRITONSERVER_Error* tritium_py_model_set_config(
    int64_t model, const char* json, size_t size);

/* Log levels enabled (bit i = TRITONSERVER_LogLevel i); set by the host. */
static unsigned tritium_log_levels = 0x7;

void tritium_set_log_levels(unsigned levels) { tritium_log_levels = levels; }

static TRITONSERVER_Error* err(TRITONSERVER_Error_Code code, const char* msg)
{
  return TRITONSERVER_ErrorNew(code, msg);
}

#define REQUIRE(cond, msg) \
  do { if (!(cond)) return err(TRITONSERVER_ERROR_INVALID_ARG, msg); } while (0)

/* ---- backend libraries --------------------------------------------------- */
void* tritium_dlopen(const char* path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
void* tritium_dlsym(void* handle, const char* name) { return dlsym(handle, name); }
const char* tritium_dlerror(void) { return dlerror(); }
int tritium_dlclose(void* handle) { return dlclose(handle); }

/* ---- TRITONSERVER --------------------------------------------------------- */
TRITONSERVER_Error* TRITONSERVER_ApiVersion(uint32_t* major, uint32_t* minor)
{
  REQUIRE(major && minor, "TRITONSERVER_ApiVersion: NULL argument");
  *major = TRITONSERVER_API_VERSION_MAJOR;
  *minor = TRITONSERVER_API_VERSION_MINOR;
  return NULL;
}

static const char* const DATATYPE_NAMES[] = {
    "<invalid>", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
    "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"};
static const uint32_t DATATYPE_SIZES[] = {0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 0, 2};
#define N_DATATYPES (sizeof(DATATYPE_SIZES) / sizeof(DATATYPE_SIZES[0]))

const char* TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype)
{
  if ((unsigned)datatype >= N_DATATYPES) return "<invalid>";
  return DATATYPE_NAMES[datatype];
}

TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char* dtype)
{
  if (dtype == NULL) return TRITONSERVER_TYPE_INVALID;
  for (unsigned i = 1; i < N_DATATYPES; ++i)
    if (strcmp(dtype, DATATYPE_NAMES[i]) == 0) return (TRITONSERVER_DataType)i;
  return TRITONSERVER_TYPE_INVALID;
}

uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype)
{
  if ((unsigned)datatype >= N_DATATYPES) return 0;
  return DATATYPE_SIZES[datatype];
}

const char* TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype)
{
  switch (memtype) {
    case TRITONSERVER_MEMORY_CPU: return "CPU";
    case TRITONSERVER_MEMORY_CPU_PINNED: return "CPU_PINNED";
    case TRITONSERVER_MEMORY_GPU: return "GPU";
  }
  return "<invalid>";
}

const char* TRITONSERVER_ParameterTypeString(TRITONSERVER_ParameterType paramtype)
{
  switch (paramtype) {
    case TRITONSERVER_PARAMETER_STRING: return "STRING";
    case TRITONSERVER_PARAMETER_INT: return "INT";
    case TRITONSERVER_PARAMETER_BOOL: return "BOOL";
    case TRITONSERVER_PARAMETER_DOUBLE: return "DOUBLE";
    case TRITONSERVER_PARAMETER_BYTES: return "BYTES";
  }
  return "<invalid>";
}

const char* TRITONSERVER_InstanceGroupKindString(TRITONSERVER_InstanceGroupKind kind)
{
  switch (kind) {
    case TRITONSERVER_INSTANCEGROUPKIND_AUTO: return "AUTO";
    case TRITONSERVER_INSTANCEGROUPKIND_CPU: return "CPU";
    case TRITONSERVER_INSTANCEGROUPKIND_GPU: return "GPU";
    case TRITONSERVER_INSTANCEGROUPKIND_MODEL: return "MODEL";
  }
  return "<invalid>";
}

bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level)
{
  return (unsigned)level < 8 && (tritium_log_levels >> level) & 1u;
}

TRITONSERVER_Error* TRITONSERVER_LogMessage(
    TRITONSERVER_LogLevel level, const char* filename, const int line, const char* msg)
{
  if (TRITONSERVER_LogIsEnabled(level))
    tritium_py_log((int)level, filename ? filename : "", line, msg ? msg : "");
  return NULL;
}

TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg)
{
  TRITONSERVER_Error* error = (TRITONSERVER_Error*)malloc(sizeof(TRITONSERVER_Error));
  if (error == NULL) return NULL;
  error->code = code;
  error->message = strdup(msg ? msg : "");
  return error;
}

void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error)
{
  if (error == NULL) return;
  free(error->message);
  free(error);
}

TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error)
{
  return error ? error->code : TRITONSERVER_ERROR_UNKNOWN;
}

const char* TRITONSERVER_ErrorCodeString(TRITONSERVER_Error* error)
{
  static const char* const TEXT[] = {"Unknown", "Internal", "Not found", "Invalid argument",
                                     "Unavailable", "Unsupported", "Already exists", "Cancelled"};
  if (error == NULL || (unsigned)error->code >= 8) return "<invalid code>";
  return TEXT[error->code];
}

const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error)
{
  return (error && error->message) ? error->message : "";
}

static TRITONSERVER_Message* message_copy(const char* base, size_t size)
{
  TRITONSERVER_Message* message = (TRITONSERVER_Message*)malloc(sizeof(TRITONSERVER_Message));
  if (message == NULL) return NULL;
  message->base = (char*)malloc(size + 1);
  if (message->base == NULL) { free(message); return NULL; }
  memcpy(message->base, base, size);
  message->base[size] = '\0';
  message->size = size;
  message->owned = 1;
  return message;
}

TRITONSERVER_Error* TRITONSERVER_MessageNewFromSerializedJson(
    TRITONSERVER_Message** message, const char* base, size_t byte_size)
{
  REQUIRE(message && (base || byte_size == 0), "TRITONSERVER_MessageNewFromSerializedJson: NULL argument");
  *message = message_copy(base ? base : "", byte_size);
  return *message ? NULL : err(TRITONSERVER_ERROR_INTERNAL, "out of memory");
}

TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message)
{
  if (message && message->owned) {
    free(message->base);
    free(message);
  }
  return NULL;
}

TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size)
{
  REQUIRE(message && base && byte_size, "TRITONSERVER_MessageSerializeToJson: NULL argument");
  *base = message->base;
  *byte_size = message->size;
  return NULL;
}

/* ---- TRITONBACKEND: version, memory manager -------------------------------- */
TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor)
{
  REQUIRE(major && minor, "TRITONBACKEND_ApiVersion: NULL argument");
  *major = TRITONBACKEND_API_VERSION_MAJOR;
  *minor = TRITONBACKEND_API_VERSION_MINOR;
  return NULL;
}

static int memory_manager_token;

TRITONSERVER_Error* TRITONBACKEND_MemoryManagerAllocate(
    TRITONBACKEND_MemoryManager* manager, void** buffer, const TRITONSERVER_MemoryType memory_type,
    const int64_t memory_type_id, const uint64_t byte_size)
{
  (void)manager; (void)memory_type_id;
  REQUIRE(buffer, "TRITONBACKEND_MemoryManagerAllocate: NULL buffer");
  if (memory_type == TRITONSERVER_MEMORY_GPU)
    return err(TRITONSERVER_ERROR_UNSUPPORTED,
               "GPU memory is not available to native backends in tritium (CPU and CPU_PINNED only)");
  *buffer = malloc(byte_size ? byte_size : 1);
  return *buffer ? NULL : err(TRITONSERVER_ERROR_UNAVAILABLE, "out of memory");
}

TRITONSERVER_Error* TRITONBACKEND_MemoryManagerFree(
    TRITONBACKEND_MemoryManager* manager, void* buffer, const TRITONSERVER_MemoryType memory_type,
    const int64_t memory_type_id)
{
  (void)manager; (void)memory_type_id;
  if (memory_type == TRITONSERVER_MEMORY_GPU)
    return err(TRITONSERVER_ERROR_UNSUPPORTED,
               "GPU memory is not available to native backends in tritium (CPU and CPU_PINNED only)");
  free(buffer);
  return NULL;
}

/* ---- inputs ---------------------------------------------------------------- */
TRITONSERVER_Error* TRITONBACKEND_InputProperties(
    TRITONBACKEND_Input* input, const char** name, TRITONSERVER_DataType* datatype,
    const int64_t** shape, uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count)
{
  REQUIRE(input, "TRITONBACKEND_InputProperties: NULL input");
  if (name) *name = input->name;
  if (datatype) *datatype = (TRITONSERVER_DataType)input->datatype;
  if (shape) *shape = input->shape;
  if (dims_count) *dims_count = input->dims_count;
  if (byte_size) *byte_size = input->byte_size;
  if (buffer_count) *buffer_count = 1;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_InputBuffer(
    TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
    uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id)
{
  REQUIRE(input && buffer && buffer_byte_size, "TRITONBACKEND_InputBuffer: NULL argument");
  if (index != 0) return err(TRITONSERVER_ERROR_INVALID_ARG, "TRITONBACKEND_InputBuffer: buffer index out of range (inputs have 1 buffer)");
  *buffer = input->buffer;
  *buffer_byte_size = input->byte_size;
  if (memory_type) *memory_type = TRITONSERVER_MEMORY_CPU;
  if (memory_type_id) *memory_type_id = 0;
  return NULL;
}

/* ---- requests ---------------------------------------------------------------- */
TRITONSERVER_Error* TRITONBACKEND_RequestId(TRITONBACKEND_Request* request, const char** id)
{
  REQUIRE(request && id, "TRITONBACKEND_RequestId: NULL argument");
  *id = request->id;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request* request, bool* is_cancelled)
{
  REQUIRE(request && is_cancelled, "TRITONBACKEND_RequestIsCancelled: NULL argument");
  return tritium_py_request_is_cancelled(request->handle, is_cancelled);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryIsCancelled(
    TRITONBACKEND_ResponseFactory* factory, bool* is_cancelled)
{
  REQUIRE(factory && is_cancelled, "TRITONBACKEND_ResponseFactoryIsCancelled: NULL argument");
  return tritium_py_request_is_cancelled(factory->request, is_cancelled);
}

TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request* request, uint64_t* id)
{
  REQUIRE(request && id, "TRITONBACKEND_RequestCorrelationId: NULL argument");
  if (request->correlation_id_string != NULL)
    return err(TRITONSERVER_ERROR_INVALID_ARG,
               "given request's correlation id is not an unsigned int");
  *id = request->correlation_id;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationIdString(TRITONBACKEND_Request* request, const char** id)
{
  REQUIRE(request && id, "TRITONBACKEND_RequestCorrelationIdString: NULL argument");
  if (request->correlation_id_string == NULL)
    return err(TRITONSERVER_ERROR_INVALID_ARG, "given request's correlation id is not a string");
  *id = request->correlation_id_string;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_InferenceRequestTimeoutMicroseconds(
    TRITONBACKEND_Request* request, uint64_t* timeout)
{
  REQUIRE(request && timeout, "TRITONBACKEND_InferenceRequestTimeoutMicroseconds: NULL argument");
  *timeout = request->timeout_us;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestFlags(TRITONBACKEND_Request* request, uint32_t* flags)
{
  REQUIRE(request && flags, "TRITONBACKEND_RequestFlags: NULL argument");
  *flags = request->flags;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request, uint32_t* count)
{
  REQUIRE(request && count, "TRITONBACKEND_RequestInputCount: NULL argument");
  *count = request->input_count;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputName(
    TRITONBACKEND_Request* request, const uint32_t index, const char** input_name)
{
  REQUIRE(request && input_name, "TRITONBACKEND_RequestInputName: NULL argument");
  if (index >= request->input_count)
    return err(TRITONSERVER_ERROR_INVALID_ARG, "out of bounds index: request has fewer inputs");
  *input_name = request->inputs[index].name;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestInput(
    TRITONBACKEND_Request* request, const char* name, TRITONBACKEND_Input** input)
{
  REQUIRE(request && name && input, "TRITONBACKEND_RequestInput: NULL argument");
  for (uint32_t i = 0; i < request->input_count; ++i) {
    if (strcmp(request->inputs[i].name, name) == 0) {
      *input = &request->inputs[i];
      return NULL;
    }
  }
  char msg[512];
  snprintf(msg, sizeof msg, "unknown request input name %s", name);
  return err(TRITONSERVER_ERROR_INVALID_ARG, msg);
}

TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(
    TRITONBACKEND_Request* request, const uint32_t index, TRITONBACKEND_Input** input)
{
  REQUIRE(request && input, "TRITONBACKEND_RequestInputByIndex: NULL argument");
  if (index >= request->input_count)
    return err(TRITONSERVER_ERROR_INVALID_ARG, "out of bounds index: request has fewer inputs");
  *input = &request->inputs[index];
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request, uint32_t* count)
{
  REQUIRE(request && count, "TRITONBACKEND_RequestOutputCount: NULL argument");
  *count = request->output_count;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(
    TRITONBACKEND_Request* request, const uint32_t index, const char** output_name)
{
  REQUIRE(request && output_name, "TRITONBACKEND_RequestOutputName: NULL argument");
  if (index >= request->output_count)
    return err(TRITONSERVER_ERROR_INVALID_ARG, "out of bounds index: request has fewer requested outputs");
  *output_name = request->output_names[index];
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t release_flags)
{
  REQUIRE(request, "TRITONBACKEND_RequestRelease: NULL request");
  if (request->released)
    return err(TRITONSERVER_ERROR_INVALID_ARG, "the request was released or does not belong to this execution");
  /* the host hears of a decoupled request's release, and of any rescheduling (iterative sequences) */
  if (request->notify_release || (release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)) {
    TRITONSERVER_Error* error = tritium_py_request_release(request->handle, release_flags);
    if (error) return error;
  }
  request->released = 1;
  return NULL;
}

/* ---- response factories ------------------------------------------------------ */
TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryNew(
    TRITONBACKEND_ResponseFactory** factory, TRITONBACKEND_Request* request)
{
  REQUIRE(factory && request, "TRITONBACKEND_ResponseFactoryNew: NULL argument");
  *factory = (TRITONBACKEND_ResponseFactory*)malloc(sizeof(TRITONBACKEND_ResponseFactory));
  if (*factory == NULL) return err(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  (*factory)->request = request->handle;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory)
{
  free(factory);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseFactorySendFlags(
    TRITONBACKEND_ResponseFactory* factory, const uint32_t send_flags)
{
  REQUIRE(factory, "TRITONBACKEND_ResponseFactorySendFlags: NULL factory");
  return tritium_py_factory_send_flags(factory->request, send_flags);
}

/* ---- responses ------------------------------------------------------------ */
static TRITONSERVER_Error* response_new(TRITONBACKEND_Response** response, int64_t request)
{
  *response = (TRITONBACKEND_Response*)calloc(1, sizeof(TRITONBACKEND_Response));
  if (*response == NULL) return err(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  (*response)->request = request;
  return NULL;
}

static void response_free(TRITONBACKEND_Response* response)
{
  TRITONBACKEND_Output* output = response->first;
  while (output) {
    TRITONBACKEND_Output* next = output->next;
    free(output->name);
    free(output->shape);
    free(output);
    output = next;
  }
  free(response);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response** response, TRITONBACKEND_Request* request)
{
  REQUIRE(response && request, "TRITONBACKEND_ResponseNew: NULL argument");
  if (request->released)
    return err(TRITONSERVER_ERROR_INVALID_ARG, "the request was released or does not belong to this execution");
  return response_new(response, request->handle);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(
    TRITONBACKEND_Response** response, TRITONBACKEND_ResponseFactory* factory)
{
  REQUIRE(response && factory, "TRITONBACKEND_ResponseNewFromFactory: NULL argument");
  return response_new(response, factory->request);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response)
{
  if (response == NULL) return NULL;
  int held = response->parameters != 0;
  for (TRITONBACKEND_Output* output = response->first; output; output = output->next)
    held |= output->buffer != 0;
  if (held) tritium_py_response_delete(response); /* give back its buffers */
  response_free(response);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetStringParameter(
    TRITONBACKEND_Response* response, const char* name, const char* value)
{
  REQUIRE(response && name && value, "TRITONBACKEND_ResponseSetStringParameter: NULL argument");
  return tritium_py_response_parameter(response, name, TRITONSERVER_PARAMETER_STRING, value);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetIntParameter(
    TRITONBACKEND_Response* response, const char* name, const int64_t value)
{
  REQUIRE(response && name, "TRITONBACKEND_ResponseSetIntParameter: NULL argument");
  return tritium_py_response_parameter(response, name, TRITONSERVER_PARAMETER_INT, &value);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetBoolParameter(
    TRITONBACKEND_Response* response, const char* name, const bool value)
{
  REQUIRE(response && name, "TRITONBACKEND_ResponseSetBoolParameter: NULL argument");
  return tritium_py_response_parameter(response, name, TRITONSERVER_PARAMETER_BOOL, &value);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSetDoubleParameter(
    TRITONBACKEND_Response* response, const char* name, const double value)
{
  REQUIRE(response && name, "TRITONBACKEND_ResponseSetDoubleParameter: NULL argument");
  return tritium_py_response_parameter(response, name, TRITONSERVER_PARAMETER_DOUBLE, &value);
}

TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(
    TRITONBACKEND_Response* response, TRITONBACKEND_Output** output, const char* name,
    const TRITONSERVER_DataType datatype, const int64_t* shape, const uint32_t dims_count)
{
  REQUIRE(response && output && name && (shape || dims_count == 0),
          "TRITONBACKEND_ResponseOutput: NULL argument");
  if ((unsigned)datatype == TRITONSERVER_TYPE_INVALID || (unsigned)datatype >= N_DATATYPES) {
    char msg[160];
    snprintf(msg, sizeof msg, "invalid datatype %d for output '%s'", (int)datatype, name);
    return err(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  for (uint32_t i = 0; i < dims_count; ++i) {
    if (shape[i] < 0) {
      char msg[160];
      snprintf(msg, sizeof msg, "output '%s' has a negative dimension", name);
      return err(TRITONSERVER_ERROR_INVALID_ARG, msg);
    }
  }
  TRITONBACKEND_Output* out = (TRITONBACKEND_Output*)calloc(1, sizeof(TRITONBACKEND_Output));
  if (out == NULL) return err(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  out->name = strdup(name);
  out->shape = (int64_t*)malloc(sizeof(int64_t) * (dims_count ? dims_count : 1));
  if (out->name == NULL || out->shape == NULL) {
    free(out->name);
    free(out->shape);
    free(out);
    return err(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  }
  if (dims_count) memcpy(out->shape, shape, sizeof(int64_t) * dims_count);
  out->dims_count = dims_count;
  out->datatype = (int)datatype;
  out->response = response;
  if (response->last) response->last->next = out;
  else response->first = out;
  response->last = out;
  *output = out;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(
    TRITONBACKEND_Output* output, void** buffer, const uint64_t buffer_byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id)
{
  REQUIRE(output && buffer, "TRITONBACKEND_OutputBuffer: NULL argument");
  TRITONSERVER_Error* error = tritium_py_output_buffer(output, buffer_byte_size, buffer);
  if (error) return error;
  if (memory_type) *memory_type = TRITONSERVER_MEMORY_CPU;
  if (memory_type_id) *memory_type_id = 0;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ResponseSend(
    TRITONBACKEND_Response* response, const uint32_t send_flags, TRITONSERVER_Error* error)
{
  REQUIRE(response, "TRITONBACKEND_ResponseSend: NULL response");
  TRITONSERVER_Error* result = tritium_py_response_send(response, send_flags, error);
  response_free(response);
  return result;
}

/* ---- backend ------------------------------------------------------------------ */
TRITONSERVER_Error* TRITONBACKEND_BackendName(TRITONBACKEND_Backend* backend, const char** name)
{
  REQUIRE(backend && name, "TRITONBACKEND_BackendName: NULL argument");
  *name = backend->name;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_BackendConfig(TRITONBACKEND_Backend* backend, TRITONSERVER_Message** backend_config)
{
  REQUIRE(backend && backend_config, "TRITONBACKEND_BackendConfig: NULL argument");
  *backend_config = backend->config;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_BackendExecutionPolicy(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_ExecutionPolicy* policy)
{
  REQUIRE(backend && policy, "TRITONBACKEND_BackendExecutionPolicy: NULL argument");
  *policy = (TRITONBACKEND_ExecutionPolicy)backend->policy;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_BackendSetExecutionPolicy(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_ExecutionPolicy policy)
{
  REQUIRE(backend, "TRITONBACKEND_BackendSetExecutionPolicy: NULL backend");
  backend->policy = (int)policy;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_BackendArtifacts(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_ArtifactType* artifact_type, const char** location)
{
  REQUIRE(backend && artifact_type && location, "TRITONBACKEND_BackendArtifacts: NULL argument");
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = backend->directory;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_BackendMemoryManager(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_MemoryManager** manager)
{
  REQUIRE(backend && manager, "TRITONBACKEND_BackendMemoryManager: NULL argument");
  *manager = (TRITONBACKEND_MemoryManager*)&memory_manager_token;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_BackendState(TRITONBACKEND_Backend* backend, void** state)
{
  REQUIRE(backend && state, "TRITONBACKEND_BackendState: NULL argument");
  *state = backend->state;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_BackendSetState(TRITONBACKEND_Backend* backend, void* state)
{
  REQUIRE(backend, "TRITONBACKEND_BackendSetState: NULL backend");
  backend->state = state;
  return NULL;
}

/* ---- model ---------------------------------------------------------------------- */
TRITONSERVER_Error* TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name)
{
  REQUIRE(model && name, "TRITONBACKEND_ModelName: NULL argument");
  *name = model->name;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version)
{
  REQUIRE(model && version, "TRITONBACKEND_ModelVersion: NULL argument");
  *version = model->version;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelRepository(
    TRITONBACKEND_Model* model, TRITONBACKEND_ArtifactType* artifact_type, const char** location)
{
  REQUIRE(model && artifact_type && location, "TRITONBACKEND_ModelRepository: NULL argument");
  *artifact_type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  *location = model->repository;
  return NULL;
}

static TRITONSERVER_Error* check_config_version(uint32_t config_version)
{
  if (config_version == 1) return NULL;
  char msg[160];
  snprintf(msg, sizeof msg,
           "model configuration version %u not supported, supported versions are: 1",
           config_version);
  return err(TRITONSERVER_ERROR_UNSUPPORTED, msg);
}

TRITONSERVER_Error* TRITONBACKEND_ModelConfig(
    TRITONBACKEND_Model* model, const uint32_t config_version, TRITONSERVER_Message** model_config)
{
  REQUIRE(model && model_config, "TRITONBACKEND_ModelConfig: NULL argument");
  TRITONSERVER_Error* error = check_config_version(config_version);
  if (error) return error;
  /* read the pointer once: the host may point the model at a newer config meanwhile (an instance of
   * the model initializing on another thread); the message it replaces stays valid */
  const TRITONSERVER_Message* config = __atomic_load_n(&model->config, __ATOMIC_ACQUIRE);
  *model_config = message_copy(config->base, config->size);
  return *model_config ? NULL : err(TRITONSERVER_ERROR_INTERNAL, "out of memory");
}

TRITONSERVER_Error* TRITONBACKEND_ModelAutoCompleteConfig(TRITONBACKEND_Model* model, bool* auto_complete_config)
{
  REQUIRE(model && auto_complete_config, "TRITONBACKEND_ModelAutoCompleteConfig: NULL argument");
  *auto_complete_config = model->auto_complete;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelSetConfig(
    TRITONBACKEND_Model* model, const uint32_t config_version, TRITONSERVER_Message* model_config)
{
  REQUIRE(model && model_config, "TRITONBACKEND_ModelSetConfig: NULL argument");
  TRITONSERVER_Error* error = check_config_version(config_version);
  if (error) return error;
  return tritium_py_model_set_config(model->handle, model_config->base, model_config->size);
}

TRITONSERVER_Error* TRITONBACKEND_ModelBackend(TRITONBACKEND_Model* model, TRITONBACKEND_Backend** backend)
{
  REQUIRE(model && backend, "TRITONBACKEND_ModelBackend: NULL argument");
  *backend = model->backend;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state)
{
  REQUIRE(model && state, "TRITONBACKEND_ModelState: NULL argument");
  *state = model->state;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state)
{
  REQUIRE(model, "TRITONBACKEND_ModelSetState: NULL model");
  model->state = state;
  return NULL;
}

/* ---- model instance ------------------------------------------------------------- */
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance* instance, const char** name)
{
  REQUIRE(instance && name, "TRITONBACKEND_ModelInstanceName: NULL argument");
  *name = instance->name;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceKind(
    TRITONBACKEND_ModelInstance* instance, TRITONSERVER_InstanceGroupKind* kind)
{
  REQUIRE(instance && kind, "TRITONBACKEND_ModelInstanceKind: NULL argument");
  *kind = (TRITONSERVER_InstanceGroupKind)instance->kind;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceDeviceId(TRITONBACKEND_ModelInstance* instance, int32_t* device_id)
{
  REQUIRE(instance && device_id, "TRITONBACKEND_ModelInstanceDeviceId: NULL argument");
  *device_id = instance->device_id;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceIsPassive(TRITONBACKEND_ModelInstance* instance, bool* is_passive)
{
  REQUIRE(instance && is_passive, "TRITONBACKEND_ModelInstanceIsPassive: NULL argument");
  *is_passive = instance->passive;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Model** model)
{
  REQUIRE(instance && model, "TRITONBACKEND_ModelInstanceModel: NULL argument");
  *model = instance->model;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance* instance, void** state)
{
  REQUIRE(instance && state, "TRITONBACKEND_ModelInstanceState: NULL argument");
  *state = instance->state;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance* instance, void* state)
{
  REQUIRE(instance, "TRITONBACKEND_ModelInstanceSetState: NULL instance");
  instance->state = state;
  return NULL;
}

/* ---- statistics ------------------------------------------------------------------ */
/* Accepted, as Triton accepts them; the statistics extension reports the worker's own
 * measurement of each execution. */
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, const bool success,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns, const uint64_t compute_end_ns,
    const uint64_t exec_end_ns)
{
  REQUIRE(instance && request, "TRITONBACKEND_ModelInstanceReportStatistics: NULL argument");
  (void)success; (void)exec_start_ns; (void)compute_start_ns; (void)compute_end_ns; (void)exec_end_ns;
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const uint64_t batch_size, const uint64_t exec_start_ns,
    const uint64_t compute_start_ns, const uint64_t compute_end_ns, const uint64_t exec_end_ns)
{
  REQUIRE(instance, "TRITONBACKEND_ModelInstanceReportBatchStatistics: NULL instance");
  (void)batch_size; (void)exec_start_ns; (void)compute_start_ns; (void)compute_end_ns; (void)exec_end_ns;
  return NULL;
}
