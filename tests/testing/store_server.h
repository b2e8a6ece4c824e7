// The TcpStore server options the store tests share: loopback, any free port, `world_size` ranks, the token
// `token` for job "job-a", a short shutdown grace.
#ifndef PSRING_TESTS_TESTING_STORE_SERVER_H_
#define PSRING_TESTS_TESTING_STORE_SERVER_H_

#include <string>

#include "absl/time/time.h"
#include "common/auth.h"
#include "common/tcp_store.h"

namespace psring::testing {

inline TcpStoreOptions LoopbackStoreServer(int world_size, const std::string& token) {
  TcpStoreOptions o;
  o.is_server = true;
  o.master_port = 0;
  o.bind_addr = "127.0.0.1";
  o.world_size = world_size;
  o.auth = AuthConfig{token, "job-a"};
  o.shutdown_grace = absl::Milliseconds(200);
  return o;
}

}  // namespace psring::testing

#endif  // PSRING_TESTS_TESTING_STORE_SERVER_H_
