/* ethosn.h: the ethos-n plugin's internal interface. */
#ifndef TTH_ETHOSN_H
#define TTH_ETHOSN_H

#include <stddef.h>

#include <tth/relay.h>

/* The partition rule for one call of fn: 1 yes, 0 no (reason in why), negative TTH_E* on error
 * (TTH_EINVAL when call is not a call). */
int ethosn_supports(const tth_relay_function *fn, const tth_rexpr *call, char *why, size_t len);

/* The blob format (FORMAT.md). */
#define ETHOSN_BLOB_MAGIC "TTHEN78\0"
#define ETHOSN_BLOB_VERSION 2u

/* Attribute tags (FORMAT.md, "Attributes"). */
enum {
    ETHOSN_ATTR_INT = 1,
    ETHOSN_ATTR_REAL = 2,
    ETHOSN_ATTR_STR = 3,
    ETHOSN_ATTR_BOOL = 4,
    ETHOSN_ATTR_INTS = 5,
    ETHOSN_ATTR_REALS = 6,
    ETHOSN_ATTR_NULL = 7,
};

/* The functional model's sources, as every ethos-n module carries them (model/ethosn_model.c and
 * .h, turned into these arrays at build time by model/embed.py). */
#define ETHOSN_MODEL_C_NAME "ethosn_model.c"
#define ETHOSN_MODEL_H_NAME "ethosn_model.h"
extern const unsigned char ethosn_model_c_text[];
extern const size_t ethosn_model_c_size;
extern const unsigned char ethosn_model_h_text[];
extern const size_t ethosn_model_h_size;

#endif
