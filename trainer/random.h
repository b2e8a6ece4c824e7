// A small, portable, seedable random number generator (SplitMix64 seeding xoshiro256**).
//
// The C++ standard library's distributions differ between implementations, so parameter initialisation,
// shuffling and the synthetic data set use this generator to give the same numbers everywhere from a seed.
// Not thread-safe; cheap to copy.
#ifndef PSRING_TRAINER_RANDOM_H_
#define PSRING_TRAINER_RANDOM_H_

#include <cmath>
#include <cstdint>

namespace psring::trainer {

class Rng {
 public:
  // Different (seed, stream) pairs give independent sequences.
  explicit Rng(uint64_t seed, uint64_t stream = 0) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (uint64_t& s : state_) s = SplitMix64(&x);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 random bits (exact in float).
  float UniformFloat() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }

  // Uniform in [lo, hi).
  float Uniform(float lo, float hi) { return lo + (hi - lo) * UniformFloat(); }

  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method).
  uint64_t Below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Standard normal (Box-Muller; one value per call keeps the state simple).
  float Normal() {
    const double u1 = (static_cast<double>(Next() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    const double u2 = static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix64(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t state_[4];
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_RANDOM_H_
