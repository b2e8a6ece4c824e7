#include "bench/tta/grid.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psring::bench::tta {
namespace {

// The integer after `prefix` in `name` when it is one >= 1.
bool SuffixNumber(const std::string& name, const std::string& prefix, int* value) {
  if (!absl::StartsWith(name, prefix)) return false;
  return absl::SimpleAtoi(name.substr(prefix.size()), value) && *value >= 1;
}

// The cell's identity, for grouping runs.
std::tuple<std::string, int, double> Key(const Cell& c) { return {c.variant.name, c.nodes, c.factor}; }

}  // namespace

absl::StatusOr<std::vector<Variant>> ParseVariants(const std::vector<std::string>& names) {
  if (names.empty()) return absl::InvalidArgumentError("--exchanges is empty: give e.g. ring,ps-sync");
  std::vector<Variant> variants;
  for (const std::string& name : names) {
    Variant v;
    v.name = name;
    int number = 0;
    if (name == "ring") {
      v.exchange = Exchange::kRing;
    } else if (name == "ps-sync") {
      v.exchange = Exchange::kPsOne;
    } else if (SuffixNumber(name, "ps-backup", &number)) {
      v.exchange = Exchange::kPsOne;
      v.backup_workers = number;
      v.server_args = {absl::StrCat("--backup_workers=", number)};
    } else if (SuffixNumber(name, "ps-async", &number)) {
      v.exchange = Exchange::kPsOne;
      v.ps_mode = "async";
      v.server_args = {absl::StrCat("--staleness=", number)};
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--exchanges: '", name,
          "' is not one of ring, ps-sync, ps-backupB (B >= 1 backup workers), ps-asyncS (staleness S >= 1)"));
    }
    variants.push_back(v);
  }
  return variants;
}

absl::StatusOr<std::vector<Cell>> PlanCells(const std::vector<Variant>& variants, const std::vector<int>& nodes,
                                            const std::vector<double>& factors) {
  if (nodes.empty()) return absl::InvalidArgumentError("--n is empty: give worker counts like 4,8");
  if (factors.empty()) return absl::InvalidArgumentError("--factors is empty: give e.g. 1,2 (1: no straggler)");
  std::vector<Cell> cells;
  for (int n : nodes) {
    if (n < 2 || n > 64) return absl::InvalidArgumentError(absl::StrCat("--n: ", n, " is not in 2..64"));
    for (double f : factors) {
      if (!(f >= 1) || !std::isfinite(f) || f > 100) {
        return absl::InvalidArgumentError(absl::StrCat("--factors: ", f, " is not in [1, 100] (1: no straggler)"));
      }
      for (const Variant& v : variants) {
        if (v.backup_workers >= n) {
          return absl::InvalidArgumentError(absl::StrCat(v.name, " at N = ", n, ": backup workers must be fewer than N"));
        }
        cells.push_back({v, n, f});
      }
    }
  }
  return cells;
}

std::vector<std::string> StragglerArgs(const Cell& cell) {
  if (cell.factor <= 1) return {};
  return {absl::StrCat("--straggler=", cell.nodes - 1, ":", cell.factor)};
}

TtaRun SummarizeRun(const Cell& cell, int rep, const RunRecord& record, double target) {
  TtaRun run;
  run.cell = cell;
  run.rep = rep;
  run.job_s = record.wall_s;
  if (!record.ok()) {
    run.error = record.error;
    return run;
  }
  if (record.evaluations.empty()) {
    run.error = "the workers reported no held-out evaluation (do they take --eval_every? rebuild them)";
    return run;
  }
  run.curve = record.evaluations;
  for (const RunRecord::Evaluation& e : record.evaluations) {
    run.best_accuracy = std::max(run.best_accuracy, e.accuracy);
    if (!run.reached && target > 0 && e.accuracy >= target) {
      run.reached = true;
      run.steps_to_target = e.step;
      run.wall_to_target_s = e.wall_s;
    }
  }
  run.final_accuracy = record.test_accuracy;
  run.steps = record.evaluations.back().step;
  // With backup workers the job moves at its quorum's pace (time between step closes), not the straggler's.
  run.step_s = record.backup_workers > 0 && record.quorum_step_s > 0 ? record.quorum_step_s : record.step_s;
  run.straggler_rank = record.straggler_rank;
  return run;
}

Stat StatOf(std::vector<double> values) {
  Stat s;
  s.count = static_cast<int>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  s.min = values.front();
  s.max = values.back();
  return s;
}

std::vector<TtaCell> MedianCells(const std::vector<TtaRun>& runs) {
  std::vector<TtaCell> cells;
  std::map<std::tuple<std::string, int, double>, std::vector<const TtaRun*>> groups;
  for (const TtaRun& run : runs) {
    auto [it, inserted] = groups.try_emplace(Key(run.cell));
    if (inserted) cells.push_back(TtaCell{run.cell});
    it->second.push_back(&run);
  }
  for (TtaCell& cell : cells) {
    std::vector<double> wall, steps, final_acc, best, step_s;
    // (ordering key, rep): reached runs by time, then the others by best accuracy (highest first).
    std::vector<std::pair<double, int>> order;
    for (const TtaRun* run : groups[Key(cell.cell)]) {
      if (!run->ok()) {
        ++cell.failed;
        if (cell.first_error.empty()) cell.first_error = run->error;
        continue;
      }
      ++cell.runs;
      if (run->reached) {
        ++cell.reached;
        wall.push_back(run->wall_to_target_s);
        steps.push_back(run->steps_to_target);
      }
      if (run->final_accuracy >= 0) final_acc.push_back(run->final_accuracy);
      best.push_back(run->best_accuracy);
      step_s.push_back(run->step_s);
      if (cell.cell.factor > 1 && run->straggler_rank == cell.cell.nodes - 1) ++cell.straggler_named;
      order.emplace_back(run->reached ? run->wall_to_target_s : 1e12 - run->best_accuracy, run->rep);
    }
    cell.wall_to_target_s = StatOf(wall);
    cell.steps_to_target = StatOf(steps);
    cell.final_accuracy = StatOf(final_acc);
    cell.best_accuracy = StatOf(best);
    cell.step_s = StatOf(step_s);
    if (!order.empty()) {
      std::sort(order.begin(), order.end());
      cell.median_rep = order[(order.size() - 1) / 2].second;
    }
  }
  return cells;
}

absl::StatusOr<std::vector<Cell>> PlanGrid(const TtaOptions& o) {
  if (o.reps < 1) return absl::InvalidArgumentError(absl::StrCat("--reps=", o.reps, ": must be >= 1"));
  if (!(o.target > 0 && o.target <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target=", o.target, ": must be a test accuracy in (0, 1], e.g. 0.85"));
  }
  if (o.max_steps < 1) return absl::InvalidArgumentError(absl::StrCat("--max_steps=", o.max_steps, ": must be >= 1"));
  if (o.eval_every < 1) return absl::InvalidArgumentError(absl::StrCat("--eval_every=", o.eval_every, ": must be >= 1"));
  if (o.eval_samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--eval_samples=", o.eval_samples, ": must be >= 1"));
  }
  ASSIGN_OR_RETURN(const std::vector<Variant> variants, ParseVariants(o.exchanges));
  return PlanCells(variants, o.nodes, o.factors);
}

}  // namespace psring::bench::tta
