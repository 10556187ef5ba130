/* Test backend that calls a server function tritium does not provide: the load must fail. */
#include "triton/core/tritonbackend.h"

TRITONSERVER_Error* TRITONBACKEND_NotAFunction(void);

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests, const uint32_t request_count)
{
  (void)instance; (void)requests; (void)request_count;
  return TRITONBACKEND_NotAFunction();
}
