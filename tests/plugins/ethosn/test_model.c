/* The Ethos-N78 functional model (plugins/ethosn/model) on its own, against model_cases.py: every
 * operator's networks (written by the Python script from FORMAT.md, not by the plugin) give numpy's
 * outputs; the constants come as pointers or out of a parameters file; networks broken on purpose
 * get their exact status and reason; every prefix of a network is "truncated"; every byte flipped
 * three ways gives a status of the header (or a valid run) and never an out-of-bounds access (the
 * CI runs this under AddressSanitizer) nor a write to an output after a failure. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../plugins/ethosn/model/ethosn_model.h"
#include "helpers.h"

static char dir[256];
static json_t *manifest;

static void setup(void)
{
    char cmd[1024];
    test_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/plugins/ethosn/model_cases.py %s", getenv("TTH_SOURCE_ROOT"), dir);
    cr_assert_eq(test_run(cmd), 0, "%s", cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_error_t je;
    manifest = json_load_file(path, 0, &je);
    cr_assert(manifest, "%s: %s", path, je.text);
}

static void teardown(void)
{
    json_decref(manifest);
    test_rmtree(dir);
}

TestSuite(ethosn_model, .init = setup, .fini = teardown, .timeout = 600);

static uint8_t *load(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *b = test_read_file(path, len);
    cr_assert(b, "cannot read %s", path);
    return b;
}

/* One case's buffers, loaded from its files. */
typedef struct rcase {
    const char *name;
    uint8_t *net, *params;
    size_t net_len, params_len;
    size_t nin, nout, nconst;
    void *in[8], *out[8], *want[8];
    const void *consts[64];
    size_t in_bytes[8], out_bytes[8], const_bytes[64];
    const char *dtype[8];
    int tolerance[8];
} rcase;

static void case_load(const json_t *c, rcase *r)
{
    memset(r, 0, sizeof *r);
    r->name = json_string_value(json_object_get(c, "name"));
    r->net = load(json_string_value(json_object_get(c, "network")), &r->net_len);
    r->params = load(json_string_value(json_object_get(c, "params")), &r->params_len);
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(c, "inputs"), i, v)
        r->in[r->nin] = load(json_string_value(v), &r->in_bytes[r->nin]), r->nin++;
    json_array_foreach(json_object_get(c, "constants"), i, v) {
        if (json_is_string(v))
            r->consts[r->nconst] = load(json_string_value(v), &r->const_bytes[r->nconst]);
        r->nconst++;
    }
    json_array_foreach(json_object_get(c, "outputs"), i, v) {
        r->want[r->nout] = load(json_string_value(json_object_get(v, "file")), &r->out_bytes[r->nout]);
        r->out[r->nout] = malloc(r->out_bytes[r->nout] ? r->out_bytes[r->nout] : 1);
        r->dtype[r->nout] = json_string_value(json_object_get(v, "dtype"));
        r->tolerance[r->nout] = (int)json_integer_value(json_object_get(v, "tolerance"));
        r->nout++;
    }
}

/* Case i of the manifest loaded into r (case_free after it); 0 past the last case. */
static int case_at(size_t i, rcase *r)
{
    const json_t *c = json_array_get(json_object_get(manifest, "cases"), i);
    if (c)
        case_load(c, r);
    return c != NULL;
}

static void case_free(rcase *r)
{
    free(r->net);
    free(r->params);
    for (size_t i = 0; i < r->nin; i++)
        free(r->in[i]);
    for (size_t i = 0; i < r->nout; i++) {
        free(r->out[i]);
        free(r->want[i]);
    }
    for (size_t i = 0; i < r->nconst; i++)
        free((void *)r->consts[i]);
}

static ethosn_model_io case_io(rcase *r, const void *const *consts)
{
    ethosn_model_io io = {(const void *const *)r->in, r->in_bytes, r->nin, r->out, r->out_bytes, r->nout,
                          consts ? consts : r->consts, r->const_bytes, r->nconst, NULL, 0};
    return io;
}

static long element(const void *p, const char *dtype, size_t i)
{
    if (!strcmp(dtype, "int8"))
        return ((const int8_t *)p)[i];
    if (!strcmp(dtype, "uint8"))
        return ((const uint8_t *)p)[i];
    int32_t v;
    memcpy(&v, (const uint8_t *)p + 4 * i, 4);
    return v;
}

/* every output within the case's tolerance of numpy's */
static void compare(const rcase *r, const char *how)
{
    for (size_t k = 0; k < r->nout; k++) {
        size_t es = !strcmp(r->dtype[k], "int32") ? 4 : 1;
        cr_assert(!strcmp(r->dtype[k], "int8") || !strcmp(r->dtype[k], "uint8") || es == 4);
        for (size_t i = 0; i < r->out_bytes[k] / es; i++) {
            long got = element(r->out[k], r->dtype[k], i), want = element(r->want[k], r->dtype[k], i);
            cr_assert(labs(got - want) <= r->tolerance[k], "%s (%s): output %zu element %zu is %ld, numpy says %ld", r->name,
                      how, k, i, got, want);
        }
    }
}

