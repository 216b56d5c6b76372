/* scratch.h: the size of the cmsis_nn_context buffer each CMSIS-NN call needs, by CPU features
 * (docs/cmsisnn.md, "Scratch buffer sizes"), so the buffer is a LOCAL TIR buffer the memory
 * planner places. A size of 0 means ctx = {NULL, 0}. */
#ifndef TTH_CMSISNN_SCRATCH_H
#define TTH_CMSISNN_SCRATCH_H

#include <stdint.h>

#include "pattern.h"

typedef struct cn_features {
    int dsp; /* has_dsp */
    int mve; /* has_mve */
} cn_features;

int64_t cn_scratch_bytes(const cn_match *m, cn_features f);

#endif
