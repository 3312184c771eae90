// cuDNN convolutions. See cudnn.h. Kiln uses cuDNN's descriptor API for single convolutions
// (cuDNN 9 marks it deprecated in favour of its graph API, which fused epilogues will need).
#include "codegen/cuda/cudnn.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn.h>
#include <map>
#include <mutex>
#include <vector>

namespace kiln::codegen::cuda {
namespace {

Status check(cudnnStatus_t s, const std::string& what) {
  if (s == CUDNN_STATUS_SUCCESS) return Status::ok();
  return Status::error("cuDNN: " + what + " failed (" + cudnnGetErrorString(s) + ")");
}

// Handles, one per concurrent run: cuDNN is thread-safe only across handles, and a handle made
// once is reused (making one loads cuDNN's kernels).
class Handles {
 public:
  StatusOr<cudnnHandle_t> acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        cudnnHandle_t h = free_.back();
        free_.pop_back();
        return h;
      }
    }
    cudnnHandle_t h = nullptr;
    KILN_RETURN_IF_ERROR(check(cudnnCreate(&h), "cudnnCreate"));
    return h;
  }
  void release(cudnnHandle_t h) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(h);
  }

 private:
  std::mutex mu_;
  std::vector<cudnnHandle_t> free_;
};

Handles& handles() {
  static Handles* h = new Handles();  // never destroyed: handles outlive static destructors
  return *h;
}

struct HandleLease {
  cudnnHandle_t h = nullptr;
  ~HandleLease() {
    if (h) handles().release(h);
  }
};

cudnnDataType_t dataType(DType t) {
  if (t == DType::F16) return CUDNN_DATA_HALF;
  if (t == DType::BF16) return CUDNN_DATA_BFLOAT16;
  return CUDNN_DATA_FLOAT;
}

const char* algoName(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit precomputed gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd nonfused";
    default: return "?";
  }
}

std::vector<int> ints(std::vector<int64_t> v) { return std::vector<int>(v.begin(), v.end()); }

}  // namespace

struct Conv::Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t bias = nullptr;  // the fused call's
  cudnnActivationDescriptor_t relu = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
  bool measured = false;  // the algorithm is the fastest Find measured, not the heuristic's
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (relu) cudnnDestroyActivationDescriptor(relu);
  }
};

