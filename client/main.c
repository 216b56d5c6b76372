/* main.c: tthctl's command line: the option and command tables, parsing, help, exit codes.
 *
 *   tthctl [GLOBAL OPTIONS] COMMAND [ARGS] [OPTIONS]
 *
 * Options may come before or after the command. Every command and option is a row of a
 * table below; --help texts and the "did you mean" suggestions come from the same rows. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tthproto/limits.h>

#include "tth_config.h"
#include "tthctl.h"

/* ---- options ---- */

/* X(ID, "long name", short letter or 0, "METAVAR" or NULL for a flag, "help") */
#define TTHCTL_OPTIONS(X)                                                                           \
    X(HELP,       "help",       'h', NULL,        "show help (for a command: tthctl COMMAND --help)") \
    X(VERSION,    "version",    0,   NULL,        "print tthctl's version")                         \
    X(SOCKET,     "socket",     0,   "PATH",      "the daemon's socket (default $XDG_RUNTIME_DIR/tth/tthd.sock, " \
                                                  "else /tmp/tth-$UID/tthd.sock)")                    \
    X(NO_START,   "no-start",   0,   NULL,        "do not start tthd when none answers")            \
    X(QUIET,      "quiet",      'q', NULL,        "no progress output")                             \
    X(JSON,       "json",       0,   NULL,        "print the result as JSON, for programs")         \
    X(TARGET,     "target",     't', "T",         "the target: string form, tag, or JSON object")   \
    X(OUTPUT,     "output",     'o', "OUT",       "where to write the artifact (default NAME.tar)") \
    X(NAME,       "name",       0,   "NAME",      "the model's name, a C identifier (default: the file's base name)") \
    X(DUMP_IR,    "dump-ir",    0,   "STAGE",     "print the IR after STAGE (or 'all')")            \
    X(EXPLAIN,    "explain",    0,   NULL,        "ask the daemon to explain its decisions")        \
    X(NO_CACHE,   "no-cache",   0,   NULL,        "compile even when the cache has the artifact")   \
    X(TIMINGS,    "timings",    0,   NULL,        "print where the compile's time went (stages, plugin hooks, cache)") \
    X(STREAM,     "stream",     0,   NULL,        "upload the model and receive a cache hit through the socket, as a remote client") \
    X(SHARED,     "shared",     0,   NULL,        "build a shared library for 'tthctl run' (default: when the target is this machine)") \
    X(INPUT,      "input",      'i', "NAME=FILE", "bind input NAME to a .npy or .pb tensor file (repeatable)") \
    X(BIND,       "bind",       0,   "NAME=FILE", "compile with input NAME fixed to the tensor in FILE (.npy or .pb; repeatable)") \
    X(INPUT_SHAPE, "input-shape", 0, "NAME=D,..", "the shape of input NAME where the model leaves dimensions open (repeatable)") \
    X(OUTPUT_DIR, "output-dir", 0,   "DIR",       "where to write <output>.npy (default .)")        \
    X(REPEAT,     "repeat",     0,   "N",         "run N times and report min and median latency")  \
    X(PROFILE,    "profile",    0,   NULL,        "compile: a profiling artifact (every call timed); run: print each call's time (docs/profiling.md)") \
    X(TRACE,      "trace",      0,   "FILE",      "run --profile: also write the calls as Chrome trace events (Perfetto, chrome://tracing)") \
    X(SEED,       "seed",       0,   "N",         "validate: the seed of the random inputs (default 0)") \
    X(TOLERANCE,  "tolerance",  0,   "X",         "validate: the largest difference allowed, a fraction of the output's largest magnitude (default 1e-3)") \
    X(BOARD,      "board",      0,   "BOARD",     "validate: run a Cortex-M artifact on an emulated board (mps2-an386, mps3-an547; scripts/run-cortexm)") \
    X(BOARD_ARG,  "board-arg",  0,   "ARG",       "validate --board: one more argument for scripts/run-cortexm, e.g. --board-arg=--extra-src=F.c (repeatable)")

typedef enum opt_id {
#define OPT_ENUM(id, l, s, m, h) OPT_##id,
    TTHCTL_OPTIONS(OPT_ENUM)
#undef OPT_ENUM
    OPT_COUNT
} opt_id;

typedef struct opt_spec {
    const char *name;
    char letter;
    const char *metavar;
    const char *help;
} opt_spec;

