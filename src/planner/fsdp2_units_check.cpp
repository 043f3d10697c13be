// What FSDP2 refuses at its first forward (lazy init) in the units of an fsdp2_allgather
// buffer, found by a run against torch 2.13 on gloo (trial E 1 and 4): `fully_shard`
// accepts these modules, then the first forward or `unshard()` raises on every rank.
// W-FSDP-DTYPES for mixed trainable dtypes (the runtime may cast on load), E-FSDP for a
// tie across units (FSDP2 raises whatever the dtypes).
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "planner/buffers.hpp"
#include "planner/passes.hpp"
#include "support/dtype.hpp"

namespace shardc::passes {

void check_fsdp2_units(const std::vector<PlannedParam>& params, const Plan& plan,
                       DiagnosticSink& sink) {
  for (const BufferSpec& spec : plan.buffers) {
    if (spec.kind != BufferKind::Fsdp2AllGather) continue;
    // 1. One dtype for a unit's trainable params: FSDPParamGroup.lazy_init ->
    //    _init_mp_dtypes asserts "FSDP expects uniform original parameter dtype"
    //    (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py), with or without a
    //    mixed-precision policy; frozen members of other dtypes are allowed.
    std::map<std::tuple<int, int, std::string>, std::map<DType, const PlannedParam*>> trainable;
    for (const PlannedParam& param : params) {
      if (param.geometry.fsdp_dim < 0 || !param.requires_grad) continue;
      if (param.alias_of && params[*param.alias_of].stage == param.stage) continue;
      const std::string unit = fsdp2_unit_of(param.name, spec.units);
      trainable[{param.stage, static_cast<int>(param.mesh), unit}].try_emplace(param.dtype, &param);
    }
    for (const auto& [key, by_dtype] : trainable) {
      if (by_dtype.size() < 2) continue;
      // In model order: each dtype with its first param.
      std::vector<const PlannedParam*> firsts;
      for (const auto& entry : by_dtype) firsts.push_back(entry.second);
      std::sort(firsts.begin(), firsts.end());
      std::string dtypes;
      for (const PlannedParam* param : firsts)
        dtypes += (dtypes.empty() ? "" : ", ") + std::string(dtype_name(param->dtype)) + " (" +
                  param->name + ")";
      const std::string& unit = std::get<2>(key);
      // A warning: a model file lists the checkpoint's storage dtypes, and a runtime that
      // loads with one torch_dtype trains them in one (checkpoints often store norms in
      // float32); kept as listed, FSDP2 refuses the unit.
      sink.warning(DiagCode::WFsdpDtypes, spec.loc,
                   "FSDP unit " + fsdp2_unit_label(unit) +
                       " holds trainable params of more than one dtype: " + dtypes +
                       "; FSDP2 refuses it at the first forward (\"FSDP expects uniform "
                       "original parameter dtype\", FSDPParamGroup._init_mp_dtypes) unless the "
                       "runtime casts them to one dtype",
                   "if the runtime keeps these dtypes: cast the odd param, freeze it "
                   "(`requires_grad: false`) or name its module as a unit of its own; if it "
                   "casts on load (from_pretrained(torch_dtype=...)), list the dtype it trains "
                   "in");
    }
    // 2. The ends of a tie in one unit: FSDP2 manages the shared Parameter once; a second
    //    unit over the other end raises "shared with a parameter already managed by
    //    another FSDP group" (FSDPState._validate_no_duplicate_params).
    std::set<std::pair<std::string, std::string>> reported;
    for (const PlannedParam& param : params) {
      if (!param.alias_of || param.geometry.fsdp_dim < 0) continue;
      const PlannedParam& source = params[*param.alias_of];
      if (source.stage != param.stage) continue;  // tied across stages: each stage its own
      const std::string alias_unit = fsdp2_unit_of(param.name, spec.units);
      const std::string source_unit = fsdp2_unit_of(source.name, spec.units);
      if (alias_unit == source_unit || !reported.insert({source_unit, alias_unit}).second) continue;
      sink.error(DiagCode::EFsdp, spec.loc,
                 "tied params " + source.name + " and " + param.name +
                     " fall in different FSDP units (" + fsdp2_unit_label(source_unit) + " and " +
                     fsdp2_unit_label(alias_unit) +
                     "); FSDP2 raises at the first forward (\"shared with a parameter already "
                     "managed by another FSDP group\", FSDPState._validate_no_duplicate_params)",
                 "put both ends in one unit: name a module that holds both (e.g. the root, "
                 "\"**\"), or leave both modules out of `units` (torch: fully_shard([a, b]))");
    }
  }
}

}  // namespace shardc::passes
