/*
 * version.h - the library's version and process-wide lifetime.
 *
 * TP_VERSION_* describe the headers a program was compiled against;
 * tp_version() and tp_version_number() the library it runs with. The shared
 * library's soname carries the major version (libtpexport.so.<major>): see
 * docs/abi.md for what a version change may break. CMakeLists.txt reads the
 * version from this file.
 */
#ifndef TPEXPORT_VERSION_H
#define TPEXPORT_VERSION_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_VERSION_MAJOR 0
#define TP_VERSION_MINOR 2
#define TP_VERSION_PATCH 0
#define TP_VERSION_STRING "0.2.0"
/* major * 10000 + minor * 100 + patch */
#define TP_VERSION_NUMBER (TP_VERSION_MAJOR * 10000 + TP_VERSION_MINOR * 100 + TP_VERSION_PATCH)

/* "0.2.0": the version of the library linked at run time. */
TP_API const char *tp_version(void);
/* TP_VERSION_NUMBER of the library linked at run time. */
TP_API int tp_version_number(void);

/* Release what the library keeps for the whole process: the op table
 * (parsed schemas) and the thread pool's workers (stopped and joined), so a
 * leak checker sees no blocks of ours at exit. Call it when no other thread
 * uses the library and every object made by it (programs, archives, run
 * contexts, tensors) has been freed; the library may be used again
 * afterwards (it initialises itself anew on first use). */
TP_API void tp_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