static const opt_spec options[OPT_COUNT] = {
#define OPT_ROW(id, l, s, m, h) [OPT_##id] = {l, s, m, h},
    TTHCTL_OPTIONS(OPT_ROW)
#undef OPT_ROW
};

/* Options every command takes. */
static const opt_id global_opts[] = {OPT_HELP, OPT_VERSION, OPT_SOCKET, OPT_NO_START, OPT_QUIET};
#define N_GLOBAL (sizeof global_opts / sizeof global_opts[0])

/* ---- commands ---- */

#define MAX_CMD_OPTS 14
typedef struct cmd_spec {
    const char *group;   /* "target" for "target parse"; NULL for a one-word command */
    const char *name;
    const char *args;    /* positional arguments, for the usage line */
    size_t min_pos, max_pos;
    opt_id opts[MAX_CMD_OPTS]; /* its own options, besides the global ones */
    size_t n_opts;
    const char *summary;
    const char *help;    /* more, for COMMAND --help */
    int (*run)(const tthctl_args *a, tthctl_error *err);
} cmd_spec;

static const cmd_spec commands[] = {
    {NULL, "compile", "MODEL", 1, 1,
     {OPT_TARGET, OPT_OUTPUT, OPT_NAME, OPT_JSON, OPT_DUMP_IR, OPT_EXPLAIN, OPT_NO_CACHE, OPT_TIMINGS, OPT_STREAM,
      OPT_SHARED, OPT_BIND, OPT_INPUT_SHAPE, OPT_PROFILE}, 13,
     "compile an ONNX model for a target into an artifact (.tar)",
     "Sends MODEL to tthd, receives the artifact, checks its size and XXH64 and writes it\n"
     "atomically to OUT (default NAME.tar, NAME being the model's name).\n"
     "--bind NAME=FILE makes input NAME a constant of that value (a shape, axes or a configuration\n"
     "tensor the model takes as an input); the artifact no longer has that input.\n"
     "--input-shape NAME=1,3,224,224 fixes dimensions the model leaves open (a dynamic batch).\n"
     "Example: tthctl compile examples/digits.onnx --target llvm -o digits.tar",
     tthctl_cmd_compile},
    {"target", "parse", "T", 1, 1, {OPT_JSON}, 1,
     "parse a target; print its canonical string, JSON and keys",
     "T is the string form ('llvm -mcpu=cortex-a72'), a tag ('arm/cortex-m55'), a JSON object,\n"
     "or a JSON file (@FILE or FILE.json, read by tthctl).",
     tthctl_cmd_target_parse},
    {"target", "recent", "", 0, 0, {OPT_JSON}, 1,
     "list the targets of the last compiles that succeeded, newest first",
     "Each as it was given (string, tag or JSON), with its canonical string, the model it last\n"
     "compiled, when, and how many compiles used it (from any client of this daemon; kept in its\n"
     "cache directory across restarts).",
     tthctl_cmd_target_recent},
    {NULL, "targets", "", 0, 0, {OPT_JSON}, 1,
     "list the target kinds with their attributes and hooks", NULL, tthctl_cmd_targets},
    {NULL, "tags", "", 0, 0, {OPT_JSON}, 1, "list the target tags", NULL, tthctl_cmd_tags},
    {NULL, "plugins", "", 0, 0, {OPT_JSON}, 1, "list the loaded plugins and the files refused, with why",
     NULL, tthctl_cmd_plugins},
    {NULL, "status", "", 0, 0, {OPT_JSON}, 1, "show the daemon's versions, counters, cache and workers",
     NULL, tthctl_cmd_status},
    {"cache", "clear", "", 0, 0, {OPT_JSON}, 1, "empty the daemon's artifact cache", NULL,
     tthctl_cmd_cache_clear},
    {NULL, "stop", "", 0, 0, {OPT_JSON}, 1, "stop the daemon (never starts one)",
     "Waits until the daemon has exited. Exit status 0 also when no daemon was running.", tthctl_cmd_stop},
    {NULL, "run", "ARTIFACT", 1, 1, {OPT_INPUT, OPT_OUTPUT_DIR, OPT_REPEAT, OPT_JSON, OPT_PROFILE, OPT_TRACE}, 6,
     "run an artifact on this machine (no daemon) and write its outputs as .npy",
     "Binds each --input NAME=FILE (.npy or ONNX TensorProto .pb), runs the model, prints each\n"
     "output's name, shape, dtype and first values (and the argmax of a one-row output), and\n"
     "writes <output name>.npy into the output directory. The artifact must hold a shared\n"
     "library for this machine: tthd builds one when the target is this machine (or with\n"
     "'tthctl compile --shared').\n"
     "--profile (an artifact compiled with --profile) times every call of the model over the\n"
     "--repeat runs (default 20, after one warm-up run) and prints them sorted by time: the\n"
     "function, its ONNX nodes, kind and strategy, shapes, median time and share, MACs and\n"
     "GFLOP/s; --trace FILE writes them as Chrome trace events.",
     tthctl_cmd_run},
    {NULL, "validate", "ARTIFACT MODEL", 2, 2, {OPT_INPUT, OPT_BIND, OPT_SEED, OPT_TOLERANCE, OPT_JSON, OPT_BOARD, OPT_BOARD_ARG}, 7,
     "run an artifact and a reference compile of its model on the same inputs and compare them",
     "Runs ARTIFACT (as 'tthctl run' does) and the reference: MODEL compiled by tthd for the\n"
     "target 'c' with options.reference, every operator by its generic lowering (no tiled,\n"
     "Winograd or blocked-layout kernel, no parallel loops), with the artifact's input shapes.\n"
     "Both get the same inputs: each --input NAME=FILE, the others random (normal for floats,\n"
     "0..9 for integers) from --seed. Prints, per output, the largest absolute and relative\n"
     "differences and, for a one-row output, whether the argmax agrees. An output differs when\n"
     "an element is further from the reference than --tolerance times the reference's largest\n"
     "magnitude (integers and bool: exactly equal); exit status 1 then.\n"
     "Give --bind NAME=FILE as at compile time for inputs the artifact had bound.\n"
     "--board BOARD runs a Cortex-M artifact on an emulated board instead, through\n"
     "scripts/run-cortexm ($TTH_RUN_CORTEXM, else the one of tth's source tree), with the\n"
     "reference on this machine; --board-arg passes it more arguments (docs/cortexm.md).",
     tthctl_cmd_validate},
    {NULL, "report", "ARTIFACT [PROFILE.json]", 1, 2, {OPT_OUTPUT, OPT_JSON}, 2,
     "write the compile report page of an artifact compiled with --explain",
     "Writes OUT (default ARTIFACT's name with .report.html): one self-contained HTML page with\n"
     "the target and its kinds, operators per kind, multiply-adds, parameter, workspace and code\n"
     "bytes, the per-layer table (searchable, sorted by a click on a column), the refusals, the\n"
     "partition graph and the memory plan (docs/profiling.md). PROFILE.json, the output of\n"
     "'tthctl run ARTIFACT --profile --json', adds each layer's time, share and GFLOP/s.\n"
     "Example: tthctl compile m.onnx -t llvm --explain --profile -o m.tar &&\n"
     "  tthctl run m.tar --profile --json > p.json && tthctl report m.tar p.json",
     tthctl_cmd_report},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* ---- help ---- */

static void print_opt(FILE *f, opt_id id)
{
    const opt_spec *o = &options[id];
    char head[64];
    if (o->letter)
        snprintf(head, sizeof head, "-%c, --%s%s%s", o->letter, o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
    else
        snprintf(head, sizeof head, "    --%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    fprintf(f, "  %-26s %s\n", head, o->help);
}

static void cmd_fullname(const cmd_spec *c, char *buf, size_t len)
{
    if (c->group)
        snprintf(buf, len, "%s %s", c->group, c->name);
    else
        snprintf(buf, len, "%s", c->name);
}

static void print_exit_codes(FILE *f)
{
    fprintf(f, "\nExit status:\n");
#define EXIT_ROW(name, value, text) fprintf(f, "  %d  %s\n", value, text);
    TTHCTL_EXITS(EXIT_ROW)
#undef EXIT_ROW
}

static void print_help(FILE *f)
{
    fprintf(f, "Usage: tthctl [OPTIONS] COMMAND [ARGS] [OPTIONS]\n\n"
               "The command line client of tthd, the tth compiler daemon.\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) {
        char name[64], head[96];
        cmd_fullname(&commands[i], name, sizeof name);
        snprintf(head, sizeof head, "%s %s", name, commands[i].args);
        fprintf(f, "  %-22s %s\n", head, commands[i].summary);
    }
    fprintf(f, "\nOptions of every command:\n");
    for (size_t i = 0; i < N_GLOBAL; i++)
        print_opt(f, global_opts[i]);
    fprintf(f, "\nA command that needs the daemon starts tthd (detached, exiting after 10 idle minutes)\n"
               "when none answers on the socket, unless --no-start is given.\n"
               "'tthctl COMMAND --help' shows a command's options.\n");
    print_exit_codes(f);
}

static void print_cmd_help(FILE *f, const cmd_spec *c)
{
    char name[64];
    cmd_fullname(c, name, sizeof name);
    fprintf(f, "Usage: tthctl %s %s%s[OPTIONS]\n\n%s.\n", name, c->args, *c->args ? " " : "", c->summary);
    if (c->help)
        fprintf(f, "\n%s\n", c->help);
    fprintf(f, "\nOptions:\n");
    for (size_t i = 0; i < c->n_opts; i++)
        print_opt(f, c->opts[i]);
    for (size_t i = 0; i < N_GLOBAL; i++)
        print_opt(f, global_opts[i]);
    print_exit_codes(f);
}

/* ---- parsing ---- */

static int usage_error(tthctl_error *err, const char *what, const char *word, const char *nearest)
{
    tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "%s '%s'", what, word);
    if (nearest)
        tthctl_hint(err, "did you mean '%s'?", nearest);
    else
        tthctl_hint(err, "see 'tthctl --help'");
    return -TTHCTL_EXIT_USAGE;
}

/* Is option id allowed for command c (NULL: before the command, any option; checked once the
 * command is known)? */
static int opt_allowed(const cmd_spec *c, opt_id id)
{
    for (size_t i = 0; i < N_GLOBAL; i++)
        if (global_opts[i] == id)
            return 1;
    if (!c)
        return 1;
    for (size_t i = 0; i < c->n_opts; i++)
        if (c->opts[i] == id)
            return 1;
    return 0;
}

static int unknown_option(const cmd_spec *c, const char *arg, tthctl_error *err)
{
    char cname[64] = "";
    if (c)
        cmd_fullname(c, cname, sizeof cname);
    const char *names[OPT_COUNT];
    char dashed[OPT_COUNT][40];
    size_t n = 0;
    for (int i = 0; i < OPT_COUNT; i++) {
        if (!opt_allowed(c, (opt_id)i))
            continue;
        snprintf(dashed[n], sizeof dashed[n], "--%s", options[i].name);
        names[n] = dashed[n];
        n++;
    }
    char word[128];
    snprintf(word, sizeof word, "%s", arg);
    char *eq = strchr(word, '=');
    if (eq)
        *eq = '\0';
    const char *near = tthctl_nearest(word, names, n);
    for (int i = 0; c && i < OPT_COUNT; i++)
        if (word[0] == '-' && word[1] == '-' && strcmp(word + 2, options[i].name) == 0) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "option '%s' does not apply to '%s'", word, cname);
            tthctl_hint(err, "tthctl %s --help", cname);
            return -TTHCTL_EXIT_USAGE;
        }
    return usage_error(err, "unknown option", word, near);
}

