/* Test backend without TRITONBACKEND_ModelInstanceExecute: the load must fail. */
#include "triton/core/tritonbackend.h"

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend)
{
  (void)backend;
  return NULL;
}
