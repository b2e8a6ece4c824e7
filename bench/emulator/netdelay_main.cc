// netdelay: one-way latency for the emulated cluster on kernels without sch_netem.
//
// The emulated cluster's switch is a bridge in a namespace of its own (bench/cluster.h). With br_netfilter,
// every IPv4 frame the bridge forwards from one host port to another passes the switch namespace's iptables
// FORWARD chain; the cluster sends them to an NFQUEUE, and this program, started inside that namespace, holds
// each queued packet for --latency and then accepts it:
//
//   host A eth0 --[tbf]--> hA ==bridge==> FORWARD -> NFQUEUE n -> (held here for d) -> hB --[tbf]--> eth0
//   host B
//
// So every packet between two hosts, in either direction, is delayed exactly once by d: the one-way
// host-to-host latency is d (plus serialisation), ping's RTT 2d, and the kernels' TCP on the hosts sees a
// real RTT (slow start, windows, window/RTT throughput caps). The delay is on the switch, outside the
// sending host's stack; held on the sender's own OUTPUT chain it would throttle TCP (TCP small queues).
//
// Packets of a queue are released in arrival order, so one batch verdict ("accept every packet up to id k") releases
// all that are due. Only metadata is copied to user space (no payload), and GSO packets are queued whole.
// A queue that overflows drops (like a full switch buffer), never passes a packet undelayed.
//
// With --queues=Q it serves Q queues, one thread each (the cluster's rule is then --queue-balance).
//
// Prints "netdelay: ready queue=<n>[..<m>] latency=<d>" on stdout once bound to every queue (the cluster adds the
// iptables rule only then), and on SIGTERM/SIGINT a summary on stderr. With --stats_file it rewrites that
// file every 100 ms with cumulative counters (one line: `packets=.. late_over_100us=.. late_over_1ms=..
// max_late_us=.. max_held=..`), which the harness reads before and after each run: a delay program starved of
// CPU releases late, and that makes the emulator, not the network, the bottleneck.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
}

#include "absl/flags/flag.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/binary_main.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"

ABSL_FLAG(absl::Duration, latency, absl::Milliseconds(1),
          "How long every queued packet is held before it is accepted (the one-way host-to-host latency), "
          "e.g. 5ms, 250us. 0 accepts at once.");
ABSL_FLAG(int, queue_num, 0,
          "The first NFQUEUE number to bind (iptables ... -j NFQUEUE --queue-num N), 0..65535.");
ABSL_FLAG(int, queues, 1,
          "How many NFQUEUEs to serve, --queue_num onwards, each on a thread of its own (iptables ... -j NFQUEUE "
          "--queue-balance FIRST:LAST spreads host pairs over them): one thread holding every packet of a "
          "16-host, 20 ms cluster falls behind. 1..64.");
ABSL_FLAG(int, max_held, 1 << 16,
          "Packets the kernel may hold for this program at once; more are dropped (a full switch buffer).");
ABSL_FLAG(
    absl::Duration, wake_ahead, absl::Microseconds(60),
    "Release packets due within this much of now, and wake this much before the next is due: the mean "
    "lateness of a timer wake-up on this kind of VM (50-70 us measured), so held packets are on time on "
    "average rather than always late.");
ABSL_FLAG(
    bool, realtime, true,
    "Run under SCHED_FIFO (as a switch has its own silicon): on a box whose cores the emulated hosts keep "
    "busy, a normally scheduled delay program wakes late and adds latency. Falls back with a warning when "
    "not permitted.");
ABSL_FLAG(std::string, stats_file, "",
          "Rewrite this file every 100 ms with cumulative counters (packets, late releases, most held). "
          "Empty: none.");

