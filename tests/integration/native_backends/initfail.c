/* Test backend whose TRITONBACKEND_ModelInitialize fails: the load must fail with its message. */
#include "triton/core/tritonbackend.h"

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  const char* name;
  TRITONBACKEND_ModelName(model, &name);
  (void)name;
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "model initialize refused");
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  (void)instance; (void)requests; (void)request_count;
  return NULL;
}
