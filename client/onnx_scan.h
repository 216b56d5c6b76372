/* onnx_scan.h: the external data files an ONNX model names (onnx_scan.c). */
#ifndef TTHCTL_ONNX_SCAN_H
#define TTHCTL_ONNX_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* The distinct external data locations the tensors of an ONNX model name, in order of first
 * appearance: 0 with *locs (malloc'd strings in a malloc'd array; none: NULL, 0), or -1 when the
 * bytes are not a well-formed model. */
int tthctl_onnx_external_locations(const uint8_t *model, size_t len, char ***locs, size_t *n);

#endif
