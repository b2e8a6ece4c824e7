// The shard core's tests' helpers (shard_core_test.cc, shard_core_registration_test.cc): deterministic
// gradients, the reference step, a push-pull driven as the gRPC adapter drives it, a registered shard.
#ifndef PSRING_TESTS_PS_SHARD_CORE_FIXTURE_H_
#define PSRING_TESTS_PS_SHARD_CORE_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "ps/shard_core.h"
#include "trainer/optimizer.h"

namespace psring::ps {

inline constexpr trainer::SgdOptions kHyper = {0.5f, 0.9f, 0.01f};

// Distinct for every (rank, step, element), and not exactly representable: summation order shows.
inline std::vector<float> Gradient(int rank, int64_t step, size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = 0.1f * (rank + 1) + 0.01f * i - 0.03f * step;
  return g;
}

inline std::vector<float> Initial(size_t n) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = 0.25f * i - 1.0f;
  return p;
}

// The reference synchronous step: sum in rank order, divide by N, the trainer's optimizer.
inline void ReferenceStep(const std::vector<std::vector<float>>& grads, std::vector<float>* params,
                          std::vector<float>* momentum) {
  std::vector<float> mean = grads[0];
  for (size_t r = 1; r < grads.size(); ++r) {
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += grads[r][i];
  }
  if (grads.size() > 1) {
    for (float& m : mean) m /= static_cast<float>(grads.size());
  }
  trainer::SgdMomentumStep(kHyper, mean.data(), params->data(), momentum->data(), params->size());
}

// One synchronous push-pull as the gRPC adapter drives it: this thread delivers the gradient in pieces of
// `piece` elements, a second one collects the applied ranges as they become available.
inline absl::StatusOr<std::vector<float>> PushPull(ShardCore* core, const PushInfo& info,
                                                   const std::vector<float>& grad, uint64_t piece) {
  absl::StatusOr<SyncPush> push = core->StartSyncPush(info);
  if (!push.ok()) return push.status();
  const uint64_t count = push->gradient.size();
  std::vector<float> reply(count);
  absl::Status write_status;
  std::thread writer([&] {
    uint64_t got = 0;
    while (got < count) {
      absl::StatusOr<uint64_t> available =
          core->AwaitApplied(*push, std::min(count, got + core->chunk_elements()));
      if (!available.ok()) {
        write_status = available.status();
        return;
      }
      core->ReadParameters(got, *available - got,
                           [&](const float* p) { std::copy_n(p, *available - got, reply.data() + got); });
      got = *available;
    }
  });
  absl::Status read_status;
  for (uint64_t filled = 0; filled < count && read_status.ok();) {
    const uint64_t len = std::min(piece, count - filled);
    std::copy_n(grad.data() + filled, len, push->gradient.data() + filled);
    filled += len;
    read_status = core->Delivered(&*push, filled, [] { return false; });
  }
  if (!read_status.ok()) core->AbandonSyncPush(*push, read_status);
  writer.join();
  const absl::Status status = read_status.ok() ? write_status : read_status;
  core->FinishSyncPush(std::move(*push), status);
  if (!status.ok()) return status;
  return reply;
}

// Delivers the whole gradient of an admitted push at once (never blocks: a complete push is never ahead).
inline void DeliverAll(ShardCore* core, SyncPush* push, const std::vector<float>& grad) {
  std::copy(grad.begin(), grad.end(), push->gradient.begin());
  ASSERT_TRUE(core->Delivered(push, grad.size(), [] { return false; }).ok());
}

inline bool Contains(const absl::Status& status, absl::string_view fragment) {
  return status.message().find(fragment) != absl::string_view::npos;
}

class ShardCoreTest : public ::testing::Test {
 protected:
  // A core of one shard holding `n` elements, every rank registered, rank 0 offering Initial(n).
  void Start(ShardOptions options, size_t n) {
    n_ = n;
    absl::StatusOr<std::unique_ptr<ShardCore>> core = ShardCore::Create(options);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    sessions_.assign(options.workers, 0);
    for (int rank = 0; rank < options.workers; ++rank) {
      absl::StatusOr<RegisteredRank> registered = Register(rank, rank == 0 ? Initial(n) : std::vector<float>());
      ASSERT_TRUE(registered.ok()) << registered.status();
      EXPECT_EQ(registered->params, Initial(n));
    }
  }

  absl::StatusOr<RegisteredRank> Register(int rank, std::vector<float> initial) {
    Registration registration{rank, core_->options().workers, n_, hyper_};
    RETURN_IF_ERROR(core_->BeginRegistration(registration).status());
    if (!initial.empty()) RETURN_IF_ERROR(core_->OfferInitialParameters(registration, std::move(initial)));
    ASSIGN_OR_RETURN(RegisteredRank registered, core_->CompleteRegistration(registration));
    sessions_[rank] = registered.session;
    return registered;
  }

  PushInfo Info(int rank, int64_t step, int64_t trainer_step = 0) {
    return PushInfo{rank, sessions_[rank], step, n_, trainer_step};
  }

  // Every rank pushes Gradient(rank, step) from its own thread, in pieces of rank + 1 elements.
  std::vector<absl::StatusOr<std::vector<float>>> RunStep(int64_t step) {
    const int workers = core_->options().workers;
    std::vector<absl::StatusOr<std::vector<float>>> replies(workers, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < workers; ++r) {
      threads.emplace_back([&, r] { replies[r] = PushPull(core_.get(), Info(r, step), Gradient(r, step, n_), r + 1); });
    }
    for (std::thread& t : threads) t.join();
    return replies;
  }

  uint64_t n_ = 0;
  trainer::SgdOptions hyper_ = kHyper;  // what Register() announces
  std::unique_ptr<ShardCore> core_;
  std::vector<absl::uint128> sessions_;
};

inline ShardOptions SyncOptions(int workers) {
  ShardOptions options;
  options.workers = workers;
  options.chunk_bytes = 2 * sizeof(float);  // replies in ranges of 2 elements: 7 = 2 + 2 + 2 + 1
  options.step_timeout = absl::Seconds(20);
  return options;
}

}  // namespace psring::ps

#endif  // PSRING_TESTS_PS_SHARD_CORE_FIXTURE_H_