namespace {

Status describePlan(Conv::Plan& p, const ConvShape& c) {
  const cudnnDataType_t t = dataType(c.type);
  std::vector<int64_t> x = {c.batch, c.inFeatures}, w = {c.outFeatures, c.inFeatures / c.groups},
                       y = {c.batch, c.outFeatures};
  x.insert(x.end(), c.in.begin(), c.in.end());
  w.insert(w.end(), c.window.begin(), c.window.end());
  y.insert(y.end(), c.out.begin(), c.out.end());
  const int rank = static_cast<int>(x.size());
  // Dims are given in NCHW order whatever the layout; the format says how memory holds them.
  const cudnnTensorFormat_t format = c.channelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  KILN_RETURN_IF_ERROR(check(cudnnCreateTensorDescriptor(&p.x), "a tensor descriptor"));
  KILN_RETURN_IF_ERROR(check(cudnnCreateTensorDescriptor(&p.y), "a tensor descriptor"));
  KILN_RETURN_IF_ERROR(check(cudnnCreateFilterDescriptor(&p.w), "a filter descriptor"));
  KILN_RETURN_IF_ERROR(check(cudnnCreateConvolutionDescriptor(&p.conv), "a convolution"));
  KILN_RETURN_IF_ERROR(
      check(cudnnSetTensorNdDescriptorEx(p.x, format, t, rank, ints(x).data()), "input"));
  KILN_RETURN_IF_ERROR(
      check(cudnnSetTensorNdDescriptorEx(p.y, format, t, rank, ints(y).data()), "result"));
  KILN_RETURN_IF_ERROR(
      check(cudnnSetFilterNdDescriptor(p.w, t, format, rank, ints(w).data()), "kernel"));
  // f16 and bf16 accumulate in f32 (cuDNN's "pseudo" configurations).
  KILN_RETURN_IF_ERROR(
      check(cudnnSetConvolutionNdDescriptor(p.conv, rank - 2, ints(c.pad).data(),
                                            ints(c.stride).data(), ints(c.dilation).data(),
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "the convolution " + c.str()));
  KILN_RETURN_IF_ERROR(check(cudnnSetConvolutionGroupCount(p.conv, int(c.groups)), "groups"));
  std::vector<int> out(static_cast<size_t>(rank));
  KILN_RETURN_IF_ERROR(
      check(cudnnGetConvolutionNdForwardOutputDim(p.conv, p.x, p.w, rank, out.data()),
            "the result shape"));
  if (out != ints(y))
    return Status::error("cuDNN: the result of " + c.str() + " has another shape");
  return Status::ok();
}

// The fused call's bias (1 x C x 1 x 1 in the convolution's format and type) and relu.
Status describeEpilogue(Conv::Plan& p, const ConvShape& c) {
  std::vector<int> dims(c.in.size() + 2, 1);
  dims[1] = static_cast<int>(c.outFeatures);
  KILN_RETURN_IF_ERROR(check(cudnnCreateTensorDescriptor(&p.bias), "a tensor descriptor"));
  KILN_RETURN_IF_ERROR(check(
      cudnnSetTensorNdDescriptorEx(p.bias, c.channelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                   dataType(c.type), static_cast<int>(dims.size()), dims.data()),
      "the bias"));
  KILN_RETURN_IF_ERROR(check(cudnnCreateActivationDescriptor(&p.relu), "an activation"));
  return check(
      cudnnSetActivationDescriptor(p.relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
      "the relu");
}

// Room for every forward algorithm's result (cuDNN's count).
StatusOr<std::vector<cudnnConvolutionFwdAlgoPerf_t>> algorithmSlots(cudnnHandle_t h) {
  int count = 0;
  KILN_RETURN_IF_ERROR(
      check(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count), "the algorithm count"));
  return std::vector<cudnnConvolutionFwdAlgoPerf_t>(static_cast<size_t>(count));
}

// The first algorithm of the heuristic's ranking that runs with the math asked for and fits
// the workspace. f32 (not tf32) stays off tensor cores: cuDNN's default math would use TF32.
Status pickAlgorithm(cudnnHandle_t h, Conv::Plan& p, const ConvShape& c) {
  KILN_ASSIGN_OR_RETURN(std::vector<cudnnConvolutionFwdAlgoPerf_t> perf, algorithmSlots(h));
  const int count = static_cast<int>(perf.size());
  int found = 0;
  KILN_RETURN_IF_ERROR(check(
      cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, count, &found, perf.data()),
      "the algorithm heuristic for " + c.str()));
  const bool strict = c.type == DType::F32 && !c.tf32;
  for (int i = 0; i < found; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& r = perf[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS) continue;
    const cudnnMathType_t math = strict ? CUDNN_FMA_MATH : r.mathType;
    if (cudnnSetConvolutionMathType(p.conv, math) != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y, r.algo, &bytes) !=
            CUDNN_STATUS_SUCCESS ||
        bytes > size_t(kCallWorkspace))
      continue;
    p.algo = r.algo;
    p.math = math;
    p.workspace = bytes;
    return Status::ok();
  }
  return Status::error("cuDNN has no algorithm for " + c.str() + " within " +
                       std::to_string(kCallWorkspace >> 20) + " MiB of workspace");
}

// An algorithm cuDNN measured for a shape, kept for the process: Find runs every algorithm.
struct Measured {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
  size_t workspace;
};

std::mutex measuredMu;
std::map<std::string, Measured>& measuredAlgorithms() {
  static auto* m = new std::map<std::string, Measured>();
  return *m;
}

