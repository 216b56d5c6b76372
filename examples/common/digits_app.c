/* digits_app IMAGE: runs examples/digits.onnx, compiled at build time (by tth_add_model in
 * examples/cmake, by tth-meson-model in examples/meson), on one 8x8 image (64 float32 values,
 * raw little-endian) and prints the ten class probabilities, then the digit. */
#include <stdio.h>

#include "tth_digits.h"

static float image[TTH_DIGITS_IMAGE_SIZE / sizeof(float)], probs[TTH_DIGITS_PROBABILITIES_SIZE / sizeof(float)];
static unsigned char workspace[TTH_DIGITS_WORKSPACE_SIZE + 1]
    __attribute__((aligned(TTH_DIGITS_WORKSPACE_ALIGNMENT)));

int main(int argc, char **argv)
{
    FILE *f = argc == 2 ? fopen(argv[1], "rb") : NULL;
    if (!f || fread(image, 1, sizeof image, f) != sizeof image) {
        fprintf(stderr, "usage: digits_app IMAGE (%zu bytes of float32)\n", sizeof image);
        return 2;
    }
    fclose(f);
    struct tth_digits_inputs in = {image};
    struct tth_digits_outputs out = {probs};
    int32_t rc = tth_digits_run(&in, &out, workspace);
    if (rc != 0) {
        fprintf(stderr, "tth_digits_run failed: %d\n", (int)rc);
        return 1;
    }
    int best = 0;
    for (int i = 0; i < 10; i++) {
        printf("%.6f\n", probs[i]);
        if (probs[i] > probs[best])
            best = i;
    }
    printf("digit %d\n", best);
    return 0;
}