/* Store an option's value. */
static int store(tthctl_args *a, opt_id id, const char *val, tthctl_error *err)
{
    switch (id) {
    case OPT_SOCKET: a->socket = val; break;
    case OPT_NO_START: a->no_start = 1; break;
    case OPT_QUIET: a->quiet = 1; break;
    case OPT_JSON: a->json = 1; break;
    case OPT_TARGET: a->target = val; break;
    case OPT_OUTPUT: a->output = val; break;
    case OPT_NAME: a->name = val; break;
    case OPT_DUMP_IR: a->dump_ir = val; break;
    case OPT_EXPLAIN: a->explain = 1; break;
    case OPT_NO_CACHE: a->no_cache = 1; break;
    case OPT_TIMINGS: a->timings = 1; break;
    case OPT_STREAM: a->stream = 1; break;
    case OPT_SHARED: a->shared = 1; break;
    case OPT_OUTPUT_DIR: a->output_dir = val; break;
    case OPT_REPEAT: a->repeat = val; break;
    case OPT_INPUT: a->inputs[a->n_inputs++] = val; break;
    case OPT_BOARD: a->board = val; break;
    case OPT_BOARD_ARG: a->board_args[a->n_board_args++] = val; break;
    case OPT_BIND: a->binds[a->n_binds++] = val; break;
    case OPT_INPUT_SHAPE: a->shapes[a->n_shapes++] = val; break;
    case OPT_PROFILE: a->profile = 1; break;
    case OPT_TRACE: a->trace = val; break;
    case OPT_SEED: a->seed = val; break;
    case OPT_TOLERANCE: a->tolerance = val; break;
    case OPT_HELP:
    case OPT_VERSION:
    case OPT_COUNT: break;
    }
    return 0;
}

