/*
 * tritium: the TRITONSERVER_* subset that a backend uses.
 *
 * Names, signatures, enum values and ownership rules follow Triton's public
 * triton/core/tritonserver.h (API 1.34, Triton 2.51), so backend source
 * written for Triton compiles here unchanged. Written for tritium; only the
 * subset listed in docs/native_backends.md is declared: a backend that calls
 * anything else fails to compile (or, built against Triton's header, fails to
 * load with "undefined symbol").
 *
 * Unlike Triton's header, every struct has a typedef, so this header works
 * from C as well as C++.
 */
#ifndef TRITIUM_TRITON_CORE_TRITONSERVER_H
#define TRITIUM_TRITON_CORE_TRITONSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef _COMPILING_TRITONSERVER
#define TRITONSERVER_DECLSPEC __attribute__((__visibility__("default")))
#else
#define TRITONSERVER_DECLSPEC
#endif

typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONSERVER_BufferAttributes TRITONSERVER_BufferAttributes;
typedef struct TRITONSERVER_InferenceTrace TRITONSERVER_InferenceTrace;
typedef struct TRITONSERVER_Server TRITONSERVER_Server;

#define TRITONSERVER_API_VERSION_MAJOR 1
#define TRITONSERVER_API_VERSION_MINOR 34

/* The TRITONSERVER API version of the server (tritium answers 1.34). */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ApiVersion(
    uint32_t* major, uint32_t* minor);

/* ---- data types ---------------------------------------------------------- */
typedef enum TRITONSERVER_datatype_enum {
  TRITONSERVER_TYPE_INVALID,
  TRITONSERVER_TYPE_BOOL,
  TRITONSERVER_TYPE_UINT8,
  TRITONSERVER_TYPE_UINT16,
  TRITONSERVER_TYPE_UINT32,
  TRITONSERVER_TYPE_UINT64,
  TRITONSERVER_TYPE_INT8,
  TRITONSERVER_TYPE_INT16,
  TRITONSERVER_TYPE_INT32,
  TRITONSERVER_TYPE_INT64,
  TRITONSERVER_TYPE_FP16,
  TRITONSERVER_TYPE_FP32,
  TRITONSERVER_TYPE_FP64,
  TRITONSERVER_TYPE_BYTES,
  TRITONSERVER_TYPE_BF16
} TRITONSERVER_DataType;

/* "FP32", ...; "<invalid>" otherwise. Static string, not owned by the caller. */
TRITONSERVER_DECLSPEC const char* TRITONSERVER_DataTypeString(
    TRITONSERVER_DataType datatype);
/* The data type named by "FP32", ...; TRITONSERVER_TYPE_INVALID otherwise. */
TRITONSERVER_DECLSPEC TRITONSERVER_DataType
TRITONSERVER_StringToDataType(const char* dtype);
/* Bytes per element; 0 for BYTES (variable size) and INVALID. */
TRITONSERVER_DECLSPEC uint32_t
TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype);

/* ---- memory types -------------------------------------------------------- */
typedef enum TRITONSERVER_memorytype_enum {
  TRITONSERVER_MEMORY_CPU,
  TRITONSERVER_MEMORY_CPU_PINNED,
  TRITONSERVER_MEMORY_GPU
} TRITONSERVER_MemoryType;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_MemoryTypeString(
    TRITONSERVER_MemoryType memtype);

/* ---- parameters ------------------------------------------------------------ */
typedef enum TRITONSERVER_parametertype_enum {
  TRITONSERVER_PARAMETER_STRING,
  TRITONSERVER_PARAMETER_INT,
  TRITONSERVER_PARAMETER_BOOL,
  TRITONSERVER_PARAMETER_DOUBLE,
  TRITONSERVER_PARAMETER_BYTES
} TRITONSERVER_ParameterType;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_ParameterTypeString(
    TRITONSERVER_ParameterType paramtype);

