// One table format for every bench suite, after nccl-tests:
//
//   #  nranks 4  exchange ring-tcp
//   #       size         count    type   redop    time(us)  algbw(GB/s)  busbw(GB/s)  #wrong
//          4096          1024   float     sum       85.21        0.05         0.07       0
//   ...
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 1.234
//
// Comment lines start with '#'. algbw = size / time; busbw = algbw * BusFactor (2(N-1)/N for allreduce), so
// busbw compares with link bandwidth whatever N is. bench/PERFORMANCE.md derives every figure.
// Extra columns (e.g. "srv_MB" for the bytes the busiest PS server moved) follow #wrong.
#ifndef PSRING_BENCH_REPORT_TABLE_H_
#define PSRING_BENCH_REPORT_TABLE_H_

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "bench/core/exchange.h"  // AllReduceBusFactor, for the tables' busbw

namespace psring::bench {

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  std::string type = "float";
  std::string redop = "sum";
  double time_us = 0;
  double algbw_gbs = 0;  // GB/s = 1e9 bytes/s
  double busbw_gbs = 0;
  int64_t wrong = 0;     // elements that differ from the closed-form expected result
  std::vector<double> extra;  // one value per extra column
  // Printed after the columns; kept out of the average bus bandwidth and counted in the footer
  // (bench/probes.h: the emulating box, not the network, bound the run).
  bool emulator_bound = false;
  // Printed after the row (after EMULATOR-BOUND), e.g. why its model columns are not of this run; "": none.
  std::string note;
};

// Fills time_us, algbw and busbw of a row from a measured time in seconds.
Row MakeRow(size_t bytes, size_t count, double seconds, double bus_factor, int64_t wrong);

// Prints the table as rows arrive (so long runs show progress) and keeps them for the footer and JSON.
class Table {
 public:
  Table(std::ostream* out, std::vector<std::string> extra_columns = {});
  void Comment(const std::string& line);  // "# " + line
  void Header();
  void Add(const Row& row);
  // "# Out of bounds values : W OK|FAILED", "# Avg bus bandwidth : X" (over rows not EMULATOR-BOUND) and,
  // when any, "# EMULATOR-BOUND rows : K (...)".
  void Footer();
  int64_t total_wrong() const;
  double avg_busbw() const;
  const std::vector<Row>& rows() const { return rows_; }
  // {"rows":[{"size":..,"count":..,"time_us":..,"algbw":..,"busbw":..,"wrong":..,<extra>:..}], "avg_busbw":..}
  std::string ToJson() const;

 private:
  std::ostream* out_;
  std::vector<std::string> extra_columns_;
  std::vector<Row> rows_;
};

// A check's outcome against a bound fixed before the run, allowing for the run's own measured noise: a value
// on the wrong side of the bound by no more than `noise` (relative: |value / bound - 1| <= noise, noise the
// step-to-step spread the workers measured) gives no verdict, since a rerun could land on either side.
enum class CheckOutcome { kPass, kFail, kWithinNoise };
// `at_most`: the value must be <= bound (else >= bound). `noise` >= 0.
CheckOutcome JudgeCheck(double value, double bound, bool at_most, double noise);
// Several conditions of one check: FAIL if any fails beyond the noise, else no verdict if any misses within
// it, else PASS.
CheckOutcome Combine(std::initializer_list<CheckOutcome> outcomes);
// The line for `outcome`: "# check <what>: PASS", "# check <what>: FAIL", or "# info <what>: misses by less
// than the measured step-to-step noise <noise> %: no verdict", each ending in "\n".
std::string CheckLine(const std::string& what, CheckOutcome outcome, double noise);

// Parses a size like "4K", "64M", "1G" or "512" (bytes). Returns 0 on bad input.
size_t ParseSize(const std::string& text);

// Sizes from min to max (inclusive), multiplying by `factor`, like nccl-tests -b -e -f.
std::vector<size_t> SizeSweep(size_t min_bytes, size_t max_bytes, int factor);

// CPU seconds (user + system) this process's threads have used so far (getrusage). The benches' cpu_ns/B
// column divides its growth over the measured steps by the bytes exchanged (bench/PERFORMANCE.md 10).
double ProcessCpuSeconds();

}  // namespace psring::bench

#endif  // PSRING_BENCH_REPORT_TABLE_H_