/* Parse one option at argv[*i]; advances *i past its value. */
static int parse_option(const cmd_spec *c, int argc, char **argv, int *i, tthctl_args *a, int *help,
                        int *version, int *seen, tthctl_error *err)
{
    const char *arg = argv[*i];
    const char *val = NULL;
    int id = -1;
    if (arg[1] == '-') {
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        for (int k = 0; k < OPT_COUNT; k++)
            if (strlen(options[k].name) == len && strncmp(options[k].name, name, len) == 0)
                id = k;
        if (id < 0 || !opt_allowed(c, (opt_id)id))
            return unknown_option(c, arg, err);
        if (eq) {
            if (!options[id].metavar)
                return usage_error(err, "this option takes no value:", arg, NULL);
            val = eq + 1;
        }
    } else {
        if (arg[2] != '\0')
            return usage_error(err, "unknown option", arg, NULL);
        for (int k = 0; k < OPT_COUNT; k++)
            if (options[k].letter == arg[1])
                id = k;
        if (id < 0 || !opt_allowed(c, (opt_id)id))
            return unknown_option(c, arg, err);
    }
    if (options[id].metavar && !val) {
        if (*i + 1 >= argc) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "option '--%s' needs a value %s", options[id].name,
                        options[id].metavar);
            return -TTHCTL_EXIT_USAGE;
        }
        val = argv[++*i];
    }
    seen[id] = 1;
    if (id == OPT_HELP)
        *help = 1;
    if (id == OPT_VERSION)
        *version = 1;
    return store(a, (opt_id)id, val, err);
}

