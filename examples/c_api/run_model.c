/* Compiles an ONNX model with Kiln's C API (or loads a .kiln artifact of `kiln compile`), runs it
 * on inputs filled with a fixed pattern, and prints each output's shape and the sum of its
 * elements (f32 outputs).
 *
 *   run_model MODEL.onnx|MODEL.kiln [THREADS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

static size_t element_size(kiln_dtype t) {
  switch (t) {
    case KILN_BOOL: case KILN_I8: case KILN_U8: return 1;
    case KILN_I16: case KILN_U16: case KILN_F16: case KILN_BF16: return 2;
    case KILN_I32: case KILN_U32: case KILN_F32: return 4;
    default: return 8;
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.onnx|MODEL.kiln [THREADS]\n", argv[0]);
    return 2;
  }
  kiln_options options = kiln_default_options();
  if (argc > 2) options.threads = atoi(argv[2]);
  char* error = NULL;
  size_t len = strlen(argv[1]);
  int artifact = len > 5 && strcmp(argv[1] + len - 5, ".kiln") == 0;
  kiln_executable* exe = artifact ? kiln_load_artifact(argv[1], &options, &error)
                                  : kiln_compile_onnx(argv[1], &options, &error);
  if (!exe) {
    fprintf(stderr, "error: %s\n", error);
    kiln_free_error(error);
    return 1;
  }
  int32_t n = kiln_num_inputs(exe);
  kiln_tensor* inputs = calloc((size_t)n + 1, sizeof(kiln_tensor));
  for (int32_t i = 0; i < n; ++i) {
    const char* name;
    kiln_dtype dtype;
    int32_t rank;
    const int64_t* dims;
    kiln_input_info(exe, i, &name, &dtype, &rank, &dims);
    size_t count = 1;
    for (int32_t d = 0; d < rank; ++d) count *= (size_t)dims[d];
    void* data = calloc(count + 1, element_size(dtype));
    if (dtype == KILN_F32)
      for (size_t k = 0; k < count; ++k) ((float*)data)[k] = (float)(k % 7) * 0.25f - 0.75f;
    inputs[i] = (kiln_tensor){dtype, rank, dims, data};
    printf("input %s: rank %d, %zu elements\n", name, rank, count);
  }
  kiln_tensor* outputs = NULL;
  int32_t num_outputs = 0;
  int status = kiln_run(exe, inputs, n, &outputs, &num_outputs, &error);
  if (status != 0) {
    fprintf(stderr, "error: %s\n", error);
    kiln_free_error(error);
  } else {
    printf("outputs: %d\n", num_outputs);
    for (int32_t i = 0; i < num_outputs; ++i) {
      size_t count = 1;
      printf("output %d: [", i);
      for (int32_t d = 0; d < outputs[i].rank; ++d) {
        printf(d ? ",%lld" : "%lld", (long long)outputs[i].dims[d]);
        count *= (size_t)outputs[i].dims[d];
      }
      printf("]");
      if (outputs[i].dtype == KILN_F32) {
        double sum = 0;
        for (size_t k = 0; k < count; ++k) sum += ((const float*)outputs[i].data)[k];
        printf(" sum %.6f", sum);
      }
      printf("\n");
    }
    kiln_free_outputs(outputs, num_outputs);
  }
  for (int32_t i = 0; i < n; ++i) free(inputs[i].data);
  free(inputs);
  kiln_destroy(exe);
  return status == 0 ? 0 : 1;
}
