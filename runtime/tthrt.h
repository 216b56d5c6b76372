/* tthrt.h: the tth runtime. Load a built artifact (the tar tth_compile produces) on this host and
 * run it: open → bind inputs → run → read or write outputs → close. Used by `tthctl run` and the
 * tests. Every fallible call returns 0 or a negative TTH_E* code and fills a tth_diag.
 *
 * What an artifact must hold to be runnable here: metadata.json and lib/<model>.so (built when the
 * compile's build_shared option was on; a target that is not this host's has no .so and opening
 * it says so).
 *
 * Arrays: .npy (NumPy format versions 1 and 2, little-endian, C order, every dtype of
 * tth/ir_common.h but bfloat16, which NumPy lacks) and ONNX TensorProto .pb files (dims, data_type, the typed data fields and
 * raw_data; external data is refused).
 */
#ifndef TTHRT_H
#define TTHRT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"
#include "tth/ir_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- arrays --------------------------------------------------------------------------------- */

/* A dense C-order array. `data` is malloc'd (64-byte aligned) and owned by the array; name is
 * malloc'd or NULL (a TensorProto's name). Release with tthrt_array_clear. */
typedef struct tthrt_array {
    tth_dtype dtype;
    int32_t rank;
    int64_t shape[TTH_MAX_RANK];
    void *data;
    size_t nbytes;
    char *name;
} tthrt_array;

/* Allocate data for the given type (zeroed). */
int tthrt_array_init(tthrt_array *a, tth_dtype dtype, int32_t rank, const int64_t *shape,
                     tth_diag *diag);
void tthrt_array_clear(tthrt_array *a);

/* .npy */
int tthrt_npy_read(const char *path, tthrt_array *out, tth_diag *diag);
int tthrt_npy_read_memory(const void *bytes, size_t len, tthrt_array *out, tth_diag *diag);
int tthrt_npy_write(const char *path, const tthrt_array *a, tth_diag *diag);

/* ONNX TensorProto (.pb). Writing: dims, data_type, name (when set) and raw_data; every dtype,
 * bfloat16 included (the one .npy cannot hold). */
int tthrt_pb_read(const char *path, tthrt_array *out, tth_diag *diag);
int tthrt_pb_read_memory(const void *bytes, size_t len, tthrt_array *out, tth_diag *diag);
int tthrt_pb_write(const char *path, const tthrt_array *a, tth_diag *diag);

/* By extension: ".npy" → npy; ".pb" → TensorProto; otherwise by content (npy magic). */
int tthrt_array_load(const char *path, tthrt_array *out, tth_diag *diag);

/* The array as a compile-time input value (options.bind, docs/tthctl.md "--bind"):
 * {"dtype", "shape", "data": [numbers, row-major]}. NULL with `why` filled when it cannot be
 * sent: more than max_elements elements, float16 or bfloat16, or a float that is not finite. */
json_t *tthrt_array_to_bind_json(const tthrt_array *a, int64_t max_elements, char *why, size_t why_len);
/* The largest tensor tthctl binds (elements): binds are shapes, axes and small configuration
 * tensors, sent as JSON numbers. */
#define TTHRT_BIND_MAX_ELEMENTS ((int64_t)1 << 20)

/* Compare `got` with `want`: same dtype and element count required; floats within
 * |got - want| <= atol + rtol * |want| (NaN matches NaN, infinities must be equal; float16 and
 * bfloat16 are compared as float), integers and bool exactly. Returns 1 when they match, 0 when not (then
 * `why` says where: "element 12: got 0.5, want 0.25"), negative on a shape/dtype mismatch
 * (why says what differs). */
int tthrt_array_compare(const tthrt_array *got, const tthrt_array *want, double atol, double rtol,
                        char *why, size_t why_len);
/* The tolerances tth's tests use for a dtype: float32 1e-4/1e-4, float16 and bfloat16
 * 1e-2/1e-2, float64 1e-7/1e-7, integers and bool 0 (exact). */