/* ---- instance group kinds ------------------------------------------------ */
typedef enum TRITONSERVER_instancegroupkind_enum {
  TRITONSERVER_INSTANCEGROUPKIND_AUTO,
  TRITONSERVER_INSTANCEGROUPKIND_CPU,
  TRITONSERVER_INSTANCEGROUPKIND_GPU,
  TRITONSERVER_INSTANCEGROUPKIND_MODEL
} TRITONSERVER_InstanceGroupKind;

TRITONSERVER_DECLSPEC const char* TRITONSERVER_InstanceGroupKindString(
    TRITONSERVER_InstanceGroupKind kind);

/* ---- logging ------------------------------------------------------------- */
typedef enum TRITONSERVER_loglevel_enum {
  TRITONSERVER_LOG_INFO,
  TRITONSERVER_LOG_WARN,
  TRITONSERVER_LOG_ERROR,
  TRITONSERVER_LOG_VERBOSE
} TRITONSERVER_LogLevel;

/* True when messages of 'level' are written (VERBOSE: --log-verbose > 0). */
TRITONSERVER_DECLSPEC bool TRITONSERVER_LogIsEnabled(
    TRITONSERVER_LogLevel level);
/* Write 'msg' to the server log, tagged with filename:line. The caller keeps
 * ownership of every argument. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_LogMessage(
    TRITONSERVER_LogLevel level, const char* filename, const int line,
    const char* msg);

/* ---- errors -------------------------------------------------------------- */
/* NULL means success. The caller owns every error an API function returns and
 * frees it with TRITONSERVER_ErrorDelete. */
typedef enum TRITONSERVER_errorcode_enum {
  TRITONSERVER_ERROR_UNKNOWN,
  TRITONSERVER_ERROR_INTERNAL,
  TRITONSERVER_ERROR_NOT_FOUND,
  TRITONSERVER_ERROR_INVALID_ARG,
  TRITONSERVER_ERROR_UNAVAILABLE,
  TRITONSERVER_ERROR_UNSUPPORTED,
  TRITONSERVER_ERROR_ALREADY_EXISTS,
  TRITONSERVER_ERROR_CANCELLED
} TRITONSERVER_Error_Code;

/* A new error (copies 'msg'); owned by the caller. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_ErrorNew(
    TRITONSERVER_Error_Code code, const char* msg);
TRITONSERVER_DECLSPEC void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);
TRITONSERVER_DECLSPEC TRITONSERVER_Error_Code
TRITONSERVER_ErrorCode(TRITONSERVER_Error* error);
/* "Invalid argument", ...; valid as long as 'error'. */
TRITONSERVER_DECLSPEC const char* TRITONSERVER_ErrorCodeString(
    TRITONSERVER_Error* error);
/* The message; valid as long as 'error'. */
TRITONSERVER_DECLSPEC const char* TRITONSERVER_ErrorMessage(
    TRITONSERVER_Error* error);

/* ---- messages (JSON documents) ------------------------------------------- */
/* A new message holding a copy of the JSON text; owned by the caller. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error*
TRITONSERVER_MessageNewFromSerializedJson(
    TRITONSERVER_Message** message, const char* base, size_t byte_size);
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageDelete(
    TRITONSERVER_Message* message);
/* The JSON text, owned by 'message' (not NUL-terminated in general: use
 * byte_size); valid as long as 'message'. */
TRITONSERVER_DECLSPEC TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size);

/* ---- request and response flags ------------------------------------------ */
typedef enum tritonserver_requestflag_enum {
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1,
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
} TRITONSERVER_RequestFlag;

typedef enum tritonserver_requestreleaseflag_enum {
  TRITONSERVER_REQUEST_RELEASE_ALL = 1,
  TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
} TRITONSERVER_RequestReleaseFlag;

typedef enum tritonserver_responsecompleteflag_enum {
  TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
} TRITONSERVER_ResponseCompleteFlag;

#ifdef __cplusplus
}
#endif

#endif /* TRITIUM_TRITON_CORE_TRITONSERVER_H */
