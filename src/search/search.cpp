// `shardc search`: enumeration, screen, memory estimate, and the exact check
// through the front end, planner and memory model (src/search/search.hpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <span>
#include <sstream>
#include <thread>

#include "comm/comm.hpp"
#include "core/activations.hpp"
#include "core/layer_blocks.hpp"
#include "core/pipeline_chunks.hpp"
#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/planner.hpp"
#include "search/cost.hpp"
#include "search/model_stats.hpp"
#include "search/search.hpp"

namespace shardc {

const char* screen_reason_text(ScreenReason reason) {
  switch (reason) {
    case ScreenReason::HeadsTp:
      return "E-HEADS: attention or KV heads not divisible by tp";
    case ScreenReason::VocabTp:
      return "E-EVEN: vocab rows not divisible by tp under `uneven: even`, on a rule that cannot "
             "pad them (`packed`, a `unit`)";
    case ScreenReason::ExpertsEp:
      return "E-EXPERTS: routed experts not divisible by ep";
    case ScreenReason::LayersPp:
      return "E-TRAINING: fewer layer blocks than pipeline stages x virtual stages";
    case ScreenReason::BatchDp:
      return "E-TRAINING: global batch not divisible by dp x micro_batch_size";
    case ScreenReason::SeqCp:
      return "E-TRAINING: seq_len not divisible by 2 x cp (load-balanced chunks), or a rank's "
             "tokens by tp under sequence parallelism";
    case ScreenReason::MicrobatchesPp:
      return "E-TRAINING: too few micro-batches for the schedule (interleaved: a multiple of pp; "
             "dualpipev: at least 2 pp)";
    case ScreenReason::ExpertFsdpAxis:
      return "E-FSDP: ep spans dp_shard x cp x tp, so FSDP leaves the experts no expert FSDP axis "
             "(efsdp 1)";
    case ScreenReason::Fixed:
      return "a degree other than the one --fix holds";
    case ScreenReason::OverBudget:
      return "estimated memory over the budget by more than 25 % (not planned)";
  }
  return "";
}

bool schedule_enumerated(const std::vector<PipelineScheduleKind>& requested,
                         PipelineScheduleKind kind) {
  if (requested.empty())
    return kind != PipelineScheduleKind::GPipe && kind != PipelineScheduleKind::ZeroBubble;
  return std::find(requested.begin(), requested.end(), kind) != requested.end();
}

std::string layout_name(const Layout& layout) {
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
  if (layout.pp > 1) add("pp" + std::to_string(layout.pp));
  if (layout.dp_replicate > 1) add("dp_replicate" + std::to_string(layout.dp_replicate));
  if (layout.dp_shard > 1) add("dp_shard" + std::to_string(layout.dp_shard));
  if (layout.cp > 1) add("cp" + std::to_string(layout.cp));
  if (layout.tp > 1) add("tp" + std::to_string(layout.tp));
  if (layout.ep > 1) add("ep" + std::to_string(layout.ep));
  if (layout.ep > 1 && layout.efsdp > 1)
    add((layout.dp_shard > 1 ? "efsdp" : "edp") + std::to_string(layout.efsdp));
  if (out.empty()) add("single");
  if (layout.sequence_parallel) add("sp");
  if (layout.vocab_padding) add("padded-vocab");
  if (layout.zero1) add("zero1");
  if (layout.pp == 1 && layout.dp_shard > 1 && !layout.reshard_after_forward) add("no-reshard");
  if (layout.recompute == Recompute::Full && layout.recompute_block > 0) {
    add("recompute=block" + std::to_string(layout.recompute_block));
  } else {
    add(std::string("recompute=") + recompute_name(layout.recompute));
  }
  if (layout.pp > 1) {
    add(pipeline_schedule_name(layout.schedule));
    if (layout.virtual_stages > 1 && !v_shaped(layout.schedule))
      add("v" + std::to_string(layout.virtual_stages));
  }
  return out;
}

std::vector<std::int64_t> divisors(std::int64_t value) {
  std::vector<std::int64_t> out;
  for (std::int64_t divisor = 1; divisor * divisor <= value; ++divisor) {
    if (value % divisor != 0) continue;
    out.push_back(divisor);
    if (divisor != value / divisor) out.push_back(value / divisor);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

using search::ModelStats;

// The largest interleaved chunk count enumerated (Megatron's virtual pipeline
// sizes in practice: the Llama 3 and Megatron papers use up to 8; 16 for
// 126-layer models on 8 stages).
constexpr std::int64_t kMaxVirtualStages = 16;

}  // namespace

bool rules_shard_over(const Recipe* rules, std::string_view axis) {
  if (rules == nullptr) return true;
  for (const Rule& rule : rules->rules)
    for (const AxisPlacement& placement : rule.placements)
      if (placement.axis == axis && placement.placement.kind != Placement::Kind::Replicate)
        return true;
  return false;
}

namespace {

// Megatron's make_vocab_size_divisible_by default: the padded vocabulary is a multiple
// of 128 x tp rows (megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding).
constexpr std::int64_t kVocabDivisibleBy = 128;

// The vocabulary params (2-D, dim 0 = the model's vocab_size) whose first matching rule
// splits dim 0 over tp under `uneven: even` with no `vocab_padding` of its own: at a tp
// that does not divide the vocabulary the planner refuses them (E-EVEN) unless padded.
struct VocabSplit {
  struct Split {
    std::string fqn;
    std::size_t rule = 0;    ///< index of its first matching rule
    std::string placements;  ///< that rule's map as written: "{tp: Shard(0)}"
  };
  std::vector<Split> params;
  std::int64_t vocab = 0;
  /// Every one may take `vocab_padding` (not `packed`, no `unit`, an FQN without pattern
  /// characters) and the rule set's `rules:` is a block list (a rule can be edited there).
  bool paddable = true;
  [[nodiscard]] bool needs_padding(std::int64_t tp) const {
    return !params.empty() && vocab > 0 && vocab % tp != 0;
  }
};

// The first rule of `rules` matching `fqn` (contract §4: the first match wins).
std::optional<std::size_t> first_rule(const Recipe& rules, std::string_view fqn) {
  for (std::size_t i = 0; i < rules.rules.size(); ++i) {
    const std::vector<Pattern>& match = rules.rules[i].match;
    if (std::any_of(match.begin(), match.end(),
                    [fqn](const Pattern& pattern) { return pattern.match(fqn); }))
      return i;
  }
  return std::nullopt;
}

// The lines of the `rules:` block list of a rule set's text: [begin, end) of each item
// (offsets into the text), the item's indentation ("  ") and whether it is a flow map.
struct RuleItem {
  std::size_t begin = 0;
  std::size_t end = 0;  ///< past the item's last line's newline
  std::string indent;
  bool flow = false;
};
std::vector<RuleItem> rule_items(std::string_view text) {
  std::vector<RuleItem> items;
  std::size_t pos = 0;
  bool in_rules = false;
  std::string indent;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    const std::string_view line = text.substr(pos, end - pos);
    const std::size_t first = line.find_first_not_of(" \n");
    if (!in_rules) {
      in_rules = line.substr(0, line.find_last_not_of(" \n") + 1) == "rules:";
    } else if (first != std::string_view::npos) {
      if (items.empty() && line[first] == '-') indent = std::string(line.substr(0, first));
      if (indent.empty() && items.empty()) break;  // `rules:` not followed by a block list
      if (first < indent.size()) break;            // the next top-level key
      if (first == indent.size() && line[first] == '-') {
        const std::size_t value = line.find_first_not_of(' ', first + 1);
        items.push_back({pos, end, indent, value != std::string_view::npos && line[value] == '{'});
      } else if (first == indent.size()) {
        break;
      } else if (!items.empty()) {
        items.back().end = end;
      }
    }
    pos = end;
  }
  return items;
}

VocabSplit vocab_split(const SearchRequest& req, std::int64_t vocab) {
  VocabSplit out;
  out.vocab = vocab;
  if (req.rules == nullptr || req.model == nullptr || vocab <= 0) return out;
  for (const Param& param : req.model->params) {
    if (param.shape.size() != 2 || param.shape[0] != vocab) continue;
    const std::optional<std::size_t> index = first_rule(*req.rules, param.name);
    if (!index) continue;
    const Rule& rule = req.rules->rules[*index];
    if (rule.vocab_divisible_by > 0) continue;
    if (rule.uneven.value_or(req.rules->uneven) != SplitRule::Even) continue;
    const bool splits_rows = std::any_of(
        rule.placements.begin(), rule.placements.end(), [](const AxisPlacement& placement) {
          return placement.axis == "tp" && placement.placement.kind == Placement::Kind::Shard &&
                 placement.placement.dim == 0;
        });
    if (!splits_rows) continue;
    std::string placements;
    for (const AxisPlacement& placement : rule.placements)
      placements +=
          (placements.empty() ? "" : ", ") + placement.axis + ": " + placement.placement.text;
    out.params.push_back({param.name, *index, "{" + placements + "}"});
    if (rule.packed || rule.unit > 1 || param.name.find_first_of("*?[]{}\"'#") != std::string::npos)
      out.paddable = false;
  }
  if (!out.params.empty() && rule_items(req.rules_text).size() != req.rules->rules.size())
    out.paddable = false;
  return out;
}

// The rule set with the split vocabulary params padded (`vocab_padding: {divisible_by:
// 128}`): added to their rule where it is the first match of vocabulary params only (a
// block item gets the key as its last line, a flow item before its closing brace), else
// a rule of their own put in front of it with the same placements (the first match wins).
// Cost: one pass over the params, only for a layout that pads.
std::string with_vocab_padding(const SearchRequest& req, const std::string& rules_text,
                               const VocabSplit& vocab) {
  const std::vector<RuleItem> items = rule_items(rules_text);
  if (items.size() != req.rules->rules.size() || vocab.params.empty()) return rules_text;
  const std::string padding =
      "vocab_padding: {divisible_by: " + std::to_string(kVocabDivisibleBy) + "}";
  // Rules that are the first match of a param other than a split vocabulary param.
  std::vector<bool> shared(items.size(), false);
  for (const Param& param : req.model->params) {
    const std::optional<std::size_t> index = first_rule(*req.rules, param.name);
    if (!index) continue;
    const bool split =
        std::any_of(vocab.params.begin(), vocab.params.end(),
                    [&param](const VocabSplit::Split& entry) { return entry.fqn == param.name; });
    if (!split) shared[*index] = true;
  }
  // Edits from the last item back, so earlier offsets stay valid.
  std::string out = rules_text;
  std::vector<bool> edited(items.size(), false);
  for (std::size_t i = vocab.params.size(); i-- > 0;) {
    const VocabSplit::Split& split = vocab.params[i];
    const RuleItem& item = items[split.rule];
    if (!shared[split.rule]) {
      if (edited[split.rule]) continue;
      edited[split.rule] = true;
      if (!item.flow) {
        std::string line = item.indent + "  " + padding + "\n";
        if (item.end > 0 && out[item.end - 1] != '\n') line.insert(0, "\n");
        out.insert(item.end, line);
        continue;
      }
      // A flow item `- {match: ..., placements: {...}}  # comment`: before its last `}`.
      const std::string_view text(out.data() + item.begin, item.end - item.begin);
      const std::size_t comment = text.find(" #");
      const std::size_t close = text.substr(0, comment).rfind('}');
      if (close != std::string_view::npos) {
        out.insert(item.begin + close, ", " + padding);
        continue;
      }
    }
    out.insert(item.begin, item.indent + "- match: \"" + split.fqn + "\"\n" + item.indent +
                               "  placements: " + split.placements + "\n" + item.indent + "  " +
                               padding + "\n");
  }
  return out;
}

// Every layout of `world` (degrees x choices), each passed to `visit`; tp > 1 only
// when `tp_shards` (the rule set shards over tp).
void enumerate(const ModelStats& st, std::int64_t world,
               const std::vector<PipelineScheduleKind>& schedules, bool tp_shards,
               const VocabSplit& vocab, const std::function<void(const Layout&)>& visit) {
  const bool moe = st.expert > 0 && st.experts > 0;
  auto allowed = [&schedules](PipelineScheduleKind kind) {
    return schedule_enumerated(schedules, kind);
  };
  for (const std::int64_t pp : divisors(world)) {
    const std::int64_t r1 = world / pp;
    for (const std::int64_t tp : divisors(r1)) {
      if (tp > 1 && !tp_shards) continue;
      const std::int64_t r2 = r1 / tp;
      for (const std::int64_t cp : divisors(r2)) {
        const std::int64_t r3 = r2 / cp;
        for (const std::int64_t dp_shard : divisors(r3)) {
          const std::int64_t dp_replicate = r3 / dp_shard;
          Layout base;
          base.pp = pp;
          base.tp = tp;
          base.cp = cp;
          base.dp_shard = dp_shard;
          base.dp_replicate = dp_replicate;
          base.vocab_padding = tp > 1 && vocab.needs_padding(tp) && vocab.paddable;
          // The expert mesh: ep within dp_shard x cp x tp (torchtitan) when FSDP
          // shards, else within all non-pipeline ranks (Megatron's expert DP).
          const std::int64_t expert_ranks = dp_shard > 1 ? dp_shard * cp * tp : r1;
          std::vector<std::int64_t> eps{1};
          if (moe) eps = divisors(expert_ranks);
          for (const std::int64_t ep : eps) {
            Layout layout = base;
            layout.ep = ep;
            layout.efsdp = moe ? expert_ranks / ep : 1;
            for (const Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
              layout.recompute = rc;
              for (const bool sp : {false, true}) {
                if (sp && tp == 1) continue;
                layout.sequence_parallel = sp;
                for (const bool zero1 : {false, true}) {
                  // ZeRO-1 over dp_replicate; beside FSDP the planner refuses it (E-ZERO:
                  // FSDP already shards the optimizer state).
                  if (zero1 && (dp_replicate == 1 || dp_shard > 1)) continue;
                  layout.zero1 = zero1;
                  if (pp == 1) {
                    layout.schedule = PipelineScheduleKind::OneFOneB;
                    layout.virtual_stages = 1;
                    layout.reshard_after_forward = true;
                    visit(layout);
                    if (dp_shard == 1) continue;
                    layout.reshard_after_forward = false;
                    visit(layout);
                    continue;
                  }
                  layout.reshard_after_forward = dp_shard == 1;
                  for (const PipelineScheduleKind kind :
                       {PipelineScheduleKind::OneFOneB, PipelineScheduleKind::ZeroBubble,
                        PipelineScheduleKind::GPipe}) {
                    if (!allowed(kind)) continue;
                    layout.schedule = kind;
                    layout.virtual_stages = 1;
                    visit(layout);
                  }
                  // The V schedules (torch ScheduleZBVZeroBubble, ScheduleDualPipeV):
                  // exactly two model chunks per rank, placed in a V.
                  for (const PipelineScheduleKind kind :
                       {PipelineScheduleKind::ZeroBubbleV, PipelineScheduleKind::DualPipeV}) {
                    if (!allowed(kind)) continue;
                    layout.schedule = kind;
                    layout.virtual_stages = 2;
                    visit(layout);
                  }
                  // Interleaved 1F1B with v = 2, 4, 8, 16 model chunks per rank
                  // (Narayanan et al. 2021, Sec. 2.2: the bubble shrinks by v, the
                  // point-to-point traffic grows by v); v = 2 always (a layout with
                  // fewer layers than 2 pp is counted under LayersPp), larger v while
                  // pp x v blocks exist.
                  if (!allowed(PipelineScheduleKind::Interleaved)) continue;
                  layout.schedule = PipelineScheduleKind::Interleaved;
                  for (std::int64_t virtual_stages = 2; virtual_stages <= kMaxVirtualStages;
                       virtual_stages *= 2) {
                    if (virtual_stages > 2 && pp * virtual_stages > st.layers) break;
                    layout.virtual_stages = virtual_stages;
                    visit(layout);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

std::optional<ScreenReason> screen(const ModelStats& st, const SearchRequest& req,
                                   const VocabSplit& vocab, const Layout& layout) {
  const std::array<std::int64_t, 6> degrees = {layout.pp, layout.dp_replicate, layout.dp_shard,
                                               layout.cp, layout.tp,           layout.ep};
  for (std::size_t i = 0; i < degrees.size(); ++i) {
    if (req.fixed[i] > 0 && req.fixed[i] != degrees[i]) return ScreenReason::Fixed;
  }
  if (st.heads > 0 &&
      (st.heads % layout.tp != 0 || (st.kv_heads > 0 && st.kv_heads % layout.tp != 0)))
    return ScreenReason::HeadsTp;
  if (layout.tp > 1 && vocab.needs_padding(layout.tp) && !vocab.paddable)
    return ScreenReason::VocabTp;
  if (st.experts > 0 && layout.ep > 1 && st.experts % layout.ep != 0)
    return ScreenReason::ExpertsEp;
  // The planner's fsdp pass: stacked experts under FSDP need an expert_shard axis
  // (src/planner/fsdp.cpp), and efsdp = 1 writes none.
  if (st.expert > 0 && st.experts > 0 && layout.dp_shard > 1 && layout.efsdp == 1)
    return ScreenReason::ExpertFsdpAxis;
  if (layout.pp * layout.virtual_stages > st.layers) return ScreenReason::LayersPp;
  const TrainingShape& shape = req.training.shape;
  const std::int64_t batch = shape.global_batch_size.value_or(0);
  if (batch % (layout.dp() * shape.micro_batch_size) != 0) return ScreenReason::BatchDp;
  // As the planner's training pass: 2 x cp load-balanced chunks, and each rank's tokens
  // split over tp under sequence parallelism.
  const std::int64_t seq = shape.seq_len.value_or(0);
  if (seq % (layout.cp > 1 ? 2 * layout.cp : 1) != 0 ||
      (layout.sequence_parallel && layout.tp > 1 && (seq / layout.cp) % layout.tp != 0))
    return ScreenReason::SeqCp;
  const std::int64_t microbatches = batch / (layout.dp() * shape.micro_batch_size);
  if (layout.schedule == PipelineScheduleKind::Interleaved && microbatches % layout.pp != 0)
    return ScreenReason::MicrobatchesPp;
  if (layout.schedule == PipelineScheduleKind::DualPipeV && microbatches < 2 * layout.pp)
    return ScreenReason::MicrobatchesPp;
  return std::nullopt;
}

// Phase 1's memory estimate of the peak rank (bytes): the state of the
// largest stage share, one FSDP unit gathered twice, and the activation
// model's stage 0 and last stage (src/core/activations.hpp).
// Activation bytes of the peak stage depend on (tp, sp, cp, pp, v, schedule,
// recompute, micro-batches) only: layouts differing in ep, the expert mesh
// or the dp_replicate / dp_shard split share them (computed once).
// The per-micro-batch bytes by part (core activation_bytes) depend on (tp, sp, cp) alone.
using ActivationKey = std::array<std::int64_t, 9>;
struct ActivationMemo {
  std::map<ActivationKey, double> peak;
  std::map<std::array<std::int64_t, 3>, ActivationBytes> tables;
};

double estimate_memory(const ModelStats& st, const SearchRequest& req, const Layout& layout,
                       ActivationMemo& memo) {
  const double pp = static_cast<double>(layout.pp);
  const double tp = static_cast<double>(layout.tp);
  const double shard = static_cast<double>(layout.fsdp_degree());
  const double eshard = layout.dp_shard > 1 ? static_cast<double>(layout.efsdp) : 1;
  // Outside the blocks: half on the first and half on the last stage under a pipeline (a
  // tie across stages keeps a copy on each); on one stage a tied alias shares its source.
  const double dense = (st.layer_dense / tp + st.layer_vector) / pp +
                       (layout.pp > 1 ? st.outside / 2 : st.outside - st.tied_outside) / tp;
  const double expert = st.expert / pp / static_cast<double>(layout.ep);
  const TrainingSpec& training = req.training;
  const double pb = static_cast<double>(st.param_bytes);
  const double master = training.master_weights ? 4 : 0;
  const double states = training.optimizer == Optimizer::None  ? 0
                        : training.optimizer == Optimizer::Sgd ? 4
                                                               : 8;
  // Grads narrower than the master add an fp32 copy of the grads (the memory model's
  // grad_copy_bytes, src/memory/memory.hpp), under ZeRO sharded with the state; FSDP
  // reduce-scatters into the sharded grad (no copy).
  const double grad_width =
      training.grad_dtype ? static_cast<double>(element_size(*training.grad_dtype)) : pb;
  const double grad_copy =
      master > grad_width && (layout.zero1 || layout.dp_shard == 1) ? master : 0;
  const double state_bytes = master + states + grad_copy;
  const double zero_dense = layout.zero1 ? static_cast<double>(layout.dp_replicate * layout.cp) : 1;
  const double zero_expert =
      layout.zero1 && layout.dp_shard == 1 ? static_cast<double>(layout.efsdp) : 1;
  double bytes = dense / shard * (2 * pb + state_bytes / zero_dense) +
                 expert / eshard * (2 * pb + state_bytes / zero_expert);
  if (layout.dp_shard > 1) {
    // The FSDP2 buffers (src/memory/memory.hpp): a unit and the next one
    // gathered plus one unit's unsharded grads; every unit gathered without
    // resharding after forward; under a pipeline every unit gathered and
    // every unit's unsharded grads.
    const double gb =
        training.grad_dtype ? static_cast<double>(element_size(*training.grad_dtype)) : pb;
    const double layer =
        st.largest_layer / static_cast<double>(std::max<std::int64_t>(1, st.layers)) / tp;
    const double stage = dense + expert;
    if (layout.pp > 1) {
      bytes += stage * (pb + gb);
    } else if (!layout.reshard_after_forward) {
      bytes += stage * pb + layer * gb;
    } else {
      // The root unit (the params outside every block: the emitted recipe's "**") stays
      // gathered beside them (src/planner/buffers.hpp).
      const double root = (st.outside - st.other_stacks - st.tied_outside) / tp;
      bytes += root * pb + 2 * layer * pb + layer * gb;
    }
  }
  if (!st.arch || !training.shape.seq_len) return bytes;
  TrainingShape shape = training.shape;
  shape.recompute = layout.recompute;
  shape.recompute_ranges.clear();
  const ActivationLayout al{layout.tp, 1, layout.sequence_parallel && layout.tp > 1, layout.cp};
  const std::int64_t microbatches = training.shape.global_batch_size.value_or(1) /
                                    (layout.dp() * training.shape.micro_batch_size);
  const ActivationKey key = {layout.tp,
                             layout.sequence_parallel ? 1 : 0,
                             layout.cp,
                             layout.pp,
                             layout.virtual_stages,
                             static_cast<std::int64_t>(layout.schedule),
                             static_cast<std::int64_t>(layout.recompute),
                             microbatches,
                             layout.recompute_block};
  if (const auto hit = memo.peak.find(key); hit != memo.peak.end()) return bytes + hit->second;
  const std::int64_t element_bytes =
      element_size(shape.activation_dtype.value_or(st.activation_dtype));
  const std::array<std::int64_t, 3> table_key = {al.tp, al.sequence_parallel ? 1 : 0, al.cp};
  auto table = memo.tables.find(table_key);
  if (table == memo.tables.end())
    table =
        memo.tables.emplace(table_key, activation_bytes(*st.arch, shape, element_bytes, al)).first;
  double act = 0;
  const std::int64_t per_stage = (st.layers + layout.pp - 1) / layout.pp;
  // Stage 0 (most micro-batches in flight), stage 1 (one micro-batch fewer in flight but,
  // the embedding counting as a layer of stage 0, one layer block more: the emitted cut),
  // the first stage holding only MoE layers (DeepSeek's leading dense layers are
  // lighter) and the last stage (the logits).
  std::int64_t first_moe = 0;
  while (first_moe < st.layers && !st.moe_layer[static_cast<std::size_t>(first_moe)]) ++first_moe;
  std::vector<std::int64_t> stages{0};
  if (first_moe > 0 && first_moe < st.layers && per_stage > 0) {
    const std::int64_t moe_stage = (first_moe + per_stage - 1) / per_stage;
    if (moe_stage < layout.pp) stages.push_back(moe_stage);
  }
  if (layout.pp > 2) stages.push_back(1);
  if (layout.pp > 1) stages.push_back(layout.pp - 1);
  for (const std::int64_t stage : stages) {
    const StageLayers sl = search::stage_layers(st, layout, stage);
    const std::int64_t in_flight =
        layout.pp > 1 ? microbatches_in_flight(layout.schedule, layout.pp, layout.virtual_stages,
                                               stage, microbatches)
                      : 1;
    const StagePosition position{static_cast<int>(stage), in_flight, layout.virtual_stages};
    act = std::max(act, static_cast<double>(stage_activation_bytes(table->second, sl, position)));
  }
  memo.peak.emplace(key, act);
  return bytes + act;
}

const char* optimizer_text(Optimizer optimizer) { return optimizer_name(optimizer); }

// Block recompute for a layout whose `full` variant is `full_layout`: the fewest layer
// blocks N per model chunk (recompute the first N fully, keep the rest) whose memory
// estimate is within the budget, when keeping every layer's activations is not (else
// nullopt: recompute none, or full when even N = chunk size - 1 is over). The estimate
// falls as N grows, so N is found by bisection.
std::optional<std::int64_t> fitting_block(const ModelStats& st, const SearchRequest& req,
                                          const Layout& full_layout, ActivationMemo& memo) {
  const double budget = static_cast<double>(req.budget);
  // The largest model chunk of the emitted cut (the weighted cut's middle chunks can hold
  // one block more than layers / chunks rounded up).
  std::int64_t largest_chunk = 0;
  for (const ChunkBlocks& chunk : search::layout_chunks(st, full_layout))
    largest_chunk = std::max(largest_chunk, chunk.size());
  if (req.budget <= 0 || largest_chunk < 2 || !st.arch || !req.training.shape.seq_len)
    return std::nullopt;
  Layout probe = full_layout;
  auto fits_with = [&](std::int64_t blocks) {
    probe.recompute_block = blocks;
    return estimate_memory(st, req, probe, memo) <= budget;
  };
  Layout none = full_layout;
  none.recompute = Recompute::None;
  // Offered also when `none` is estimated just under the budget: the estimate is within a
  // few percent of the exact peak, either side (Llama 3 405B fused at 8K: 74.4 GiB
  // estimated, 75.8 GiB exact, over a 74.5 GiB budget), and without the block layout
  // only full recompute would be left.
  constexpr double kEstimateMargin = 0.95;
  if (estimate_memory(st, req, none, memo) <= budget * kEstimateMargin) return std::nullopt;
  if (!fits_with(largest_chunk - 1)) return std::nullopt;
  std::int64_t low = 1;  // the answer lies in [low, high]
  std::int64_t high = largest_chunk - 1;
  while (low < high) {
    const std::int64_t mid = low + (high - low) / 2;
    if (fits_with(mid)) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

// The rule set with `axis`'s entries dropped from one-line flow placement maps
// (`placements: {tp: Shard(0)}` -> `placements: {}`): the emitted recipe keeps a size-1
// tp or ep axis for the rule set's names, and a placement on it has no effect
// (W-AXIS-SIZE-1 on every rule). Block-style maps are left as written.
std::string without_axis_placements(std::string_view rules, std::string_view axis) {
  std::string out;
  std::size_t pos = 0;
  const std::string key = std::string(axis) + ":";
  while (pos < rules.size()) {
    std::size_t end = rules.find('\n', pos);
    if (end == std::string_view::npos) end = rules.size();
    std::string line(rules.substr(pos, end - pos));
    pos = end + 1;
    const std::size_t open = line.find("placements: {");
    const std::size_t close = open == std::string::npos ? open : line.find('}', open);
    if (close != std::string::npos) {
      const std::size_t body = open + std::string_view("placements: {").size();
      std::string kept;
      std::size_t item = body;
      while (item < close) {
        std::size_t comma = line.find(',', item);
        // Commas inside an entry's parentheses (_StridedShard(0, split_factor=2)).
        const std::size_t paren = line.find('(', item);
        if (paren < comma && paren < close) comma = line.find(',', line.find(')', paren));
        if (comma == std::string::npos || comma > close) comma = close;
        std::string entry = line.substr(item, comma - item);
        const std::size_t first = entry.find_first_not_of(' ');
        entry = first == std::string::npos ? "" : entry.substr(first);
        if (!entry.empty() && entry.rfind(key, 0) != 0) kept += (kept.empty() ? "" : ", ") + entry;
        item = comma + 1;
      }
      line = line.substr(0, body) + kept + line.substr(close);
    }
    out += line;
    if (end < rules.size()) out += '\n';
  }
  return out;
}

// `text` without YAML comments: whole comment lines dropped, a ` #` outside quotes cut
// with the blanks before it.
std::string without_comments(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos && line[first] == '#') continue;
    char quote = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char ch = line[i];
      if (quote != 0) {
        if (ch == quote) quote = 0;
      } else if (ch == '"' || ch == '\'') {
        quote = ch;
      } else if (ch == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        line = line.substr(0, i);
        break;
      }
    }
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace

std::string rule_set_text(std::string_view recipe_text) {
  static constexpr std::array<std::string_view, 7> kKeep = {
      "uneven", "pad_multiple", "rules", "experts", "tied", "fp8_scales", "vocab_padding"};
  std::string out;
  bool keep = false;
  std::size_t pos = 0;
  while (pos < recipe_text.size()) {
    std::size_t end = recipe_text.find('\n', pos);
    if (end == std::string_view::npos) end = recipe_text.size();
    const std::string_view line = recipe_text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line.front() == '#') continue;
    if (line.front() != ' ' && line.front() != '-') {
      const std::string_view key = line.substr(0, line.find(':'));
      keep = std::find(kKeep.begin(), kKeep.end(), key) != kKeep.end();
    }
    if (keep) {
      out += line;
      out += '\n';
    }
  }
  return out;
}

std::string layout_recipe_text(const SearchRequest& req, const Layout& layout) {
  const ModelStats st = search::model_stats(*req.model);
  const bool moe = st.expert > 0 && st.experts > 0;
  std::ostringstream out;
  out << "# shardc search: " << layout_name(layout) << " on " << req.world << " ranks\n";
  out << "format: shardc.recipe/v1\n";
  out << "world_size: " << req.world << "\n";
  out << "mesh:\n";
  auto axis = [&out](const char* name, std::int64_t size, bool keep) {
    if (size > 1 || keep) out << "  - {name: " << name << ", size: " << size << "}\n";
  };
  axis("pp", layout.pp, false);
  axis("dp_replicate", layout.dp_replicate, false);
  axis("dp_shard", layout.dp_shard, false);
  axis("cp", layout.cp, false);
  axis("tp", layout.tp, true);  // the rule set names tp
  const char* expert_dp = layout.dp_shard > 1 ? "efsdp" : "edp";
  if (moe) {
    out << "expert_mesh:\n";
    axis("pp", layout.pp, false);
    if (layout.dp_shard > 1) axis("dp_replicate", layout.dp_replicate, false);
    axis(expert_dp, layout.efsdp, false);
    axis("ep", layout.ep, true);  // the rule set's experts name ep
  }
  // The rule set's comments describe its own layout ("-> 16032 rows per rank" at its tp):
  // left out, so none of them states another layout's figures.
  std::string rules = without_comments(req.rules_text);
  if (layout.vocab_padding) rules = with_vocab_padding(req, rules, vocab_split(req, st.vocab));
  if (layout.tp == 1) rules = without_axis_placements(rules, "tp");
  if (moe && layout.ep == 1) rules = without_axis_placements(rules, "ep");
  out << rules;
  if (!rules.empty() && rules.back() != '\n') out << "\n";
  if (layout.pp > 1) {
    // torchtitan's default cut: the embedding and the output count as one layer each.
    out << "pipeline:\n  axis: pp\n  stages: auto\n  first_stage_less_layers: "
        << search::kStageLessLayers << "\n  last_stage_less_layers: " << search::kStageLessLayers
        << "\n";
    if (layout.virtual_stages > 1) out << "  virtual_stages: " << layout.virtual_stages << "\n";
  }
  if (layout.dp_shard > 1) {
    // torchtitan shards FSDP over dp_shard x cp (its `dp_shard_cp` mesh).
    out << (layout.cp > 1 ? "fsdp:\n  shard: [dp_shard, cp]\n" : "fsdp:\n  shard: dp_shard\n");
    if (layout.dp_replicate > 1) out << "  replicate: dp_replicate\n";
    if (moe && layout.efsdp > 1) out << "  expert_shard: efsdp\n";
    out << "  dim: 0\n";
    if (moe) out << "  expert_dim: auto\n";
    if (!layout.reshard_after_forward) out << "  reshard_after_forward: false\n";
  }
  // The FSDP2 units: each layer block of each stack (core/layer_blocks.hpp: `model.layers`,
  // GPT-2's `transformer.h`, a vision tower's blocks), its routed experts first, then the
  // rest. A stack's experts are the path from its block to the `experts` segment
  // (`mlp.experts`, Llama-4's `feed_forward.experts`).
  std::vector<std::pair<std::string, std::string>> stacks;  // "model.layers.{i}", experts
  for (const Param& param : req.model->params) {
    const std::optional<LayerBlock> block = layer_block(param.name);
    if (!block) continue;
    const std::string unit = std::string(block->stack) + ".{i}";
    auto found = std::find_if(stacks.begin(), stacks.end(),
                              [&unit](const auto& entry) { return entry.first == unit; });
    if (found == stacks.end()) found = stacks.insert(stacks.end(), {unit, std::string()});
    const std::string_view name = param.name;
    const std::size_t inside = name.find('.', block->stack.size() + 1);  // after the index
    const std::size_t experts = name.find(".experts.", block->stack.size());
    if (found->second.empty() && inside != std::string_view::npos &&
        experts != std::string_view::npos && experts >= inside)
      found->second = unit + std::string(name.substr(inside, experts + 8 - inside));
  }
  const bool muon = req.training.optimizer == Optimizer::Muon;
  if (layout.dp_shard > 1 || muon) {
    out << "buffers:\n";
    if (muon) out << "  - {kind: muon_allgather, alignment_bytes: 512}\n";
    if (layout.dp_shard > 1) {
      out << "  - {kind: fsdp2_allgather, units: [";
      for (const auto& [unit, experts] : stacks) {
        if (!experts.empty()) out << "\"" << experts << "\", ";
        out << "\"" << unit << "\", ";
      }
      out << "\"**\"]}\n";
    }
  }
  const TrainingSpec& training = req.training;
  const TrainingShape& shape = training.shape;
  out << "training:\n";
  out << "  optimizer: " << optimizer_text(training.optimizer) << "\n";
  out << "  master_weights: "
      << (training.master_weights ? std::string(dtype_name(*training.master_weights)) : "none")
      << "\n";
  if (training.grad_dtype) out << "  grad_dtype: " << dtype_name(*training.grad_dtype) << "\n";
  if (training.state_dtype) out << "  state_dtype: " << dtype_name(*training.state_dtype) << "\n";
  if (layout.zero1) out << "  zero: 1\n";
  out << "  budget: " << req.budget << "\n";
  out << "  seq_len: " << shape.seq_len.value_or(0) << "\n";
  out << "  micro_batch_size: " << shape.micro_batch_size << "\n";
  out << "  global_batch_size: " << shape.global_batch_size.value_or(0) << "\n";
  // The hardware's node size, so `cost` of the recipe crosses nodes where search's links do.
  out << "  ranks_per_node: " << req.hardware.gpus_per_node << "\n";
  if (layout.recompute == Recompute::Full && layout.recompute_block > 0) {
    // Block recompute as per-layer ranges: the first blocks of every model chunk, cut
    // as `stages: auto` cuts them (core/pipeline_chunks.hpp).
    out << "  # block recompute: the first " << layout.recompute_block
        << " layer blocks of each model chunk (Megatron-Core --recompute-method block "
           "--recompute-num-layers "
        << layout.recompute_block << ")\n";
    out << "  recompute:\n";
    for (const ChunkBlocks& chunk : search::layout_chunks(st, layout)) {
      const std::int64_t end = std::min(chunk.end, chunk.first + layout.recompute_block);
      if (end > chunk.first)
        out << "    - {layers: [" << chunk.first << ", " << end << "], mode: full}\n";
    }
  } else {
    out << "  recompute: " << recompute_name(layout.recompute) << "\n";
  }
  if (layout.tp > 1)
    out << "  sequence_parallel: " << (layout.sequence_parallel ? "true" : "false") << "\n";
  if (layout.cp > 1) out << "  context_parallel: cp\n";
  if (layout.pp > 1)
    out << "  pipeline_schedule: {kind: " << pipeline_schedule_name(layout.schedule) << "}\n";
  out << "  attention: " << attention_impl_name(shape.attention) << "\n";
  if (shape.kernels != ActivationKernels::Eager)
    out << "  kernels: " << activation_kernels_name(shape.kernels) << "\n";
  if (shape.activation_dtype)
    out << "  activation_dtype: " << dtype_name(*shape.activation_dtype) << "\n";
  if (shape.moe.capacity_factor)
    out << "  moe: {capacity_factor: " << *shape.moe.capacity_factor << "}\n";
  return out.str();
}

namespace {

// Layouts estimated at most this factor over the budget are planned after the ranked ones
// when they would rank (the estimate's error is a few per cent; the screen keeps 1.25 x).
constexpr double kNearBudget = 1.10;

// At most this many exact checks at once (each plans the whole model: DeepSeek-V3's
// 45,395 tensors take a few hundred MB).
constexpr std::size_t kMaxExactWorkers = 4;
// At most this many threads score the enumerated layouts (phase 1).
constexpr std::size_t kMaxScoreWorkers = 4;

// Phase 2 for one layout: the recipe through parse_recipe, build_plan and memory_classes;
// its step costed with the planned recipe's communication (plan_communication's peak
// rank: what `cost` prints for the emitted recipe), else with the estimate.
CheckedLayout check_exactly(const SearchRequest& req, const ModelStats& st, const Layout& layout,
                            double estimate) {
  CheckedLayout checked;
  checked.layout = layout;
  checked.estimated_memory = estimate;
  DiagnosticSink sink;
  const SourceFile file{"<search layout>", layout_recipe_text(req, layout)};
  std::optional<Recipe> recipe = parse_recipe(file, sink, false);
  std::optional<Plan> plan;
  if (recipe) plan = build_plan(*req.model, *recipe, sink);
  std::string why;
  std::optional<MemoryReport> memory;
  if (plan) {
    memory = memory_classes(*plan, &why);
    if (!memory) sink.error(DiagCode::EMemoryWorld, {}, why);
  }
  for (const Diagnostic& diagnostic : sink.items()) {
    if (diagnostic.severity != Severity::Error) continue;
    checked.first_code = std::string(code_name(diagnostic.code));
    checked.first_message = diagnostic.message;
    break;
  }
  if (!memory || sink.has_errors()) {
    checked.cost = search::step_cost(st, req, layout, true);
    return checked;
  }
  const CommReport comm = plan_communication(*plan, CommOptions{});
  const auto peak =
      std::find_if(comm.classes.begin(), comm.classes.end(),
                   [&comm](const CommClass& cls) { return cls.comm.bytes == comm.peak; });
  checked.cost = search::step_cost(
      st, req, layout, true, comm.counted && peak != comm.classes.end() ? &peak->comm : nullptr);
  checked.valid = true;
  checked.peak = memory->peak;
  checked.peak_rank = memory->peak_ranks.first();
  checked.peak_stage = memory->peak_stage;
  checked.activations = memory->at(checked.peak_rank).activations;
  checked.fits = checked.peak <= req.budget;
  return checked;
}

// Phase 1's figures of one layout (the full cost is recomputed, with its
// texts, for the layouts phase 2 checks).
struct Scored {
  Layout layout;
  double step = 0;
  double estimate = 0;
};

}  // namespace

std::int64_t fitting_layouts(const SearchRequest& req, std::int64_t world) {
  SearchRequest at = req;
  at.world = world;
  const ModelStats st = search::model_stats(*at.model);
  const VocabSplit vocab = vocab_split(at, st.vocab);
  const double budget = static_cast<double>(at.budget);
  ActivationMemo memo;
  std::int64_t count = 0;
  enumerate(st, world, at.schedules, rules_shard_over(at.rules, "tp"), vocab,
            [&](const Layout& layout) {
              if (screen(st, at, vocab, layout)) return;
              if (budget <= 0 || estimate_memory(st, at, layout, memo) <= budget) ++count;
            });
  return count;
}

SearchResult run_search(const SearchRequest& req) {
  SearchResult result;
  const ModelStats st = search::model_stats(*req.model);
  if (!req.training.shape.seq_len || !req.training.shape.global_batch_size) {
    result.error = "the training shape needs seq_len and a global batch";
    return result;
  }
  if (!st.arch) {
    result.arch_missing = st.arch_missing;
    return result;
  }
  // Phase 1 over the enumerated layouts in a few contiguous parts at once (each with its
  // own activation memo), joined in enumeration order: the same counts and candidates as
  // one thread.
  std::vector<Layout> layouts;
  const VocabSplit vocab = vocab_split(req, st.vocab);
  enumerate(st, req.world, req.schedules, rules_shard_over(req.rules, "tp"), vocab,
            [&layouts](const Layout& layout) { layouts.push_back(layout); });
  struct Part {
    std::vector<Scored> scored;
    std::array<std::int64_t, kScreenReasons> pruned{};
    std::int64_t enumerated = 0;
    std::int64_t screened = 0;
  };
  auto score = [&st, &req, &vocab](std::span<const Layout> part_layouts, Part& part) {
    ActivationMemo memo;
    for (const Layout& layout : part_layouts) {
      ++part.enumerated;
      if (const auto reason = screen(st, req, vocab, layout)) {
        ++part.pruned[static_cast<std::size_t>(*reason)];
        continue;
      }
      const double estimate = estimate_memory(st, req, layout, memo);
      if (req.budget > 0 && estimate > 1.25 * static_cast<double>(req.budget)) {
        ++part.pruned[static_cast<std::size_t>(ScreenReason::OverBudget)];
        // Kept (not costed) for the "closest" hint: the smallest estimate.
        part.scored.push_back({layout, 0, -estimate});
        continue;
      }
      ++part.screened;
      part.scored.push_back({layout, search::step_cost(st, req, layout, false).step, estimate});
      // Beside full recompute, block recompute of the fewest layers that fit (when
      // keeping every layer's activations does not).
      if (layout.recompute != Recompute::Full) continue;
      const std::optional<std::int64_t> block = fitting_block(st, req, layout, memo);
      if (!block) continue;
      Layout partial = layout;
      partial.recompute_block = *block;
      ++part.enumerated;
      ++part.screened;
      part.scored.push_back({partial, search::step_cost(st, req, partial, false).step,
                             estimate_memory(st, req, partial, memo)});
    }
  };
  const std::size_t score_workers =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, kMaxScoreWorkers);
  std::vector<Part> parts(score_workers);
  {
    std::vector<std::jthread> threads;
    const std::size_t per_part = (layouts.size() + score_workers - 1) / score_workers;
    for (std::size_t worker = 0; worker < score_workers; ++worker) {
      const std::size_t begin = std::min(layouts.size(), worker * per_part);
      const std::size_t end = std::min(layouts.size(), begin + per_part);
      const std::span<const Layout> part_layouts(layouts.data() + begin, end - begin);
      threads.emplace_back(
          [&score, part_layouts, &part = parts[worker]] { score(part_layouts, part); });
    }
  }
  std::vector<Scored> scored;
  for (Part& part : parts) {
    result.enumerated += part.enumerated;
    result.screened += part.screened;
    for (std::size_t reason = 0; reason < result.pruned.size(); ++reason)
      result.pruned[reason] += part.pruned[reason];
    scored.insert(scored.end(), part.scored.begin(), part.scored.end());
  }
  // Candidates by estimated step time (ties: fewer bytes, then the name: deterministic),
  // those whose estimate is within the budget first: the estimate is within a few per
  // cent of the exact peak (docs/search.md), so a layout estimated over the budget is
  // checked only when the in-budget ones do not fill --top (else the fast layouts just
  // over the budget would use up --max-planned).
  std::vector<const Scored*> order;
  const Scored* smallest = nullptr;
  for (const Scored& candidate : scored) {
    if (candidate.estimate >= 0) order.push_back(&candidate);
    if (smallest == nullptr || std::abs(candidate.estimate) < std::abs(smallest->estimate))
      smallest = &candidate;
  }
  const double budget = static_cast<double>(req.budget);
  std::sort(order.begin(), order.end(), [budget](const Scored* lhs, const Scored* rhs) {
    const bool lhs_over = budget > 0 && lhs->estimate > budget;
    const bool rhs_over = budget > 0 && rhs->estimate > budget;
    if (lhs_over != rhs_over) return rhs_over;
    if (lhs->step != rhs->step) return lhs->step < rhs->step;
    if (lhs->estimate != rhs->estimate) return lhs->estimate < rhs->estimate;
    return layout_name(lhs->layout) < layout_name(rhs->layout);
  });
  // The exact checks, a few at a time (the front end, planner and memory model are pure):
  // the results are taken in candidate order and a batch's checks past the point where one
  // thread would have stopped are dropped, so the output is what one thread gives.
  const std::size_t workers =
      std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, kMaxExactWorkers);
  std::size_t next = 0;
  bool done = false;
  while (!done && next < order.size()) {
    const auto room = static_cast<std::size_t>(
        std::max(0, req.max_exact - static_cast<int>(result.checked.size())));
    const std::size_t batch = std::min({workers, order.size() - next, room});
    if (batch == 0 || static_cast<int>(result.ranked.size()) >= req.top) break;
    std::vector<std::future<CheckedLayout>> checks;
    for (std::size_t i = 0; i < batch; ++i) {
      const Scored* candidate = order[next + i];
      checks.push_back(std::async(std::launch::async, [&req, &st, candidate] {
        return check_exactly(req, st, candidate->layout, candidate->estimate);
      }));
    }
    next += batch;
    for (std::future<CheckedLayout>& check : checks) {
      CheckedLayout checked = check.get();
      if (done || static_cast<int>(result.ranked.size()) >= req.top) {
        done = true;
        continue;
      }
      if (checked.valid && checked.fits) result.ranked.push_back(checked);
      result.checked.push_back(std::move(checked));
    }
  }
  // Then the layouts estimated just over the budget (within the screen's margin) that
  // would rank: faster than the slowest ranked one. The estimate is some per cent off
  // the exact peak either way, so one of them may fit (Qwen3-235B on 64 ranks with a 62 GB
  // budget: pp16 at 26.6 s per step, estimated 3 % over, fits; the ranked ones took 134 s).
  // At most a third of --max-planned (4 or more) of them, in step order.
  // (Also when --max-planned ran out before --top layouts ranked: then every one of them
  // would rank.)
  if (next < order.size()) {
    double slowest = static_cast<int>(result.ranked.size()) < req.top
                         ? std::numeric_limits<double>::infinity()
                         : 0.0;
    for (const CheckedLayout& ranked : result.ranked) slowest = std::max(slowest, ranked.cost.step);
    std::vector<const Scored*> near;
    for (std::size_t i = next; i < order.size(); ++i) {
      if (order[i]->estimate > budget && order[i]->estimate <= kNearBudget * budget &&
          order[i]->step < slowest)
        near.push_back(order[i]);
    }
    const std::size_t limit =
        std::min(near.size(), static_cast<std::size_t>(std::max(4, req.max_exact / 3)));
    for (std::size_t begin = 0; begin < limit; begin += workers) {
      std::vector<std::future<CheckedLayout>> checks;
      for (std::size_t i = begin; i < std::min(limit, begin + workers); ++i) {
        const Scored* candidate = near[i];
        checks.push_back(std::async(std::launch::async, [&req, &st, candidate] {
          return check_exactly(req, st, candidate->layout, candidate->estimate);
        }));
      }
      for (std::future<CheckedLayout>& check : checks) {
        CheckedLayout checked = check.get();
        if (checked.valid && checked.fits) result.ranked.push_back(checked);
        result.checked.push_back(std::move(checked));
      }
    }
    result.near_budget_checked = static_cast<std::int64_t>(limit);
  }
  // Ranked by the step of the planned recipes (their communication exact): the order
  // checked was the estimate's.
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const CheckedLayout& lhs, const CheckedLayout& rhs) {
                     return lhs.cost.step < rhs.cost.step;
                   });
  // A layout slower than a variant of itself that differs only in recompute and needs no
  // less memory is not ranked (block recompute is offered when the estimate says keeping
  // every layer does not fit; the exact peak may say it does: Mixtral on 64 GPUs ranked
  // block1 at 71.29 GiB and 9.18 s under none at 71.26 GiB and 9.08 s).
  const auto same_but_recompute = [](const Layout& lhs, const Layout& rhs) {
    Layout other = rhs;
    other.recompute = lhs.recompute;
    other.recompute_block = lhs.recompute_block;
    return lhs == other;
  };
  std::vector<CheckedLayout> undominated;
  for (const CheckedLayout& candidate : result.ranked) {
    const bool dominated =
        std::any_of(result.ranked.begin(), result.ranked.end(), [&](const CheckedLayout& other) {
          return &other != &candidate && same_but_recompute(candidate.layout, other.layout) &&
                 other.cost.step < candidate.cost.step && other.peak <= candidate.peak;
        });
    if (!dominated) undominated.push_back(candidate);
  }
  result.ranked = std::move(undominated);
  if (static_cast<int>(result.ranked.size()) > req.top)
    result.ranked.resize(static_cast<std::size_t>(req.top));
  // Screened candidates never planned (--max-planned ran out first): the hint says so.
  for (std::size_t i = next; i < order.size(); ++i) ++result.unplanned;
  result.unplanned -= result.near_budget_checked;
  if (result.ranked.empty()) {
    // The closest thing: the smallest exact peak among the checked, else the
    // layout of the smallest estimate, checked now.
    for (const CheckedLayout& checked : result.checked) {
      if (checked.valid && (!result.smallest || checked.peak < result.smallest->peak))
        result.smallest = checked;
    }
    if (!result.smallest && smallest != nullptr) {
      CheckedLayout checked =
          check_exactly(req, st, smallest->layout, std::abs(smallest->estimate));
      result.checked.push_back(checked);
      result.closest_planned = true;
      if (checked.valid) result.smallest = checked;
    }
  }
  return result;
}

}  // namespace shardc
