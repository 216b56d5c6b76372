/* ethosn.h: the ethos-n plugin's internal interface. */
#ifndef TTH_ETHOSN_H
#define TTH_ETHOSN_H

#include <stddef.h>

#include <tth/relay.h>

/* The partition rule for one call of fn: 1 yes, 0 no (reason in why), negative TTH_E* on error. */
int ethosn_supports(const tth_relay_function *fn, const tth_rexpr *call, char *why, size_t len);

/* The blob format (FORMAT.md). */
#define ETHOSN_BLOB_MAGIC "TTHEN78\0"
#define ETHOSN_BLOB_VERSION 1u

/* What a generated entry returns at run time: no Ethos-N driver in this build (TTH_EUNSUPPORTED). */
#define ETHOSN_RUNTIME_NO_DRIVER (-10)

#endif