Test(ethosn_model, every_operator_matches_numpy)
{
    size_t i;
    int inexact = 0;
    rcase r;
    for (i = 0; case_at(i, &r); i++) {
        char why[512];
        ethosn_model_info info;
        cr_assert_eq(ethosn_model_check(r.net, r.net_len, &info, why, sizeof why), 0, "%s: %s", r.name, why);
        cr_assert_eq(info.format_version, 2);
        cr_assert_eq(info.ninputs, r.nin, "%s", r.name);
        cr_assert_eq(info.noutputs, r.nout, "%s", r.name);
        cr_assert_eq(info.nconstants, r.nconst, "%s", r.name);
        cr_assert_eq(info.tops, 4);
        /* the model allocating its scratch */
        ethosn_model_io io = case_io(&r, NULL);
        cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), 0, "%s: %s", r.name, why);
        compare(&r, "malloc'd scratch");
        for (size_t k = 0; k < r.nout; k++)
            inexact += memcmp(r.out[k], r.want[k], r.out_bytes[k]) != 0;
        /* the caller's scratch of exactly the size check gave; one byte less is refused */
        void *scratch = aligned_alloc(16, (info.scratch_bytes + 15) / 16 * 16);
        for (size_t k = 0; k < r.nout; k++)
            memset(r.out[k], 0x5a, r.out_bytes[k]);
        io.scratch = scratch;
        io.scratch_bytes = info.scratch_bytes;
        cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), 0, "%s: %s", r.name, why);
        compare(&r, "the caller's scratch");
        io.scratch_bytes = info.scratch_bytes - 1;
        cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), ETHOSN_MODEL_E_NOMEM, "%s", r.name);
        cr_assert(strstr(why, "scratch buffer"), "%s", why);
        free(scratch);
        case_free(&r);
    }
    cr_assert_geq(i, 40, "model_cases.py wrote only %zu cases", i);
    /* the tolerance is for rare rounding differences, not a habit */
    cr_assert_leq(inexact, 6, "%d cases differ from numpy at all", inexact);
}

Test(ethosn_model, constants_from_a_parameters_file)
{
    size_t i;
    rcase r;
    for (i = 0; case_at(i, &r); i++) {
        const void *data[64];
        size_t bytes[64];
        char why[512];
        cr_assert_eq(ethosn_model_find_constants(r.net, r.net_len, r.params, r.params_len, "ethos-n.", data, bytes,
                                                 r.nconst, why, sizeof why), 0, "%s: %s", r.name, why);
        for (size_t k = 0; k < r.nconst; k++) {
            cr_assert_eq(data[k] != NULL, r.consts[k] != NULL, "%s: constant %zu", r.name, k);
            if (data[k]) {
                cr_assert_eq(bytes[k], r.const_bytes[k]);
                cr_assert_eq(memcmp(data[k], r.consts[k], bytes[k]), 0, "%s: constant %zu's bytes", r.name, k);
                cr_assert_eq(((uintptr_t)data[k] - (uintptr_t)r.params) % 64, 0, "data is 64-aligned in the file");
            }
        }
        cr_assert_eq(ethosn_model_check_constants(r.net, r.net_len, data, bytes, r.nconst, why, sizeof why), 0, "%s",
                     why);
        ethosn_model_io io = case_io(&r, data);
        io.constant_bytes = bytes;
        cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), 0, "%s: %s", r.name, why);
        compare(&r, "constants from the parameters file");
        case_free(&r);
    }
}

static const json_t *find_case(const char *name)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(manifest, "cases"), i, c)
        if (!strcmp(json_string_value(json_object_get(c, "name")), name))
            return c;
    cr_assert_fail("no case %s", name);
    return NULL;
}

