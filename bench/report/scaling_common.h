// What the scaling reports share (with Sizes and ExchangesRun of bench/model/sweep_model.h) (tables, verdicts, figures, files and the replay report): finding runs,
// sizes and exchanges of a result, and the units they are printed in. Pure functions.
#ifndef PSRING_BENCH_REPORT_SCALING_COMMON_H_
#define PSRING_BENCH_REPORT_SCALING_COMMON_H_

#include <cstddef>
#include <string>
#include <vector>

#include "bench/core/exchange.h"
#include "bench/core/run_record.h"
#include "bench/model/sweep_model.h"

namespace psring::bench {

inline constexpr double kMiB = 1 << 20;

// Below a VERDICT table with a `*` cell (an EMULATOR-BOUND run).
inline constexpr char kEmulatorBoundFootnote[] =
    "# * EMULATOR-BOUND: the box, not the network, bound the run: shown, never named fastest\n";

// "4 MiB", "64 KiB", "512 B" (3 significant digits).
std::string Size(double bytes);
int MaxMeasuredNodes(const ScalingResult& result);
// T1, one worker's step without any exchange (compute, data, optimizer), the baseline of the scaling
// efficiency: in train mode the smallest step - exchange among the runs at the smallest N (one worker alone,
// least CPU contention); in gradient mode the assumed --compute_ms (0 = none).
double SingleWorkerStepSeconds(const ScalingResult& result);
// The successful run of `e` at N and S, or nullptr.
const RunRecord* Find(const ScalingResult& result, Exchange e, int nodes, size_t bytes);
// Integer node counts for model curves: every N up to 16, then quarter octaves (smooth on a log2 axis).
std::vector<int> ModelNodes(int max_nodes);
// "100 Mbit/s", "1 Gbit/s" or "unlimited".
std::string LinkText(const ScalingResult& result);

}  // namespace psring::bench

#endif  // PSRING_BENCH_REPORT_SCALING_COMMON_H_
