/* Names of OpenCL error codes, for messages a person can act on. */
#ifndef LOCUS_OPENCL_ERRORS_H
#define LOCUS_OPENCL_ERRORS_H

#include <CL/cl.h>

/* The enumerator's name, e.g. "CL_OUT_OF_RESOURCES"; "unknown OpenCL error"
 * for codes no header of ours defines (vendor extensions). Never NULL. */
const char *locus__opencl_error_name(cl_int code);

#endif