/* Find the command named at argv[*i] (two words for a group); advances *i. */
static int find_command(int argc, char **argv, int *i, const cmd_spec **out, tthctl_error *err)
{
    const char *word = argv[*i];
    const char *names[N_COMMANDS];
    size_t n = 0;
    int is_group = 0;
    for (size_t k = 0; k < N_COMMANDS; k++) {
        const char *nm = commands[k].group ? commands[k].group : commands[k].name;
        if (commands[k].group && strcmp(commands[k].group, word) == 0)
            is_group = 1;
        if (!commands[k].group && strcmp(commands[k].name, word) == 0) {
            *out = &commands[k];
            (*i)++;
            return 0;
        }
        names[n++] = nm;
    }
    if (!is_group)
        return usage_error(err, "unknown command", word, tthctl_nearest(word, names, n));
    /* a group: the next word names the sub-command */
    n = 0;
    const char *sub = *i + 1 < argc ? argv[*i + 1] : NULL;
    for (size_t k = 0; k < N_COMMANDS; k++) {
        if (!commands[k].group || strcmp(commands[k].group, word) != 0)
            continue;
        if (sub && strcmp(commands[k].name, sub) == 0) {
            *out = &commands[k];
            *i += 2;
            return 0;
        }
        names[n++] = commands[k].name;
    }
    char what[64];
    if (!sub || sub[0] == '-') {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "'%s' needs a sub-command", word);
        tthctl_hint(err, "tthctl %s %s", word, names[0]);
        return -TTHCTL_EXIT_USAGE;
    }
    snprintf(what, sizeof what, "unknown '%s' sub-command", word);
    return usage_error(err, what, sub, tthctl_nearest(sub, names, n));
}

