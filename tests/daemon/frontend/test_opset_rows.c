/* The ONNX operator table (daemon/frontend/onnx_ops.c and the onnx_<family>.c files; docs/operators.md,
 * "The operator table"): every operator's rows are consecutive and ordered by since-version, and
 * a node is imported or refused by the row of the model's opset. */
#include <criterion/criterion.h>

#include "fe_test.h"
#include "onnx_import.h"

/* Each table's rows: names in one run per operator (no operator in two places), since-versions
 * from 1, strictly increasing within an operator and not past the newest opset (so every range
 * is at least one version), and a refusal text exactly on the rows without importer. */
static void check_domain(int training, int64_t newest)
{
    const char *seen[512];
    size_t nseen = 0, rows = 0;
    for (size_t t = 0; tth__onnx_table(training, t); t++) {
        const tth_onnx_op *r = tth__onnx_table(training, t);
        for (size_t i = 0; r[i].name; i++, rows++) {
            int first = i == 0 || strcmp(r[i - 1].name, r[i].name);
            cr_assert(r[i].since >= 1 && r[i].since <= newest, "%s: row from %d", r[i].name, r[i].since);
            cr_assert((r[i].fn == NULL) == (r[i].refusal != NULL), "%s %d: an importer or a refusal, not both",
                      r[i].name, r[i].since);
            if (!first)
                cr_assert_gt(r[i].since, r[i - 1].since, "%s: row %d after row %d", r[i].name, r[i].since,
                             r[i - 1].since);
            if (first) {
                for (size_t k = 0; k < nseen; k++)
                    cr_assert(strcmp(seen[k], r[i].name), "%s has rows in two places", r[i].name);
                cr_assert_lt(nseen, sizeof seen / sizeof seen[0]);
                seen[nseen++] = r[i].name;
            }
        }
    }
    cr_assert_gt(rows, training ? 3 : 150, "%zu rows", rows);
}

Test(opset_rows, rows_are_consecutive_and_ordered)
{
    check_domain(0, TTH_ONNX_MAX_OPSET);
    check_domain(1, 1);
}

/* A one-node model `op` at `opset` on a [1, 4] input; the import's code, message and hint. */
static int import_one(const char *op, int64_t opset, tth_diag *d)
{
    ob b;
    ob_init(&b, opset);
    int64_t dims[2] = {1, 4};
    ob_input(&b, "x", dims, 2);
    ob_node(&b, op, "n1", "x", "y");
    ob_output(&b, "y");
    size_t len;
    uint8_t *bytes = ob_done(&b, &len);
    int rc;
    tth_relay_module_free(fe_try_import(bytes, len, "t", d, &rc));
    free(bytes);
    return rc;
}

/* A node of op in a model of opset: the code its import gives, its message and hint */
typedef struct row_case {
    const char *op;
    int64_t opset;
    int rc;
    const char *message, *hint;
} row_case;

/* Each refusal says what and where: an operator before ONNX defines it, a range refused on
 * purpose, and the same operators at an opset their rows import. */
Test(opset_rows, a_node_is_imported_or_refused_by_the_row_of_its_opset)
{
    static const row_case cases[] = {
        {"Gelu", 17, TTH_EMODEL, "operator 'Gelu' is not in opset 17: ONNX defines it from opset 20",
         "export the model with opset 20 or later"},
        {"Gelu", 20, 0, NULL, NULL},
        {"Mish", 17, TTH_EMODEL, "operator 'Mish' is not in opset 17: ONNX defines it from opset 18", NULL},
        {"Mish", 18, 0, NULL, NULL},
        {"Acos", 6, TTH_EMODEL, "operator 'Acos' is not in opset 6: ONNX defines it from opset 7", NULL},
        {"Acos", 7, 0, NULL, NULL},
        {"Upsample", 11, TTH_EUNSUPPORTED,
         "Upsample is deprecated from opset 10: Resize replaces it (the model imports opset 11)", NULL},
        {"Softmax", 1, 0, NULL, NULL},
        {"Softmax", 12, 0, NULL, NULL},
        {"Softmax", 21, 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tth_diag d;
        int rc = import_one(cases[i].op, cases[i].opset, &d);
        cr_assert_eq(rc, cases[i].rc, "%s at opset %lld: %d (%s)", cases[i].op, (long long)cases[i].opset, rc,
                     d.message);
        if (!cases[i].message)
            continue;
        cr_assert_str_eq(d.message, cases[i].message);
        char where[64];
        snprintf(where, sizeof where, "node 'n1' (%s)", cases[i].op);
        cr_assert_str_eq(d.location, where);
        if (cases[i].hint)
            cr_assert_str_eq(d.hint, cases[i].hint);
    }
}
