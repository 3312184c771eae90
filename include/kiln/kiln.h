/* Kiln's C API: compile an ONNX model for the CPU and run it, from C or any language with a C
 * FFI. It mirrors the C++ API (kiln/kiln.hpp).
 *
 *   char* err = NULL;
 *   kiln_options opts = kiln_default_options();
 *   opts.threads = 2;
 *   kiln_executable* exe = kiln_compile_onnx("model.onnx", &opts, &err);
 *   if (!exe) { fprintf(stderr, "%s\n", err); kiln_free_error(err); return 1; }
 *   kiln_tensor in = {KILN_F32, 4, dims, data};
 *   kiln_tensor* out = NULL; int n = 0;
 *   if (kiln_run(exe, &in, 1, &out, &n, &err) != 0) { ... }
 *   ... out[0].data ...
 *   kiln_free_outputs(out, n);
 *   kiln_destroy(exe);
 *
 * An executable is compiled for the input shapes it is given (dims fixed by the model or by
 * `dim_names`/`dim_values`); kiln_run may be called from several threads at once. Errors are
 * messages allocated by Kiln (free them with kiln_free_error); functions never abort. */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the values match Kiln's internal order and never change meaning. */
typedef enum kiln_dtype {
  KILN_BOOL = 0,
  KILN_I8 = 1,
  KILN_U8 = 2,
  KILN_I16 = 3,
  KILN_U16 = 4,
  KILN_I32 = 5,
  KILN_U32 = 6,
  KILN_I64 = 7,
  KILN_U64 = 8,
  KILN_F16 = 9,
  KILN_BF16 = 10,
  KILN_F32 = 11,
  KILN_F64 = 12
} kiln_dtype;

/* A dense row-major tensor. Inputs are read, never written; outputs are allocated by Kiln. */
typedef struct kiln_tensor {
  kiln_dtype dtype;
  int32_t rank;
  const int64_t* dims;
  void* data;
} kiln_tensor;

typedef struct kiln_options {
  const char* backend;   /* the target: "cpu" (default), "cuda" (an NVIDIA GPU), or "interp" (the
                            reference interpreter) */
  int32_t threads;       /* <= 0: one per hardware thread */
  int32_t opt_level;     /* 1 (default): the graph optimisation pipeline; 0: none */
  int32_t num_dims;      /* sizes of symbolic dimensions (ONNX dim_param names) */
  const char* const* dim_names;
  const int64_t* dim_values;
  const char* cache_dir; /* the compile cache directory; NULL (default): no cache */
  /* 1 (default): a run whose inputs differ from the compiled sizes in a symbolic dimension
   * compiles the model again for them (logged on stderr, kept for later runs); 0: that run fails
   * with an error naming the dimension, its size and the compiled size. */
  int32_t recompile;
  /* NULL or "f32" (default), "tf32" (matrix products and convolutions on TF32 tensor cores where
   * the backend has them), "f16" or "bf16" (values computed and stored in the low type, sums in
   * f32); inputs and outputs stay f32 either way. See docs/gpu.md for the tolerances. */
  const char* precision;
  const char* cuda_arch; /* the cuda backend's GPU architecture ("sm_90"); NULL: the GPU's */
  /* Symbolic dimensions compiled once for every size in [range_lo[i], range_hi[i]] (the cpu and
   * cuda backends; docs/cli.md "Ranges"): runs of sizes in the range compile nothing again, and
   * kiln_input_info gives such a dimension as -1. */
  int32_t num_ranges;
  const char* const* range_names;
  const int64_t* range_lo;
  const int64_t* range_hi;
  /* NULL (default), or per range: nonzero buckets it by powers of two (as --dim S=1..512:pow2):
   * a run compiles its size's bucket (1, 2, 3..4, 5..8, ...) once, not the whole range. */
  const int32_t* range_pow2;
} kiln_options;

typedef struct kiln_executable kiln_executable;

kiln_options kiln_default_options(void);

/* Compiles the ONNX model at `path`; NULL on failure with *error set. With options->cache_dir,
 * a model compiled before with the same options on this CPU loads from the cache. */
kiln_executable* kiln_compile_onnx(const char* path, const kiln_options* options, char** error);

/* Loads a .kiln artifact (`kiln compile MODEL -o OUT.kiln`) without compiling: only
 * options->threads, recompile and cache_dir apply (a recompile reads the model file the artifact
 * was compiled from). NULL on failure with *error set: a corrupted artifact, or one from
 * another Kiln version or for another CPU, is refused with a message saying so. */
kiln_executable* kiln_load_artifact(const char* path, const kiln_options* options, char** error);

/* The inputs the executable expects, in order: name, dtype, rank and dims (dims is valid as long
 * as the executable; the sizes it was compiled for, which a symbolic dimension may change). Returns -1 for an index out of range
 * and for a string input or output (strings have no kiln_dtype; kiln_run refuses them). */
int32_t kiln_num_inputs(const kiln_executable* exe);
int32_t kiln_num_outputs(const kiln_executable* exe);
int32_t kiln_input_info(const kiln_executable* exe, int32_t index, const char** name,
                        kiln_dtype* dtype, int32_t* rank, const int64_t** dims);
/* The outputs kiln_run returns, in order: name (the model's output name, also where the output
 * is a graph input or another output), dtype, rank and dims; -1 for an index out of range. A
 * dim whose size depends on the data (ONNX NonZero, Compress, Unique, NonMaxSuppression) is -1:
 * kiln_run gives it its size of that run. */
int32_t kiln_output_info(const kiln_executable* exe, int32_t index, const char** name,
                         kiln_dtype* dtype, int32_t* rank, const int64_t** dims);

/* Runs the executable: 0 on success with *outputs (an array of *num_outputs tensors, free it with
 * kiln_free_outputs), non-zero with *error set otherwise. Thread-safe. */
int32_t kiln_run(const kiln_executable* exe, const kiln_tensor* inputs, int32_t num_inputs,
                 kiln_tensor** outputs, int32_t* num_outputs, char** error);

/* Runs the executable on tensors in the GPU's memory (data: device addresses; a cuda executable
 * only): inputs and outputs of the types kiln_input_info and kiln_output_info give (outputs
 * allocated by the caller), ordered after the work issued so far on `stream` (a CUstream; NULL:
 * the default stream) and before the work issued on it later. Returns without waiting for the
 * run: nothing crosses the bus. 0 on success, non-zero with *error set otherwise. Thread-safe. */
int32_t kiln_run_device(const kiln_executable* exe, const kiln_tensor* inputs, int32_t num_inputs,
                        const kiln_tensor* outputs, int32_t num_outputs, void* stream,
                        char** error);

void kiln_free_outputs(kiln_tensor* outputs, int32_t num_outputs);
void kiln_free_error(char* error);
void kiln_destroy(kiln_executable* exe);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H */
