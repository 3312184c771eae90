// The fusion plan in artifacts. See stored_plan.h.
#include "compiler/stored_plan.h"

#include <cstdio>
#include <cstdlib>

#include "compiler/module_index.h"
#include "runtime/artifact.h"

namespace kiln::compiler {
namespace {

using fusion::FusionPlan;
using fusion::KernelKind;
using fusion::PostOpChain;
using fusion::PostOpKind;

std::string numberText(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

class PlanWriter {
 public:
  explicit PlanWriter(const Function& f) : index_(f) {}

  std::string write(const FusionPlan& plan) {
    out_ += "plan " + std::to_string(plan.bytesUnfused) + " " + flag(plan.symbolic) + " " +
            flag(plan.storesAlongsideReductions) + " " + std::to_string(plan.sortRows.sort) + " " +
            std::to_string(plan.sortRows.topK) + "\n";
    for (const fusion::Kernel& k : plan.kernels) kernel(k);
    for (const fusion::Decision& d : plan.decisions) {
      out_ += "decision " + index_.id(d.producer) + " " + index_.id(d.consumer) + " " +
              flag(d.fused) + "\n";
      text("how", d.how);
      text("reason", d.reason);
    }
    for (const auto& [v, view] : plan.concats.views)
      out_ += "view " + index_.id(v) + " " + index_.id(view.of) + " " +
              std::to_string(view.offset) + " " + std::to_string(view.rowLength) + " " +
              std::to_string(view.pitch) + "\n";
    for (const auto& [v, writers] : plan.concats.writers)
      values("writers " + index_.id(v), writers);
    for (const Node* n : plan.concats.inPlace) out_ += "in-place " + index_.id(n) + "\n";
    for (const auto& [n, note] : plan.concats.notes) text("concat-note " + index_.id(n), note);
    return std::move(out_);
  }

 private:
  static std::string flag(bool b) { return b ? "1" : "0"; }

  void text(const std::string& head, const std::string& s) {
    out_ += head + (s.empty() ? "" : " " + oneLine(s)) + "\n";
  }
  void values(const std::string& head, const std::vector<const Value*>& vs) {
    out_ += head;
    for (const Value* v : vs) out_ += " " + index_.id(v);
    out_ += "\n";
  }

  void kernel(const fusion::Kernel& k) {
    out_ += "kernel " + std::to_string(k.id) + " " + std::string(fusion::kernelKindName(k.kind)) +
            " " + index_.id(k.anchor) + " " + std::to_string(k.bytesRead) + " " +
            std::to_string(k.bytesWritten) + " " + numberText(k.flops) + "\n";
    out_ += "nodes";
    for (const Node* n : k.nodes) out_ += " " + index_.id(n);
    out_ += "\n";
    values("inputs", k.inputs);
    values("outputs", k.outputs);
    chain(k.postOps);
    if (k.kind != KernelKind::Custom) return;
    text("custom", k.custom);
    text("custom-reason", k.customReason);
    for (const fusion::CustomStep& s : k.steps) {
      out_ += "custom-step " + index_.id(s.anchor) + "\n";
      chain(s.postOps);
    }
    values("internal", k.internal);
  }

  void chain(const PostOpChain& c) {
    out_ += "chain " + index_.id(c.result) + "\n";
    for (const fusion::PostOpStep& s : c.steps) {
      out_ += "step " + std::string(fusion::postOpKindName(s.kind)) + " " + index_.id(s.operand) +
              " " + numberText(s.lo) + " " + numberText(s.hi);
      for (int64_t d : s.operandDims) out_ += " " + std::to_string(d);
      out_ += "\n";
    }
    text("stop", c.stop);
  }

  ModuleIndex index_;
  std::string out_;
};

std::optional<double> real(const std::string& s) {
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

std::optional<KernelKind> kernelKind(const std::string& s) {
  for (KernelKind k : {KernelKind::Loop, KernelKind::Reduction, KernelKind::Contraction,
                       KernelKind::Attention, KernelKind::Opaque, KernelKind::Custom})
    if (fusion::kernelKindName(k) == s) return k;
  return std::nullopt;
}

std::optional<PostOpKind> postOpKind(const std::string& s) {
  for (PostOpKind k : {PostOpKind::Add, PostOpKind::Mul, PostOpKind::Clamp, PostOpKind::Sigmoid,
                       PostOpKind::Tanh, PostOpKind::Gelu, PostOpKind::GeluTanh, PostOpKind::Swish})
    if (fusion::postOpKindName(k) == s) return k;
  return std::nullopt;
}

// Reads the lines back into a plan; each line's facts belong to the kernel, chain or decision
// the lines before it opened.
class PlanReader {
 public:
  explicit PlanReader(const Function& f) : index_(f) {}

  Status read(const std::vector<std::string>& lines) {
    for (const std::string& line : lines) {
      if (line.empty()) continue;
      Status s = this->line(line, words(line));
      if (!s.isOk()) return s.prefix("fusion plan line '" + line.substr(0, 80) + "'");
    }
    if (!started_) return Status::error("the fusion plan has no plan line");
    for (const fusion::Kernel& k : plan_.kernels)
      for (const Node* n : k.nodes) plan_.kernelsOf[n].push_back(k.id);
    return Status::ok();
  }

  FusionPlan take() { return std::move(plan_); }

 private:
  StatusOr<int64_t> count(const std::string& s) const {
    std::optional<int64_t> n = number(s);
    if (!n) return Status::error("'" + s + "' is not a count");
    return *n;
  }
  StatusOr<std::vector<const Value*>> valueList(const std::vector<std::string>& w,
                                                size_t from) const {
    std::vector<const Value*> vs;
    for (size_t i = from; i < w.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(const Value* v, index_.value(w[i]));
      vs.push_back(v);
    }
    return vs;
  }
  Status needs(bool open, const char* what) const {
    return open ? Status::ok() : Status::error(std::string("it comes before its ") + what);
  }

  Status line(const std::string& line, const std::vector<std::string>& w) {
    const std::string& head = w[0];
    if (head == "plan" && w.size() == 6 && !started_) {
      started_ = true;
      KILN_ASSIGN_OR_RETURN(plan_.bytesUnfused, count(w[1]));
      plan_.symbolic = w[2] == "1";
      plan_.storesAlongsideReductions = w[3] == "1";
      KILN_ASSIGN_OR_RETURN(plan_.sortRows.sort, count(w[4]));
      KILN_ASSIGN_OR_RETURN(plan_.sortRows.topK, count(w[5]));
      return Status::ok();
    }
    KILN_RETURN_IF_ERROR(needs(started_, "plan line"));
    if (head == "kernel" && w.size() == 7) return kernel(w);
    if (head == "decision" && w.size() == 4) {
      fusion::Decision d;
      KILN_ASSIGN_OR_RETURN(d.producer, index_.node(w[1], true));
      KILN_ASSIGN_OR_RETURN(d.consumer, index_.node(w[2], true));
      d.fused = w[3] == "1";
      plan_.decisions.push_back(std::move(d));
      return Status::ok();
    }
    if (head == "how" || head == "reason") {
      KILN_RETURN_IF_ERROR(needs(!plan_.decisions.empty(), "decision"));
      (head == "how" ? plan_.decisions.back().how : plan_.decisions.back().reason) =
          textAfter(line, 1);
      return Status::ok();
    }
    if (head == "view" || head == "writers" || head == "in-place" || head == "concat-note")
      return concat(line, w);
    return kernelLine(line, w);
  }

  Status kernel(const std::vector<std::string>& w) {
    fusion::Kernel k;
    KILN_ASSIGN_OR_RETURN(k.id, count(w[1]));
    if (static_cast<size_t>(k.id) != plan_.kernels.size())
      return Status::error("kernel " + w[1] + " is out of order");
    std::optional<KernelKind> kind = kernelKind(w[2]);
    if (!kind) return Status::error("no kernel kind '" + w[2] + "'");
    k.kind = *kind;
    KILN_ASSIGN_OR_RETURN(k.anchor, index_.node(w[3], true));
    KILN_ASSIGN_OR_RETURN(k.bytesRead, count(w[4]));
    KILN_ASSIGN_OR_RETURN(k.bytesWritten, count(w[5]));
    std::optional<double> flops = real(w[6]);
    if (!flops || *flops < 0) return Status::error("'" + w[6] + "' is not a flop count");
    k.flops = *flops;
    plan_.kernels.push_back(std::move(k));
    chain_ = nullptr;
    return Status::ok();
  }

  // A line of the current kernel: its nodes, values, post-op chains and custom parts.
  Status kernelLine(const std::string& line, const std::vector<std::string>& w) {
    const std::string& head = w[0];
    KILN_RETURN_IF_ERROR(needs(!plan_.kernels.empty(), "kernel"));
    fusion::Kernel& k = plan_.kernels.back();
    if (head == "nodes") {
      for (size_t i = 1; i < w.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(const Node* n, index_.node(w[i]));
        k.nodes.push_back(n);
      }
    } else if (head == "inputs" || head == "outputs" || head == "internal") {
      KILN_ASSIGN_OR_RETURN(std::vector<const Value*> vs, valueList(w, 1));
      (head == "inputs" ? k.inputs : head == "outputs" ? k.outputs : k.internal) = std::move(vs);
    } else if (head == "chain" && w.size() == 2) {
      chain_ = k.steps.empty() ? &k.postOps : &k.steps.back().postOps;
      KILN_ASSIGN_OR_RETURN(chain_->result, index_.value(w[1], true));
    } else if (head == "step" && w.size() >= 5) {
      KILN_RETURN_IF_ERROR(needs(chain_ != nullptr, "chain"));
      return step(w);
    } else if (head == "stop") {
      KILN_RETURN_IF_ERROR(needs(chain_ != nullptr, "chain"));
      chain_->stop = textAfter(line, 1);
    } else if (head == "custom" || head == "custom-reason") {
      (head == "custom" ? k.custom : k.customReason) = textAfter(line, 1);
    } else if (head == "custom-step" && w.size() == 2) {
      fusion::CustomStep s;
      KILN_ASSIGN_OR_RETURN(s.anchor, index_.node(w[1]));
      k.steps.push_back(std::move(s));
      chain_ = nullptr;
    } else {
      return Status::error("it is not a line of a fusion plan");
    }
    return Status::ok();
  }

  Status step(const std::vector<std::string>& w) {
    fusion::PostOpStep s;
    std::optional<PostOpKind> kind = postOpKind(w[1]);
    if (!kind) return Status::error("no post-op '" + w[1] + "'");
    s.kind = *kind;
    KILN_ASSIGN_OR_RETURN(s.operand, index_.value(w[2], true));
    std::optional<double> lo = real(w[3]), hi = real(w[4]);
    if (!lo || !hi) return Status::error("its bounds are not numbers");
    s.lo = *lo;
    s.hi = *hi;
    for (size_t i = 5; i < w.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t d, count(w[i]));
      s.operandDims.push_back(d);
    }
    chain_->steps.push_back(std::move(s));
    return Status::ok();
  }

  Status concat(const std::string& line, const std::vector<std::string>& w) {
    fusion::ConcatViews& c = plan_.concats;
    const std::string& head = w[0];
    if (head == "view" && w.size() == 6) {
      KILN_ASSIGN_OR_RETURN(const Value* v, index_.value(w[1]));
      fusion::StoredView view;
      KILN_ASSIGN_OR_RETURN(view.of, index_.value(w[2]));
      KILN_ASSIGN_OR_RETURN(view.offset, count(w[3]));
      KILN_ASSIGN_OR_RETURN(view.rowLength, count(w[4]));
      KILN_ASSIGN_OR_RETURN(view.pitch, count(w[5]));
      if (view.rowLength <= 0 || view.pitch < view.rowLength)
        return Status::error("a view's rows do not fit its pitch");
      c.views[v] = view;
    } else if (head == "writers" && w.size() >= 2) {
      KILN_ASSIGN_OR_RETURN(const Value* v, index_.value(w[1]));
      KILN_ASSIGN_OR_RETURN(c.writers[v], valueList(w, 2));
    } else if (head == "in-place" && w.size() == 2) {
      KILN_ASSIGN_OR_RETURN(const Node* n, index_.node(w[1]));
      c.inPlace.insert(n);
    } else if (head == "concat-note" && w.size() >= 2) {
      KILN_ASSIGN_OR_RETURN(const Node* n, index_.node(w[1]));
      c.notes.emplace_back(n, textAfter(line, 2));
    } else {
      return Status::error("it is not a line of a fusion plan");
    }
    return Status::ok();
  }

  ModuleIndex index_;
  FusionPlan plan_;
  bool started_ = false;
  PostOpChain* chain_ = nullptr;  // where step and stop lines go
};

}  // namespace

std::string storePlan(const FusionPlan& plan, const Function& f) {
  return PlanWriter(f).write(plan);
}

StatusOr<FusionPlan> loadPlan(std::string_view text, const Function& f, const std::string& source) {
  PlanReader reader(f);
  KILN_RETURN_IF_ERROR(reader.read(runtime::sectionLines(text)).prefix(source));
  return reader.take();
}

}  // namespace kiln::compiler