// Tensor-core math (tf32, f16, bf16) takes the fastest algorithm cuDNN's Find measures on this
// GPU (that fits the workspace): its heuristic's first choice ran 3x slower on resnet50's 3x3
// convolutions at batch 64 in f16. Strict f32 keeps the heuristic's (FMA units either way).
Status measureAlgorithm(cudnnHandle_t h, Conv::Plan& p, const ConvShape& c) {
  const std::string key = c.str();
  std::lock_guard<std::mutex> lock(measuredMu);
  auto known = measuredAlgorithms().find(key);
  if (known == measuredAlgorithms().end()) {
    // A handle from the pool may still name the stream of a program that is gone.
    KILN_RETURN_IF_ERROR(check(cudnnSetStream(h, nullptr), "cudnnSetStream"));
    KILN_RETURN_IF_ERROR(
        check(cudnnSetConvolutionMathType(p.conv, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION),
              "the math type"));
    KILN_ASSIGN_OR_RETURN(std::vector<cudnnConvolutionFwdAlgoPerf_t> perf, algorithmSlots(h));
    int found = 0;
    KILN_RETURN_IF_ERROR(check(cudnnFindConvolutionForwardAlgorithm(h, p.x, p.w, p.conv, p.y,
                                                                    static_cast<int>(perf.size()),
                                                                    &found, perf.data()),
                               "measuring the algorithms of " + c.str()));
    for (int i = 0; i < found && known == measuredAlgorithms().end(); ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& r = perf[static_cast<size_t>(i)];
      if (r.status == CUDNN_STATUS_SUCCESS && r.memory <= size_t(kCallWorkspace))
        known = measuredAlgorithms().emplace(key, Measured{r.algo, r.mathType, r.memory}).first;
    }
    if (known == measuredAlgorithms().end())
      return Status::error("cuDNN measured no algorithm for " + c.str() + " within " +
                           std::to_string(kCallWorkspace >> 20) + " MiB of workspace");
  }
  KILN_RETURN_IF_ERROR(
      check(cudnnSetConvolutionMathType(p.conv, known->second.math), "the math type"));
  p.algo = known->second.algo;
  p.math = known->second.math;
  p.workspace = known->second.workspace;
  p.measured = true;
  return Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<Conv>> Conv::create(const ConvShape& shape, const ConvEpilogue& epilogue,
                                             int zArg, int biasArg) {
  std::unique_ptr<Conv> conv(new Conv());
  conv->shape_ = shape;
  conv->epilogue_ = epilogue;
  conv->zArg_ = zArg;
  conv->biasArg_ = biasArg;
  if (epilogue.taken && (biasArg < 0 || (epilogue.residual >= 0) != (zArg >= 0)))
    return Status::error("cuDNN: the fused convolution " + shape.str() + " lacks an operand");
  conv->plan_ = std::make_unique<Plan>();
  KILN_RETURN_IF_ERROR(describePlan(*conv->plan_, shape));
  if (epilogue.taken) KILN_RETURN_IF_ERROR(describeEpilogue(*conv->plan_, shape));
  HandleLease lease;
  KILN_ASSIGN_OR_RETURN(lease.h, handles().acquire());
  const bool tensorCores = shape.type != DType::F32 || shape.tf32;
  if (!tensorCores || !measureAlgorithm(lease.h, *conv->plan_, shape).isOk())
    KILN_RETURN_IF_ERROR(pickAlgorithm(lease.h, *conv->plan_, shape));
  return conv;
}

Conv::~Conv() = default;

Status Conv::run(const DevicePtr* args, DevicePtr workspace, Stream stream) const {
  HandleLease lease;
  KILN_ASSIGN_OR_RETURN(lease.h, handles().acquire());
  KILN_RETURN_IF_ERROR(
      check(cudnnSetStream(lease.h, static_cast<cudaStream_t>(stream)), "cudnnSetStream"));
  const float one = 1.0f, zero = 0.0f;
  const Plan& p = *plan_;
  auto ptr = [&](int i) { return reinterpret_cast<void*>(args[i]); };
  if (epilogue_.taken)  // y = relu(conv(x) + alpha2 * z + bias); z is y itself when alpha2 = 0
    return check(cudnnConvolutionBiasActivationForward(
                     lease.h, &one, p.x, ptr(0), p.w, ptr(1), p.conv, p.algo,
                     reinterpret_cast<void*>(workspace), p.workspace, zArg_ >= 0 ? &one : &zero,
                     p.y, ptr(zArg_ >= 0 ? zArg_ : 2), p.bias, ptr(biasArg_), p.relu, p.y, ptr(2)),
                 "the fused convolution " + shape_.str());
  return check(cudnnConvolutionForward(lease.h, &one, p.x, reinterpret_cast<const void*>(args[0]),
                                       p.w, reinterpret_cast<const void*>(args[1]), p.conv, p.algo,
                                       reinterpret_cast<void*>(workspace), p.workspace, &zero, p.y,
                                       reinterpret_cast<void*>(args[2])),
               "the convolution " + shape_.str());
}

StatusOr<std::unique_ptr<LibraryCall>> Conv::alone(bool withEpilogue) const {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Conv> c,
                        withEpilogue ? create(shape_, epilogue_, zArg_, biasArg_) : create(shape_));
  return std::unique_ptr<LibraryCall>(std::move(c));
}

std::vector<int64_t> Conv::argBytes() const {
  const ConvShape& c = shape_;
  auto product = [](const std::vector<int64_t>& v) {
    int64_t p = 1;
    for (int64_t x : v) p *= x;
    return p;
  };
  const auto e = static_cast<int64_t>(dtypeSize(c.type));
  return withEpilogueOperands({c.batch * c.inFeatures * product(c.in) * e,
                               c.outFeatures * (c.inFeatures / c.groups) * product(c.window) * e,
                               c.batch * c.outFeatures * product(c.out) * e},
                              zArg_, biasArg_, c.outFeatures);
}

std::string Conv::describe() const {
  return "cuDNN " + shape_.str() + (epilogue_.taken ? " then " + epilogue_.str() : "") + ", " +
         algoName(plan_->algo) + (plan_->math == CUDNN_FMA_MATH ? "" : ", tensor cores") +
         (plan_->measured ? ", fastest measured" : ", heuristic");
}

std::string cudnnVersionString() {
  const size_t v = cudnnGetVersion();  // 91900 for 9.19.0
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace kiln::codegen::cuda

#pragma GCC diagnostic pop