namespace psring::bench {
namespace {

constexpr int kMaxQueues = 64;

// Set by SIGTERM/SIGINT; lock-free, so the handler may store it and every queue's thread read it.
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Held {
  uint32_t id;
  int64_t due_ns;
};

struct Stats {
  uint64_t packets = 0;
  uint64_t late_over_100us = 0;
  uint64_t late_over_1ms = 0;
  int64_t max_late_ns = 0;
  size_t max_held = 0;
  // The wait between the packet's arrival at the switch (the kernel's receive timestamp) and this program's
  // read of it: the box's own forwarding backlog, which the lateness above cannot see.
  uint64_t stamped = 0;
  uint64_t waited_over_1ms = 0;
  int64_t waited_sum_ns = 0;
  int64_t max_waited_ns = 0;
  std::string Line() const {
    return absl::StrCat("packets=", packets, " late_over_100us=", late_over_100us,
                        " late_over_1ms=", late_over_1ms, " max_late_us=", max_late_ns / 1000,
                        " max_held=", max_held, " stamped=", stamped, " waited_over_1ms=", waited_over_1ms,
                        " waited_sum_us=", waited_sum_ns / 1000, " max_waited_us=", max_waited_ns / 1000,
                        "\n");
  }
};

// One NFQUEUE and the thread that serves it. Packets of one queue are released in arrival order; the kernel
// puts both directions of a host pair in the same queue (--queue-balance hashes the two addresses), so a
// flow's packets stay in order across queues.
struct Queue {
  int number = 0;
  nfq_handle* handle = nullptr;
  nfq_q_handle* queue = nullptr;
  std::deque<Held> held;
  int64_t latency_ns = 0;
  Stats stats;  // this thread's own; copied to `published` after each release
  absl::Mutex mu;
  Stats published ABSL_GUARDED_BY(mu);
  absl::Status status ABSL_GUARDED_BY(mu);  // why the thread stopped, when it failed
};

std::atomic<bool> g_failed{false};

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* data, void* arg) {
  auto* queue = static_cast<Queue*>(arg);
  const nfqnl_msg_packet_hdr* header = nfq_get_msg_packet_hdr(data);
  if (header == nullptr) return 0;
  timeval stamp{};
  if (nfq_get_timestamp(data, &stamp) == 0 && stamp.tv_sec > 0) {
    timespec wall{};
    clock_gettime(CLOCK_REALTIME, &wall);
    const int64_t waited = (static_cast<int64_t>(wall.tv_sec) - stamp.tv_sec) * 1000000000 +
                           (wall.tv_nsec - static_cast<int64_t>(stamp.tv_usec) * 1000);
    Stats& s = queue->stats;
    ++s.stamped;
    s.waited_sum_ns += waited;
    if (waited > 1000000) ++s.waited_over_1ms;
    s.max_waited_ns = std::max(s.max_waited_ns, waited);
  }
  queue->held.push_back(Held{ntohl(header->packet_id), NowNs() + queue->latency_ns});
  queue->stats.max_held = std::max(queue->stats.max_held, queue->held.size());
  return 0;
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(
      absl::StrCat(what, ": ", std::strerror(errno),
                   " (netdelay needs root/CAP_NET_ADMIN and the kernel's nfnetlink_queue)"));
}

// Written to a temporary file and renamed, so a reader sees a whole line; no fsync (milliseconds of stall
// per write would delay packets, and the file only matters while this program runs).
absl::Status WriteStats(const std::string& path, const Stats& stats) {
  const std::string temporary = path + ".tmp";
  const std::string line = stats.Line();
  // A new file every time (O_EXCL), never through a link (O_NOFOLLOW): this program runs as root, so it must
  // not truncate whatever a planted name points at. A leftover of a killed run is removed first.
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(temporary.c_str(), kFlags, 0600);
  if (fd < 0 && errno == EEXIST && unlink(temporary.c_str()) == 0) fd = open(temporary.c_str(), kFlags, 0600);
  if (fd < 0) return Errno(absl::StrCat("open ", temporary));
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!written || rename(temporary.c_str(), path.c_str()) != 0) return Errno(absl::StrCat("write ", path));
  return absl::OkStatus();
}

