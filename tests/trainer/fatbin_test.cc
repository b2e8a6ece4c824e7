// The CUDA kernels' object (nvcc's output, tools/cuda.bzl) carries machine code for sm_80 and sm_90 and
// compute_90 PTX, so an H100/H200 runs the compiled code and later GPUs can JIT the PTX. Reads the object's
// .nv_fatbin section itself (ELF section table, then the fatbin's entry headers), so it needs no cuobjdump.
//
// Fatbin layout (as nvcc writes it): a header {u32 magic 0xBA55ED50, u16 version, u16 header size,
// u64 size of the entries}, then entries, each {u16 kind (1 PTX, 2 ELF), u16, u32 header size,
// u64 payload size, ..., u32 architecture at offset 28 (80, 90, ...)} followed by its payload.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace {

std::string g_object_path;

template <typename T>
T Read(const std::string& bytes, size_t offset) {
  T value{};
  if (offset + sizeof(T) <= bytes.size()) std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// The bytes of the ELF64 section called `name`, or "" when there is none.
std::string Section(const std::string& elf, const std::string& name) {
  if (elf.size() < 64 ||
      elf.compare(0, 4,
                  "\x7f"
                  "ELF") != 0 ||
      elf[4] != 2)
    return "";
  const uint64_t shoff = Read<uint64_t>(elf, 0x28);
  const uint16_t shentsize = Read<uint16_t>(elf, 0x3A);
  const uint16_t shnum = Read<uint16_t>(elf, 0x3C);
  const uint16_t shstrndx = Read<uint16_t>(elf, 0x3E);
  const uint64_t names = Read<uint64_t>(elf, shoff + shstrndx * shentsize + 0x18);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint64_t header = shoff + static_cast<uint64_t>(i) * shentsize;
    const uint32_t name_offset = Read<uint32_t>(elf, header);
    const uint64_t offset = Read<uint64_t>(elf, header + 0x18);
    const uint64_t size = Read<uint64_t>(elf, header + 0x20);
    if (names + name_offset < elf.size() && elf.c_str() + names + name_offset == name &&
        offset + size <= elf.size()) {
      return elf.substr(offset, size);
    }
  }
  return "";
}

// (kind, architecture) of every entry of every fatbin in `section`.
std::set<std::pair<int, int>> Entries(const std::string& section) {
  std::set<std::pair<int, int>> entries;
  size_t fatbin = 0;
  while (fatbin + 16 <= section.size() && Read<uint32_t>(section, fatbin) == 0xBA55ED50u) {
    const size_t begin = fatbin + Read<uint16_t>(section, fatbin + 6);
    const size_t end = begin + Read<uint64_t>(section, fatbin + 8);
    for (size_t entry = begin; entry + 32 <= end && entry + 32 <= section.size();) {
      entries.emplace(Read<uint16_t>(section, entry), Read<uint32_t>(section, entry + 28));
      const size_t next = entry + Read<uint32_t>(section, entry + 4) + Read<uint64_t>(section, entry + 8);
      if (next <= entry) break;
      entry = next;
    }
    fatbin = (end + 7) / 8 * 8;  // fatbins in one section are 8-byte aligned
  }
  return entries;
}

TEST(FatbinTest, HoldsSm80AndSm90CodeAndCompute90Ptx) {
  std::ifstream in(g_object_path, std::ios::binary);
  ASSERT_TRUE(in) << "cannot read " << g_object_path;
  const std::string object((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string section = Section(object, ".nv_fatbin");
  ASSERT_FALSE(section.empty()) << g_object_path << " has no .nv_fatbin section";
  const std::set<std::pair<int, int>> entries = Entries(section);
  constexpr int kPtx = 1, kElf = 2;
  EXPECT_EQ(entries.count({kElf, 80}), 1u) << "no sm_80 machine code";
  EXPECT_EQ(entries.count({kElf, 90}), 1u) << "no sm_90 machine code (H100/H200)";
  EXPECT_EQ(entries.count({kPtx, 90}), 1u) << "no compute_90 PTX";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: fatbin_test OBJECT\n");
    return 2;
  }
  g_object_path = argv[1];
  return RUN_ALL_TESTS();
}