void tthrt_default_tolerance(tth_dtype dtype, double *atol, double *rtol);

/* ---- models --------------------------------------------------------------------------------- */

typedef struct tthrt_model tthrt_model;

/* One input or output, as metadata.json describes it. */
typedef struct tthrt_tensor_info {
    const char *name;        /* the ONNX name */
    const char *c_name;      /* the field of the interface struct */
    tth_dtype dtype;
    int32_t rank;
    int64_t shape[TTH_MAX_RANK];
    size_t nbytes;
} tthrt_tensor_info;

typedef struct tthrt_timing {
    int runs;                /* how many times the model ran */
    double min_ms;           /* fastest run */
    double median_ms;        /* median run */
    double mean_ms;
} tthrt_timing;

/* Open an artifact tar from a file or from memory: read metadata.json, load lib/<model>.so
 * (extracted to a private temporary directory that is removed at once after loading), allocate
 * the workspace and the outputs. */
int tthrt_model_open(const char *artifact_path, tthrt_model **out, tth_diag *diag);
int tthrt_model_open_memory(const void *tar, size_t len, tthrt_model **out, tth_diag *diag);
void tthrt_model_close(tthrt_model *m);

const char *tthrt_model_name(const tthrt_model *m);
const json_t *tthrt_model_metadata(const tthrt_model *m); /* borrowed */
size_t tthrt_model_workspace_size(const tthrt_model *m);

size_t tthrt_model_input_count(const tthrt_model *m);
const tthrt_tensor_info *tthrt_model_input(const tthrt_model *m, size_t i);
size_t tthrt_model_output_count(const tthrt_model *m);
const tthrt_tensor_info *tthrt_model_output(const tthrt_model *m, size_t i);
/* Index of the input/output with that ONNX name (or C name), or -1. */
int tthrt_model_find_input(const tthrt_model *m, const char *name);
int tthrt_model_find_output(const tthrt_model *m, const char *name);

/* Bind an input by name: dtype and shape must match exactly (a rank-0 input also takes a
 * one-element array; a bfloat16 input also takes uint16, its bits, as NumPy users and ONNX's test
 * data carry bfloat16). The data is copied. Errors name the input, what it expects and what was
 * given. */
int tthrt_model_bind(tthrt_model *m, const char *name, const tthrt_array *a, tth_diag *diag);
/* Load a file (tthrt_array_load) and bind it. */
int tthrt_model_bind_file(tthrt_model *m, const char *name, const char *path, tth_diag *diag);

/* Run `repeat` times (at least once). Every input must be bound. timing may be NULL. A non-zero
 * status from the generated code is an error. */
int tthrt_model_run(tthrt_model *m, int repeat, tthrt_timing *timing, tth_diag *diag);

/* A profiling artifact (compiled with options.profile, docs/profiling.md): the calls its entry
 * times, in metadata.json's "profile"."calls" order (0 for an ordinary artifact); per call, the
 * nanoseconds and the count summed since the model was opened or last reset (read copies at most
 * n and returns how many; calls may be NULL). One run at a time. */
size_t tthrt_model_profile_calls(const tthrt_model *m);
size_t tthrt_model_profile_read(const tthrt_model *m, uint64_t *ns, uint64_t *calls, size_t n);
void tthrt_model_profile_reset(tthrt_model *m);

/* Output i after a run, as an array view (data borrowed from the model; name is the ONNX name). */
int tthrt_model_output_array(const tthrt_model *m, size_t i, tthrt_array *view, tth_diag *diag);

/* Write `<output name>.npy` for every output into dir (created if missing), `<output name>.pb`
 * (a TensorProto) for a bfloat16 one, which .npy cannot hold. Characters of an
 * ONNX name that cannot appear in a file name ('/', NUL) are written as '_'. If paths is not
 * NULL it receives a new JSON array of the written paths. */
int tthrt_model_write_outputs(const tthrt_model *m, const char *dir, json_t **paths,
                              tth_diag *diag);

#ifdef __cplusplus
}
#endif
#endif
