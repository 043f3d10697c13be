// Small methods of the recipe value types (recipe.hpp).
#include "core/recipe.hpp"

namespace shardc {

const char* split_rule_name(SplitRule rule) {
  switch (rule) {
    case SplitRule::Chunk:
      return "chunk";
    case SplitRule::Balanced:
      return "balanced";
    case SplitRule::Even:
      return "even";
    case SplitRule::Pad:
      return "pad";
  }
  return "chunk";
}

const char* optimizer_name(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::AdamW:
      return "adamw";
    case Optimizer::Adam:
      return "adam";
    case Optimizer::Sgd:
      return "sgd";
    case Optimizer::Muon:
      return "muon";
    case Optimizer::None:
      return "none";
  }
  return "adamw";
}

const char* recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::None:
      return "none";
    case Recompute::Selective:
      return "selective";
    case Recompute::Full:
      return "full";
  }
  return "none";
}

const char* pipeline_schedule_name(PipelineScheduleKind kind) {
  switch (kind) {
    case PipelineScheduleKind::OneFOneB:
      return "1f1b";
    case PipelineScheduleKind::Interleaved:
      return "interleaved";
    case PipelineScheduleKind::GPipe:
      return "gpipe";
    case PipelineScheduleKind::ZeroBubble:
      return "zero_bubble";
    case PipelineScheduleKind::ZeroBubbleV:
      return "zbv";
    case PipelineScheduleKind::DualPipeV:
      return "dualpipev";
  }
  return "1f1b";
}

const char* attention_impl_name(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::Flash:
      return "flash";
    case AttentionImpl::Sdpa:
      return "sdpa";
    case AttentionImpl::Eager:
      return "eager";
  }
  return "sdpa";
}

const char* activation_kernels_name(ActivationKernels kernels) {
  return kernels == ActivationKernels::Fused ? "fused" : "eager";
}

int Mesh::find(std::string_view name) const {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Rule::match_text() const {
  std::string out;
  for (std::size_t i = 0; i < match.size(); ++i) {
    if (i > 0) out += ", ";
    out += match[i].text();
  }
  return out;
}

std::string rule_label(const Recipe& recipe, bool experts, int index) {
  const auto i = static_cast<std::size_t>(index);
  const std::size_t count = experts ? recipe.experts.size() : recipe.rules.size();
  std::string text = std::string(experts ? "experts entry " : "rule ") + std::to_string(index + 1);
  if (index < 0 || i >= count) return text;
  const int line = experts ? recipe.experts[i].loc.line : recipe.rules[i].loc.line;
  if (line > 0) text += " (line " + std::to_string(line) + ")";
  return text;
}

}  // namespace shardc
