#include "ps/binary_main.h"

#include "common/binary_main.h"
#include "ps/wire.h"

namespace psring::ps {

int RunMain(int argc, char** argv, absl::string_view name,
            absl::FunctionRef<absl::Status(const std::vector<std::string>&)> run) {
  return psring::RunMain(argc, argv, name, [&](const std::vector<std::string>& positional) {
    TuneMallocForTensors();
    QuietGrpcLogs();
    return run(positional);
  });
}

}  // namespace psring::ps