// Binds NFQUEUE `queue->number` on a netlink socket of its own (one per thread: no lock on the packet path).
absl::Status Bind(Queue* queue, int max_held) {
  queue->handle = nfq_open();
  if (queue->handle == nullptr) return Errno("nfq_open");
  queue->queue = nfq_create_queue(queue->handle, static_cast<uint16_t>(queue->number), &OnPacket, queue);
  if (queue->queue == nullptr)
    return Errno(absl::StrCat("bind to NFQUEUE ", queue->number, " (is another program bound to it?)"));
  if (nfq_set_mode(queue->queue, NFQNL_COPY_META, 0) < 0) return Errno("nfq_set_mode");
  if (nfq_set_queue_maxlen(queue->queue, static_cast<uint32_t>(max_held)) < 0)
    return Errno("nfq_set_queue_maxlen");
  // GSO packets whole (fewer, larger messages); older kernels without the flag segment them instead.
  (void)nfq_set_queue_flags(queue->queue, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
  const int fd = nfq_fd(queue->handle);
  nfnl_rcvbufsiz(nfq_nfnlh(queue->handle), 32u << 20);
  int one = 1;
  // A full socket buffer loses messages (their packets would stay queued); say so instead of failing reads.
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return absl::OkStatus();
}

void Unbind(Queue* queue) {
  if (queue->queue != nullptr) nfq_destroy_queue(queue->queue);
  if (queue->handle != nullptr) nfq_close(queue->handle);
  queue->queue = nullptr;
  queue->handle = nullptr;
}

// One queue's thread: read what arrived (timestamped as read), release what is due in one batch verdict
// ("accept every packet up to id k"), sleep until the next is due or a packet arrives.
absl::Status Serve(Queue* queue, int64_t ahead_ns) {
  // Wake-ups to the nanosecond the kernel can give (the default 50 us slack would add to every packet).
  // Both are per thread on Linux.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (absl::GetFlag(FLAGS_realtime)) {
    sched_param param = {};
    param.sched_priority = 10;
    if (sched_setscheduler(0, SCHED_FIFO, &param) != 0 && queue->number == absl::GetFlag(FLAGS_queue_num)) {
      std::fprintf(stderr, "netdelay: warning: no SCHED_FIFO (%s); releases may be late on a busy box\n",
                   std::strerror(errno));
    }
  }
  const int fd = nfq_fd(queue->handle);
  std::vector<char> buffer(1 << 17);
  while (!g_stop && !g_failed.load(std::memory_order_relaxed)) {
    for (;;) {
      const ssize_t n = recv(fd, buffer.data(), buffer.size(), 0);
      if (n > 0) {
        nfq_handle_packet(queue->handle, buffer.data(), static_cast<int>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Errno("recv from the netfilter queue");
      break;
    }
    const int64_t now = NowNs();
    uint32_t last_due = 0;
    bool any_due = false;
    Stats& s = queue->stats;
    while (!queue->held.empty() && queue->held.front().due_ns <= now + ahead_ns) {
      const int64_t late = now - queue->held.front().due_ns;
      ++s.packets;
      if (late > 100000) ++s.late_over_100us;
      if (late > 1000000) ++s.late_over_1ms;
      s.max_late_ns = std::max(s.max_late_ns, late);
      last_due = queue->held.front().id;
      any_due = true;
      queue->held.pop_front();
    }
    if (any_due) {
      if (nfq_set_verdict_batch(queue->queue, last_due, NF_ACCEPT) < 0) return Errno("nfq_set_verdict_batch");
      absl::MutexLock lock(&queue->mu);
      queue->published = s;
    }
    // Sleep until the next packet is due or a new one arrives; at most 100 ms, to see a stop.
    int64_t wait_ns = 100000000;
    if (!queue->held.empty()) wait_ns = std::min(wait_ns, queue->held.front().due_ns - ahead_ns - now);
    if (wait_ns < 0) wait_ns = 0;
    pollfd pfd{fd, POLLIN, 0};
    const timespec timeout{static_cast<time_t>(wait_ns / 1000000000),
                           static_cast<long>(wait_ns % 1000000000)};
    if (ppoll(&pfd, 1, &timeout, nullptr) < 0 && errno != EINTR) return Errno("ppoll");
  }
  // Held packets are released at once on the way out: a stopping emulator must not strand connections.
  if (!queue->held.empty()) nfq_set_verdict_batch(queue->queue, queue->held.back().id, NF_ACCEPT);
  absl::MutexLock lock(&queue->mu);
  queue->published = queue->stats;
  return absl::OkStatus();
}

// The counters of every queue together: sums, and the largest of the maxima.
Stats Total(std::vector<std::unique_ptr<Queue>>& queues) {
  Stats total;
  for (auto& q : queues) {
    absl::MutexLock lock(&q->mu);
    total.packets += q->published.packets;
    total.late_over_100us += q->published.late_over_100us;
    total.late_over_1ms += q->published.late_over_1ms;
    total.max_late_ns = std::max(total.max_late_ns, q->published.max_late_ns);
    total.max_held = std::max(total.max_held, q->published.max_held);
    total.stamped += q->published.stamped;
    total.waited_over_1ms += q->published.waited_over_1ms;
    total.waited_sum_ns += q->published.waited_sum_ns;
    total.max_waited_ns = std::max(total.max_waited_ns, q->published.max_waited_ns);
  }
  return total;
}

absl::Status Run() {
  const int64_t latency_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_latency));
  const int64_t ahead_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_wake_ahead));
  const int queue_num = absl::GetFlag(FLAGS_queue_num);
  const int queue_count = absl::GetFlag(FLAGS_queues);
  const int max_held = absl::GetFlag(FLAGS_max_held);
  const std::string stats_file = absl::GetFlag(FLAGS_stats_file);
  if (latency_ns < 0) return absl::InvalidArgumentError("--latency must be >= 0 (e.g. 5ms)");
  if (ahead_ns < 0) return absl::InvalidArgumentError("--wake_ahead must be >= 0 (e.g. 60us)");
  if (queue_count < 1 || queue_count > kMaxQueues)
    return absl::InvalidArgumentError(absl::StrCat("--queues must be in 1..", kMaxQueues));
  if (queue_num < 0 || queue_num + queue_count - 1 > 65535)
    return absl::InvalidArgumentError("--queue_num .. --queue_num + --queues - 1 must be in 0..65535");
  if (max_held < 1) return absl::InvalidArgumentError("--max_held must be >= 1");

  // The kernel stamps received packets only while some socket asks for timestamps; this one does, so each
  // queued packet carries its arrival time at the switch (Stats: the wait before this program read it).
  const int stamp_socket = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (stamp_socket >= 0) {
    int on = 1;
    setsockopt(stamp_socket, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof(on));
  }
  std::vector<std::unique_ptr<Queue>> queues;
  struct Unbinder {
    std::vector<std::unique_ptr<Queue>>& queues;
    ~Unbinder() {
      for (auto& q : queues) Unbind(q.get());
    }
  } unbinder{queues};
  // Every queue bound before "ready": a packet queued with nobody bound to its queue would be dropped.
  for (int i = 0; i < queue_count; ++i) {
    queues.push_back(std::make_unique<Queue>());
    queues.back()->number = queue_num + i;
    queues.back()->latency_ns = latency_ns;
    RETURN_IF_ERROR(Bind(queues.back().get(), max_held));
  }
  std::printf("netdelay: ready queue=%d%s latency=%s\n", queue_num,
              queue_count > 1 ? absl::StrCat("..", queue_num + queue_count - 1).c_str() : "",
              absl::FormatDuration(absl::GetFlag(FLAGS_latency)).c_str());
  std::fflush(stdout);

  std::vector<std::thread> threads;
  for (auto& q : queues) {
    threads.emplace_back([queue = q.get(), ahead_ns] {
      absl::Status status = Serve(queue, ahead_ns);
      if (!status.ok()) {
        absl::MutexLock lock(&queue->mu);
        queue->status = std::move(status);
        g_failed = true;
      }
    });
  }
  // This thread writes the counters every 100 ms until a signal or a failed queue stops the program.
  absl::Status status;
  while (!g_stop && !g_failed) {
    if (!stats_file.empty()) {
      status = WriteStats(stats_file, Total(queues));
      if (!status.ok()) break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  g_stop = true;
  for (std::thread& t : threads) t.join();
  for (auto& q : queues) {
    absl::MutexLock lock(&q->mu);
    if (status.ok() && !q->status.ok()) status = q->status;
  }
  std::fprintf(stderr, "netdelay: stopped: %s", Total(queues).Line().c_str());
  return status;
}

}  // namespace
}  // namespace psring::bench

int main(int argc, char** argv) {
  psring::InitFlagsUsage(
      "Holds every packet of an NFQUEUE for --latency, then accepts it: the emulated cluster's switch "
      "latency on\n"
      "kernels without sch_netem (bench/netdelay_main.cc draws the set-up). The cluster starts it; by hand:\n"
      "  ip netns exec <switch-ns> netdelay --latency=5ms --queue_num=0 &\n"
      "  ip netns exec <switch-ns> iptables -A FORWARD -j NFQUEUE --queue-num 0\n"
      "With --queues=4: ... -j NFQUEUE --queue-balance 0:3",
      {"bench/netdelay"});
  struct sigaction action = {};
  action.sa_handler = psring::bench::OnSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return psring::RunMain(argc, argv, "netdelay",
                         [](const std::vector<std::string>&) { return psring::bench::Run(); });
}