Test(ethosn_model, parameters_file_errors)
{
    rcase r;
    case_load(find_case("conv3x3_int8"), &r);
    const void *data[64];
    size_t bytes[64];
    char why[512];
    /* another prefix: not found */
    cr_assert_eq(ethosn_model_find_constants(r.net, r.net_len, r.params, r.params_len, "cmsis-nn.", data, bytes,
                                             r.nconst, why, sizeof why), ETHOSN_MODEL_E_PARAMETERS);
    cr_assert(strstr(why, "the parameters file has no 'cmsis-nn.t_const0'"), "%s", why);
    /* every truncation of the file */
    for (size_t n = 0; n < r.params_len; n++) {
        int32_t st = ethosn_model_find_constants(r.net, r.net_len, r.params, n, "ethos-n.", data, bytes, r.nconst,
                                                 why, sizeof why);
        cr_assert_eq(st, ETHOSN_MODEL_E_PARAMETERS, "%zu of %zu bytes: status %d", n, r.params_len, st);
    }
    /* a wrong magic, version; a dtype that differs from the network's */
    uint8_t *p = malloc(r.params_len);
    memcpy(p, r.params, r.params_len);
    p[0] = 'X';
    cr_assert_eq(ethosn_model_find_constants(r.net, r.net_len, p, r.params_len, "ethos-n.", data, bytes, r.nconst, why,
                                             sizeof why), ETHOSN_MODEL_E_PARAMETERS);
    cr_assert(strstr(why, "TTHPARAM"), "%s", why);
    memcpy(p, r.params, r.params_len);
    p[8] = 2;
    cr_assert_eq(ethosn_model_find_constants(r.net, r.net_len, p, r.params_len, "ethos-n.", data, bytes, r.nconst, why,
                                             sizeof why), ETHOSN_MODEL_E_PARAMETERS);
    cr_assert(strstr(why, "version 2"), "%s", why);
    memcpy(p, r.params, r.params_len);
    /* the second entry (the first is host.something_else) is t_const0, the weights: make it uint8 */
    char *at = memmem(p, r.params_len, "ethos-n.t_const0", 16);
    cr_assert(at);
    at[16] = 8;
    cr_assert_eq(ethosn_model_find_constants(r.net, r.net_len, p, r.params_len, "ethos-n.", data, bytes, r.nconst, why,
                                             sizeof why), ETHOSN_MODEL_E_PARAMETERS);
    cr_assert(strstr(why, "parameter 'ethos-n.t_const0' is not int8[4, 8, 3, 3]"), "%s", why);
    free(p);
    /* a wrong count of slots */
    cr_assert_eq(ethosn_model_find_constants(r.net, r.net_len, r.params, r.params_len, "ethos-n.", data, bytes,
                                             r.nconst - 1, why, sizeof why), ETHOSN_MODEL_E_ARGUMENT);
    case_free(&r);
}

Test(ethosn_model, buffers_checked)
{
    rcase r;
    case_load(find_case("qdq_add"), &r);
    char why[512];
    ethosn_model_io io = case_io(&r, NULL);
    io.ninputs = 1;
    cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), ETHOSN_MODEL_E_ARGUMENT);
    cr_assert_str_eq(why, "1 inputs and 1 outputs given; the network takes 2 and makes 1");
    io = case_io(&r, NULL);
    size_t small[2] = {r.in_bytes[0], r.in_bytes[1] - 1};
    io.input_bytes = small;
    cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), ETHOSN_MODEL_E_ARGUMENT);
    cr_assert_str_eq(why, "input 1: 64 bytes expected");
    io = case_io(&r, NULL);
    void *none[1] = {NULL};
    io.outputs = none;
    cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), ETHOSN_MODEL_E_ARGUMENT);
    cr_assert_eq(ethosn_model_run(r.net, r.net_len, NULL, why, sizeof why), ETHOSN_MODEL_E_ARGUMENT);
    cr_assert_eq(ethosn_model_run(NULL, 0, &io, why, sizeof why), ETHOSN_MODEL_E_ARGUMENT);
    case_free(&r);

    /* constants: one missing, one of the wrong size, the wrong count */
    case_load(find_case("conv3x3_int8"), &r);
    cr_assert(r.consts[0], "the weights are stored outside");
    const void *consts[64];
    memcpy(consts, r.consts, sizeof consts);
    consts[0] = NULL;
    io = case_io(&r, consts);
    cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), ETHOSN_MODEL_E_CONSTANT);
    cr_assert_str_eq(why, "constant 0 (t_const0) is missing: it needs 288 bytes, 0 given");
    cr_assert_eq(ethosn_model_check_constants(r.net, r.net_len, consts, r.const_bytes, r.nconst, why, sizeof why),
                 ETHOSN_MODEL_E_CONSTANT);
    size_t sizes[64];
    memcpy(sizes, r.const_bytes, sizeof sizes);
    sizes[0] = 287;
    io = case_io(&r, NULL);
    io.constant_bytes = sizes;
    cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), ETHOSN_MODEL_E_CONSTANT);
    cr_assert_str_eq(why, "constant 0 (t_const0) is of the wrong size: it needs 288 bytes, 287 given");
    io = case_io(&r, NULL);
    io.nconstants = r.nconst + 1;
    cr_assert_eq(ethosn_model_run(r.net, r.net_len, &io, why, sizeof why), ETHOSN_MODEL_E_CONSTANT);
    case_free(&r);
}

