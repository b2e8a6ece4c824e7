// TLS between PsExchange and the server, with a self-signed certificate made by openssl at test time
// (skipped when openssl is not installed); a plaintext client cannot talk to a TLS server. How the server
// reports what keeps it from listening: an unusable certificate or key, a busy port.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/exit_codes.h"
#include "common/socket.h"
#include "gtest/gtest.h"
#include "ps/client.h"
#include "ps/server.h"
#include "ps/wire.h"
#include "tests/testing/temp_dir.h"

namespace psring::ps {
namespace {

// A self-signed certificate for "psring-test" and its key in a fresh folder; false when openssl failed.
bool MakeCertificate(const std::string& name, std::string* cert, std::string* key) {
  const std::string dir = psring::testing::FreshTempPath(name);
  std::filesystem::create_directories(dir);
  *cert = dir + "/cert.pem";
  *key = dir + "/key.pem";
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=psring-test "
      "-addext subjectAltName=DNS:psring-test -keyout " +
      *key + " -out " + *cert + " > /dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

TEST(TlsTest, ExchangeOverTls) {
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) GTEST_SKIP() << "openssl is not installed";
  std::string cert, key;
  ASSERT_TRUE(MakeCertificate("tls", &cert, &key));

  ServerOptions server_options;
  server_options.bind_addr = "127.0.0.1";
  server_options.tls_cert_file = cert;
  server_options.tls_key_file = key;
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status();

  PsClientOptions options;
  options.servers = {absl::StrCat("127.0.0.1:", (*server)->port())};
  options.timeout = absl::Seconds(10);
  options.reconnect_timeout = absl::Seconds(1);
  std::vector<float> params = {1, 2, 3, 4}, grads = {1, 1, 1, 1};
  const trainer::FloatBuffer p{params.data(), params.size()}, g{grads.data(), grads.size()};

  absl::StatusOr<std::unique_ptr<PsExchange>> plaintext = PsExchange::Create(options);
  ASSERT_TRUE(plaintext.ok());
  EXPECT_FALSE((*plaintext)->SyncInitialParameters(p).ok());

  // A certificate that does not name the target: the error says what to check, not only that a handshake
  // shut down.
  options.tls_ca_file = cert;
  options.tls_target_name = "not-the-server";
  absl::StatusOr<std::unique_ptr<PsExchange>> mismatched = PsExchange::Create(options);
  ASSERT_TRUE(mismatched.ok());
  const absl::Status refused = (*mismatched)->SyncInitialParameters(p);
  EXPECT_NE(refused.message().find("TLS handshake failed: check that --tls_ca"), std::string::npos) << refused;

  options.tls_target_name = "psring-test";
  absl::StatusOr<std::unique_ptr<PsExchange>> secure = PsExchange::Create(options);
  ASSERT_TRUE(secure.ok());
  ASSERT_TRUE((*secure)->SyncInitialParameters(p).ok());
  absl::StatusOr<trainer::ExchangeOutcome> out = (*secure)->Exchange(0, g, p);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(params, (std::vector<float>{1, 2, 3, 4}));  // the server applied a step
  EXPECT_EQ((*server)->service()->version(), 1u);
}

// Issue 24: a TLS worker against a plaintext server got ~10 gRPC "Handshake failed ... wrong version number"
// lines a second and a final hint about CA and certificate names. With QuietGrpcLogs (what every ps binary
// calls) gRPC prints nothing, and the error says the server does not use TLS.
TEST(TlsTest, TlsClientAgainstAPlaintextServerSaysTheServerDoesNotUseTls) {
  if (std::getenv("GRPC_VERBOSITY") != nullptr) GTEST_SKIP() << "GRPC_VERBOSITY is set: gRPC logs as asked";
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) GTEST_SKIP() << "openssl is not installed";
  QuietGrpcLogs();
  std::string ca, key;
  ASSERT_TRUE(MakeCertificate("tls_plain", &ca, &key));
  ServerOptions server_options;
  server_options.bind_addr = "127.0.0.1";
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status();

  PsClientOptions options;
  options.servers = {absl::StrCat("127.0.0.1:", (*server)->port())};
  options.timeout = absl::Seconds(3);
  options.reconnect_timeout = absl::Seconds(2);
  options.tls_ca_file = ca;
  options.tls_target_name = "psring-test";
  std::vector<float> params = {1, 2, 3, 4};
  const trainer::FloatBuffer p{params.data(), params.size()};
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<PsExchange>> tls = PsExchange::Create(options);
  ASSERT_TRUE(tls.ok()) << tls.status();
  const absl::Status refused = (*tls)->SyncInitialParameters(p);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_NE(refused.message().find("does not use TLS"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("--tls_cert"), std::string::npos) << refused;
  EXPECT_EQ(printed.find("Handshake failed"), std::string::npos) << printed;
}

TEST(TlsTest, UnusablePemIsReportedAsSuchNotAsABusyPort) {
  const std::string dir = psring::testing::FreshTempPath("bad_pem");
  std::filesystem::create_directories(dir);
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  for (const std::string& path : {cert, key}) std::ofstream(path) << "not a PEM file\n";
  for (int port : {0, FreeLoopbackPort().value()}) {  // the kernel's choice, and a given free port
    ServerOptions options;
    options.bind_addr = "127.0.0.1";
    options.port = port;
    options.tls_cert_file = cert;
    options.tls_key_file = key;
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
    ASSERT_FALSE(server.ok()) << "port " << port;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << server.status();
    EXPECT_FALSE(IsPortInUse(server.status())) << server.status();
    EXPECT_NE(server.status().message().find("--tls_key"), std::string::npos) << server.status();
  }
}

TEST(ServerStartTest, BusyPortIsMarkedPortInUse) {
  absl::StatusOr<Socket> taken = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(taken.ok()) << taken.status();
  ServerOptions options;
  options.bind_addr = "127.0.0.1";
  options.port = *LocalPort(*taken);
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(IsPortInUse(server.status())) << server.status();
  EXPECT_NE(server.status().message().find("--port"), std::string::npos) << server.status();
}

// Issue 24: our port-in-use message came after gRPC's own "E1125 ... chttp2_server.cc" line.
TEST(ServerStartTest, BusyPortPrintsNoGrpcLineBeforeOurMessage) {
  if (std::getenv("GRPC_VERBOSITY") != nullptr) GTEST_SKIP() << "GRPC_VERBOSITY is set: gRPC logs as asked";
  QuietGrpcLogs();
  absl::StatusOr<Socket> taken = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(taken.ok()) << taken.status();
  ServerOptions options;
  options.bind_addr = "127.0.0.1";
  options.port = *LocalPort(*taken);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(server.ok());
  EXPECT_TRUE(IsPortInUse(server.status())) << server.status();
  EXPECT_EQ(printed.find("chttp2"), std::string::npos) << printed;
}

}  // namespace
}  // namespace psring::ps
