// The PS's chunk sized by the link (scaling --ps_chunks=bdp): an opt-in variant of the harness's PS flags,
// not the calibrated default.
//
// Each PS worker pushes on one HTTP/2 stream per shard, one message per chunk. The servers' fixed stream
// windows leave each connection gRPC's 64 KiB window, which grows only by the message a server is reading
// (bench/PERFORMANCE.md 9.36), so a connection carries about 64 KiB + one chunk per round trip. The harness's
// 32 KiB chunk on links <= 1 Gbit/s (bench/harness/launch.cc, chosen against incast at 1-5 ms) then holds a
// PS step at 20-50 ms to a few hundred KiB per round trip. This rule sizes the chunk by the bandwidth-delay
// product of one connection's share of a server host's link:
//
//   C = clamp(pow2_round(B x 2L / fan_in), 32 KiB, 2 MiB),   fan_in = PsFanIn(placement)
//
// so the bytes in flight into a server link stay about B x 2L + N x 64 KiB: no deeper queue than the
// harness's 32 KiB chunks ask. Unauthenticated streams are never read, so their windows never grow (the flood
// bound holds). Measured side by side with the harness's chunks (bench/results/ps_chunk_rule_2026-12-07.txt,
// ps_chunk_rule_other_links_2026-12-07.txt): 1.3-7.7x faster at 20-40 ms on 200 Mbit/s, but 7-18 % slower for
// the co-located PS at N = 5 on 50 Mbit/s (two sessions; at 80 Mbit/s N = 6 8-9 % in one, within 1 % in a
// rerun), where the larger chunk's pipeline fill (about 2 N C / B) costs more than the window it frees. A
// grid of chunks and claims on held-out conditions (PERFORMANCE.md 9.38-9.39) add a cap: ps-1's and the
// dedicated PS's best chunk is the largest below the servers' ports' drop onset, which lay at
// F (64 KiB + C) = 0.85-1.1 x B (2L + the port's queue and burst) at N = 4-12 (none at 0.75 or less); and a
// gate: the co-located PS gains from a larger chunk only where B 2L / (N - 1) >= 192 KiB. A rule for the
// default needs both; this one has neither.
//
//   const int64_t chunk = BdpChunkBytes(cluster.link_bytes_per_second(), cluster.latency_seconds(),
//                                       PsFanIn(placement));   // 0: keep the harness's chunk
#ifndef PSRING_BENCH_HARNESS_PS_CHUNK_RULE_H_
#define PSRING_BENCH_HARNESS_PS_CHUNK_RULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/core/exchange.h"

namespace psring::bench {

// --ps_chunks: "harness" (false: launch.cc's chunks, 32 KiB on links <= 1 Gbit/s and the PS's 1 MiB above,
// the calibrated default) or "bdp" (true: BdpChunkBytes where it is larger than 32 KiB).
absl::StatusOr<bool> ParsePsChunks(const std::string& text);

// The most worker connections that cross one server host's link: for each server host, the workers on other
// hosts (a worker on the server's own host talks over loopback). 0 without servers.
int PsFanIn(const Placement& placement);

// The rule's chunk in bytes for a link of `link_bytes_per_second` (0: unlimited) and one-way `latency_s`, or
// 0 where it keeps the harness's: an unlimited or faster than 1 Gbit/s link (the harness's 1 MiB chunk; the
// rule was measured at 200 Mbit/s only), no latency, no fan-in, or a result of 32 KiB.
int64_t BdpChunkBytes(double link_bytes_per_second, double latency_s, int fan_in);

}  // namespace psring::bench

#endif  // PSRING_BENCH_HARNESS_PS_CHUNK_RULE_H_
