// A TCP port free on 127.0.0.1 right now, for tests whose server must listen on a port its clients are told
// up front (the rendezvous store, ring workers): bound with port 0 (the kernel picks) and released on return.
// Another process may take it before the test binds it again; the callers' tests are short and bind at once.
// Fails the current test and returns 0 when no socket can be bound.
#ifndef PSRING_TESTS_TESTING_FREE_PORT_H_
#define PSRING_TESTS_TESTING_FREE_PORT_H_

#include "absl/status/statusor.h"
#include "common/socket.h"
#include "gtest/gtest.h"

namespace psring::testing {

inline int FreeLoopbackPort() {
  absl::StatusOr<Socket> socket = ListenTcp("127.0.0.1", 0);
  if (!socket.ok()) {
    ADD_FAILURE() << "cannot bind a loopback port: " << socket.status();
    return 0;
  }
  absl::StatusOr<int> port = LocalPort(*socket);
  if (!port.ok()) {
    ADD_FAILURE() << "cannot read the bound port: " << port.status();
    return 0;
  }
  return *port;
}

}  // namespace psring::testing

#endif  // PSRING_TESTS_TESTING_FREE_PORT_H_