Test(ethosn_model, broken_networks_get_their_status)
{
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(manifest, "broken"), i, b) {
        size_t len;
        uint8_t *net = load(json_string_value(json_object_get(b, "file")), &len);
        char why[512];
        int32_t want = (int32_t)json_integer_value(json_object_get(b, "status"));
        int32_t st = ethosn_model_check(net, len, NULL, why, sizeof why);
        cr_assert_eq(st, want, "%s: status %d, want %d (%s)", json_string_value(json_object_get(b, "name")), st, want,
                     why);
        cr_assert(strstr(why, json_string_value(json_object_get(b, "why"))), "%s: '%s' does not say '%s'",
                  json_string_value(json_object_get(b, "name")), why, json_string_value(json_object_get(b, "why")));
        free(net);
    }
    cr_assert_geq(i, 20);
}

Test(ethosn_model, every_prefix_is_truncated)
{
    size_t i;
    rcase r;
    for (i = 0; case_at(i, &r); i++) {
        char why[512];
        for (size_t n = 0; n < r.net_len; n++) {
            /* a copy of exactly n bytes, so that a read past it is an ASan report */
            uint8_t *p = malloc(n ? n : 1);
            memcpy(p, r.net, n);
            int32_t st = ethosn_model_check(p, n, NULL, why, sizeof why);
            cr_assert_eq(st, ETHOSN_MODEL_E_TRUNCATED, "%s cut at %zu of %zu bytes: status %d (%s)", r.name, n,
                         r.net_len, st, why);
            free(p);
        }
        case_free(&r);
    }
}

/* statuses a damaged network may get (a flip can also leave a valid network, e.g. in a scale) */
static int known_status(int32_t st)
{
    return st == 0 || st == ETHOSN_MODEL_E_MAGIC || st == ETHOSN_MODEL_E_VERSION || st == ETHOSN_MODEL_E_TRUNCATED ||
           st == ETHOSN_MODEL_E_CORRUPT || st == ETHOSN_MODEL_E_UNSUPPORTED || st == ETHOSN_MODEL_E_CONSTANT ||
           st == ETHOSN_MODEL_E_ARGUMENT || st == ETHOSN_MODEL_E_NOMEM;
}

Test(ethosn_model, every_byte_flipped)
{
    static const char *const names[] = {"conv_uint8_stride2_same_per_channel", "int8_concat_split_tuple",
                                        "uint8_resize_linear_half_pixel_round_prefer_floor", "qdq_concatenate",
                                        "avg_pool_3x3_same_count_pad", "fully_connected_int8"};
    static const uint8_t flips[] = {0x01, 0x80, 0xff};
    int counts[4] = {0}; /* ok, structure (magic/version/truncated/corrupt), unsupported, other */
    for (size_t c = 0; c < sizeof names / sizeof names[0]; c++) {
        rcase r;
        case_load(find_case(names[c]), &r);
        uint8_t *p = malloc(r.net_len);
        for (size_t at = 0; at < r.net_len; at++)
            for (size_t f = 0; f < sizeof flips; f++) {
                memcpy(p, r.net, r.net_len);
                p[at] ^= flips[f];
                for (size_t k = 0; k < r.nout; k++)
                    memset(r.out[k], 0xa5, r.out_bytes[k]);
                char why[512];
                ethosn_model_io io = case_io(&r, NULL);
                int32_t st = ethosn_model_run(p, r.net_len, &io, why, sizeof why);
                cr_assert(known_status(st), "%s, byte %zu ^ 0x%02x: status %d", r.name, at, flips[f], st);
                counts[st == 0 ? 0 : st == ETHOSN_MODEL_E_UNSUPPORTED ? 2 : st >= ETHOSN_MODEL_E_CORRUPT ? 1 : 3]++;
                if (st != 0)
                    for (size_t k = 0; k < r.nout; k++)
                        for (size_t b = 0; b < r.out_bytes[k]; b++)
                            cr_assert_eq(((uint8_t *)r.out[k])[b], 0xa5, "%s, byte %zu ^ 0x%02x: status %d but "
                                         "output %zu was written", r.name, at, flips[f], st, k);
            }
        free(p);
        case_free(&r);
    }
    /* most flips break the structure; some only change a value */
    cr_assert_gt(counts[1], counts[0], "structure %d, valid %d", counts[1], counts[0]);
    cr_assert_gt(counts[0], 0);
}

Test(ethosn_model, status_texts)
{
    for (int32_t st = ETHOSN_MODEL_E_PARAMETERS; st <= ETHOSN_MODEL_E_MAGIC; st++) {
        const char *t = ethosn_model_status_text(st);
        cr_assert(t && *t, "status %d has no text", st);
        for (int32_t o = st + 1; o <= ETHOSN_MODEL_E_MAGIC; o++)
            cr_assert_str_neq(t, ethosn_model_status_text(o));
    }
    cr_assert_null(ethosn_model_status_text(-10));
    cr_assert_null(ethosn_model_status_text(-100));
    cr_assert_null(ethosn_model_status_text(-111));
}
