// One TCP port free on 127.0.0.1 right now (common/socket.h FreeLoopbackPorts), for tests whose server must
// listen on a port its clients are told up front (the rendezvous store, ring workers); the callers bind it at
// once. Fails the current test and returns 0 when no socket can be bound.
#ifndef PSRING_TESTS_TESTING_FREE_PORT_H_
#define PSRING_TESTS_TESTING_FREE_PORT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/socket.h"
#include "gtest/gtest.h"

namespace psring::testing {

inline int FreeLoopbackPort() {
  absl::StatusOr<std::vector<int>> ports = FreeLoopbackPorts(1);
  if (!ports.ok()) {
    ADD_FAILURE() << "cannot find a free loopback port: " << ports.status();
    return 0;
  }
  return ports->front();
}

}  // namespace psring::testing

#endif  // PSRING_TESTS_TESTING_FREE_PORT_H_
