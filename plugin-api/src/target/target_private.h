/* target_private.h: what the files of the target system share (not installed). */
#ifndef TTH_TARGET_PRIVATE_H
#define TTH_TARGET_PRIVATE_H

#include <stddef.h>
#include <jansson.h>

#include "tth/target.h"

/* Attributes every kind has (docs/targets.md, "The canonical form"), with their types. "kind" is the
 * first word / the "kind" field and is not in this table; "features" is reserved for parsers. */
typedef struct tth__common_attr {
    const char *name;
    tth_attr_type type;
} tth__common_attr;
extern const tth__common_attr tth__common_attrs[];
extern const size_t tth__n_common_attrs;

/* The type of attribute `name` for kind `d` (common or declared), or 0 when it has none. */
int tth__attr_type(const tth_plugin_descriptor *d, const char *name);

/* A tag by canonical name or alias, and the plugin defining it; NULL when unknown. */
const tth_tag_def *tth__find_tag(const tth_registry *reg, const char *name, const tth_plugin **plugin);

/* Names to suggest from: what = 1 kinds, 2 tags and aliases, 3 both. A malloc'd array of borrowed
 * strings (free only the array); NULL with *n = 0 when there are none or memory ran out. */
const char **tth__collect_names(const tth_registry *reg, int what, size_t *n);

/* Set the hint to "did you mean ...?" for the nearest candidates, or to fallback (may be NULL). */
void tth__hint_nearest(tth_diag *d, const char *word, const char *const *candidates, size_t n,
                       const char *fallback);

/* Report an unknown kind/tag name as it appears in `where` (a token or a JSON field). */
int tth__unknown_kind_or_tag(const tth_registry *reg, const char *name, const char *where,
                             tth_diag *d);

/* The string form to the input JSON of tth_target_from_json (not yet canonical): values are typed
 * by the schema of the kinds named, a composite's shared attributes are distributed to the
 * members that declare them, and a host stays a string. NULL with d filled on error. */
json_t *tth__string_to_input(const tth_registry *reg, const char *text, tth_diag *d);

/* Check a value against an attribute type and return the normalized value (new reference):
 * a STRING_ARRAY given as one string "a,b" becomes ["a","b"]. `where` names the offending text.
 * kind names the kind for messages. */
json_t *tth__check_value(const char *kind, const char *name, tth_attr_type type, const json_t *v,
                         tth_diag *d);

/* "an integer", "a list of strings", ... for messages. */
const char *tth__type_phrase(tth_attr_type t);

/* JSON text of v for messages (compact, truncated to fit buf). */
const char *tth__json_snippet(const json_t *v, char *buf, size_t len);

/* Remove duplicate keys, keeping the first of each. */
void tth__keys_dedupe(json_t *target);

#endif
