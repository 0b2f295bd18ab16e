/*
 * tpexport.h - umbrella header: include this to use the library.
 */
#ifndef TPEXPORT_TPEXPORT_H
#define TPEXPORT_TPEXPORT_H

#include "status.h"
#include "version.h"
#include "alloc.h"
#include "limits.h"
#include "tensor.h"
#include "value.h"
#include "ops.h"
#include "graph.h"
#include "pytree.h"
#include "interp.h"
#include "signature.h"
#include "module.h"
#include "program.h"

#endif