static int parse_args(int argc, char **argv, tthctl_args *a, const cmd_spec **cmd, int *help, int *version,
                      tthctl_error *err)
{
    const cmd_spec *c = NULL;
    int only_pos = 0;
    int seen[OPT_COUNT] = {0};
    for (int i = 1; i < argc;) {
        const char *arg = argv[i];
        if (!only_pos && strcmp(arg, "--") == 0) {
            only_pos = 1;
            i++;
            continue;
        }
        if (!only_pos && arg[0] == '-' && arg[1] != '\0') {
            int rc = parse_option(c, argc, argv, &i, a, help, version, seen, err);
            if (rc < 0)
                return rc;
            i++;
            continue;
        }
        if (!c) {
            if (strcmp(arg, "help") == 0) {
                /* `tthctl help [COMMAND]` */
                *help = 1;
                i++;
                if (i < argc) {
                    int rc = find_command(argc, argv, &i, &c, err);
                    if (rc < 0)
                        return rc;
                }
                continue;
            }
            int rc = find_command(argc, argv, &i, &c, err);
            if (rc < 0)
                return rc;
            continue;
        }
        a->pos[a->n_pos++] = arg;
        i++;
    }
    *cmd = c;
    if (*help || *version || !c)
        return 0;
    char name[64];
    cmd_fullname(c, name, sizeof name);
    for (int k = 0; k < OPT_COUNT; k++) {
        if (seen[k] && !opt_allowed(c, (opt_id)k)) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "option '--%s' does not apply to '%s'", options[k].name, name);
            tthctl_hint(err, "tthctl %s --help", name);
            return -TTHCTL_EXIT_USAGE;
        }
    }
    if (a->n_pos < c->min_pos) {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "'%s' needs %s", name, c->args);
        tthctl_hint(err, "tthctl %s --help", name);
        return -TTHCTL_EXIT_USAGE;
    }
    if (a->n_pos > c->max_pos) {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "'%s' takes %s%s, not '%s'", name,
                    c->max_pos ? "only " : "no arguments", c->args, a->pos[c->max_pos]);
        tthctl_hint(err, "quote an argument that contains blanks, e.g. --target 'llvm -mcpu=cortex-a72'");
        return -TTHCTL_EXIT_USAGE;
    }
    return 0;
}

/* ---- main ---- */

static void on_interrupt(int sig)
{
    (void)sig;
    tthctl_interrupted = 1;
}

int main(int argc, char **argv)
{
    tthctl_args a = {0};
    tthctl_error err = {0};
    const cmd_spec *cmd = NULL;
    int help = 0, version = 0, rc;

    /* every argument is at most one positional or one --input */
    a.pos = calloc((size_t)argc + 1, sizeof *a.pos);
    a.inputs = calloc((size_t)argc + 1, sizeof *a.inputs);
    a.board_args = calloc((size_t)argc + 1, sizeof *a.board_args);
    a.binds = calloc((size_t)argc + 1, sizeof *a.binds);
    a.shapes = calloc((size_t)argc + 1, sizeof *a.shapes);
    if (!a.pos || !a.inputs || !a.board_args || !a.binds || !a.shapes) {
        fprintf(stderr, "tthctl: error: out of memory\n");
        free(a.pos);
        free(a.inputs);
        free(a.board_args);
        free(a.binds);
        free(a.shapes);
        return TTHCTL_EXIT_FAILED;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    rc = parse_args(argc, argv, &a, &cmd, &help, &version, &err);
    if (rc < 0) {
        tthctl_error_print(stderr, &err);
    } else if (version) {
        printf("tthctl %s (protocol %s)\n", TTH_VERSION, TTHP_PROTOCOL_VERSION);
    } else if (help) {
        if (cmd)
            print_cmd_help(stdout, cmd);
        else
            print_help(stdout);
    } else if (!cmd) {
        tthctl_fail(&err, TTHCTL_EXIT_USAGE, NULL, "no command given");
        tthctl_hint(&err, "see 'tthctl --help'");
        tthctl_error_print(stderr, &err);
        rc = -TTHCTL_EXIT_USAGE;
    } else {
        rc = cmd->run(&a, &err);
        if (rc < 0) {
            tthctl_error_print(stderr, &err);
            if (a.json && err.rpc)
            {
                json_t *wrapped = json_pack("{s:O}", "error", err.rpc);
                tthctl_json_print(wrapped);
                json_decref(wrapped);
            }
        }
    }
    tthctl_error_clear(&err);
    free(a.pos);
    free(a.inputs);
    free(a.board_args);
    free(a.binds);
    free(a.shapes);
    fflush(stdout);
    return rc < 0 ? -rc : 0;
}
