/* standalone_build: an artifact built and run without tth, the two ways its README gives. */
#ifndef TTH_TESTS_STANDALONE_BUILD_H
#define TTH_TESTS_STANDALONE_BUILD_H

#include <jansson.h>
#include <stddef.h>

/* Extracts the artifact (model name `model`, its compile's `metadata`) into a fresh directory and
 * checks that metadata.files names exactly the files under codegen/. Then builds it twice with
 * only a C compiler: one `cc` command over the header directory and metadata.files' sources and
 * objects (-lm, and -pthread for the llvm kind's thread pool), and through the artifact's own
 * CMakeLists.txt, add_subdirectory()'d into a project whose main reads the inputs of the ONNX
 * test case in `case_dir` (test_data_set_0) as raw bytes and writes the outputs. Both programs
 * run, and every output is compared with the case's expected one (float: 1e-4 absolute plus
 * 1e-4 relative). The CMake build is skipped when cmake is missing. Fails the test otherwise. */
void standalone_build_check(const unsigned char *artifact, size_t len, const json_t *metadata,
                            const char *case_dir, const char *model);

#endif
