/* ethosn_model.h: tth's functional model of the Arm Ethos-N78 NPU.
 *
 * It reads a region compiled by tth's ethos-n plugin (the "tth-ethosn-network" blob, format
 * version 2, described in plugins/ethosn/FORMAT.md of tth's sources) and computes the region's
 * outputs on the CPU with the integer and float semantics docs/ethosn.md ("The functional model")
 * lists. Plain C99 with no other dependency than the C library (libm); an artifact carries this
 * file and its .c so that it builds and runs without tth.
 *
 * Every function validates the blob completely before it computes anything: the magic, the
 * version, every length, count and index against the blob's size, every type, every node's
 * arguments and attributes against its operator. A blob that fails gets one of the negative
 * statuses below and nothing is written to the outputs. `why` (when not NULL) receives a sentence
 * saying what was wrong ("node 7 (qnn.conv2d): ...").
 *
 * Memory: without a scratch buffer, ethosn_model_run mallocs two blocks (its tables; then, once
 * every node has been validated, the computed values) and frees them before it returns; with a
 * scratch buffer of at least ethosn_model_info.scratch_bytes (16-byte aligned) it allocates
 * nothing. The model keeps no state between calls; calls on distinct scratch buffers may run at
 * the same time.
 */
#ifndef ETHOSN_MODEL_H
#define ETHOSN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The network format this model reads (FORMAT.md). */
#define ETHOSN_MODEL_FORMAT_VERSION 2u

/* Statuses: 0, or one of these (distinct from tth's own error codes, -1 .. -18). */
#define ETHOSN_MODEL_OK 0
#define ETHOSN_MODEL_E_MAGIC (-101)       /* not a tth-ethosn-network blob */
#define ETHOSN_MODEL_E_VERSION (-102)     /* a format version this model does not read */
#define ETHOSN_MODEL_E_TRUNCATED (-103)   /* a field runs past the end of the blob */
#define ETHOSN_MODEL_E_CORRUPT (-104)     /* a value out of range or inconsistent */
#define ETHOSN_MODEL_E_UNSUPPORTED (-105) /* an operator or attribute the model does not compute */
#define ETHOSN_MODEL_E_UNBOUND (-106)     /* a generated entry whose constants were never bound */
#define ETHOSN_MODEL_E_CONSTANT (-107)    /* a constant not given, or of the wrong size */
#define ETHOSN_MODEL_E_ARGUMENT (-108)    /* inputs/outputs: wrong count or size, or NULL */
#define ETHOSN_MODEL_E_NOMEM (-109)       /* out of memory, or the scratch buffer is too small */
#define ETHOSN_MODEL_E_PARAMETERS (-110)  /* a parameters file that is malformed or lacks a constant */

/* What a valid network needs. */
typedef struct ethosn_model_info {
    uint32_t format_version;
    uint32_t tops, ple_ratio, sram_kib; /* the N78 configuration it was compiled for */
    uint32_t ninputs, noutputs;         /* the region's inputs and result tensors */
    uint32_t nconstants;                /* constants, numbered as in the blob (<symbol>_const<i>) */
    uint32_t nnodes;
    size_t scratch_bytes;               /* what ethosn_model_run needs as scratch */
} ethosn_model_info;

/* The buffers of one run. Sizes are in bytes and must be exactly those of the network's types.
 * constants[i] is the data of constant i when the blob stores it outside (its "inline" flag 0):
 * the row-major bytes the artifact's parameters hold under "ethos-n.<symbol>_const<i>"; entries of
 * inline constants are ignored (NULL is fine). scratch: NULL to let the model allocate. */
typedef struct ethosn_model_io {
    const void *const *inputs;
    const size_t *input_bytes;
    size_t ninputs;
    void *const *outputs;
    const size_t *output_bytes;
    size_t noutputs;
    const void *const *constants;
    const size_t *constant_bytes;
    size_t nconstants;
    void *scratch;
    size_t scratch_bytes;
} ethosn_model_io;

/* Parse and validate the whole network (no data needed). info may be NULL. */
int32_t ethosn_model_check(const void *network, size_t len, ethosn_model_info *info, char *why, size_t why_len);

/* Validate the network and the buffers, then compute the outputs. */
int32_t ethosn_model_run(const void *network, size_t len, const ethosn_model_io *io, char *why, size_t why_len);

/* Check that data/bytes (n entries, numbered as the network's constants) hold every constant the
 * network stores outside, each of its exact size. */
int32_t ethosn_model_check_constants(const void *network, size_t len, const void *const *data, const size_t *bytes,
                                     size_t n, char *why, size_t why_len);

/* Find the network's outside constants in the bytes of an artifact's parameters file (the
 * "TTHPARAM" format of the artifact's README.txt) under `prefix` + the constant's name, check each
 * one's dtype, shape and size, and point data[i] into `params` (bytes[i] its size; NULL and 0 for
 * inline constants). n must be the network's constant count. */
int32_t ethosn_model_find_constants(const void *network, size_t len, const void *params, size_t params_len,
                                    const char *prefix, const void **data, size_t *bytes, size_t n, char *why,
                                    size_t why_len);

/* A sentence for a status of this header, or NULL for any other value. */
const char *ethosn_model_status_text(int32_t status);

#ifdef __cplusplus
}
#endif
#endif
