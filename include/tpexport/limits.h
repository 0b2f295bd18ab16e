/*
 * limits.h - the bounds every program document is read and written within.
 *
 * The archive reader treats each file as hostile and refuses anything past
 * these bounds (TP_ERR_CORRUPT naming the field); the writer refuses, with
 * TP_ERR_UNSUPPORTED naming the offending name or value, any program it
 * would have to write past them, so that whatever tpexport writes it can
 * read back. Both use the values below and nothing else.
 *
 * Each is a compile-time default: a build may define another value (e.g.
 * -DTP_LIMIT_NAME=4096), which must then be the same for the library and
 * every program including this header. TP_MAX_DIMS also sizes tensor
 * structs. A load may tighten the reader's limits (never loosen them)
 * through tp_load_options (archive.h: max_name_bytes, max_depth,
 * max_nodes, max_items, max_document_bytes, and max_tensor_bytes for any
 * one weight, constant or example-input tensor); the writer always uses
 * the values below.
 */
#ifndef TPEXPORT_LIMITS_H
#define TPEXPORT_LIMITS_H

#include <stddef.h>

/* Rank of a tensor (every tensor, not only in archives). */
#ifndef TP_MAX_DIMS
#define TP_MAX_DIMS 12
#endif

/* Bytes of one name in a program document: node names and targets, input,
 * output and state names, dim (symbol) names including derived ones such
 * as "2*batch + 1", module paths, dict keys of example inputs. */
#ifndef TP_LIMIT_NAME
#define TP_LIMIT_NAME 1024
#endif

/* Nodes of one graph. */
#ifndef TP_LIMIT_NODES
#define TP_LIMIT_NODES (1 << 20)
#endif

/* Entries of any one JSON array or object (argument lists, specs, ranges,
 * weights index entries) and bytes of one string argument. */
#ifndef TP_LIMIT_ITEMS
#define TP_LIMIT_ITEMS (1 << 20)
#endif

/* Nesting of argument values, node meta values, tree specs and example
 * inputs. */
#ifndef TP_LIMIT_DEPTH
#define TP_LIMIT_DEPTH 32
#endif

/* Bytes of one JSON document (program document or weights index). */
#ifndef TP_LIMIT_DOCUMENT
#define TP_LIMIT_DOCUMENT ((size_t)1 << 30)
#endif

#endif /* TPEXPORT_LIMITS_H */
