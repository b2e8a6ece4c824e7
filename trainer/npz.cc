#include "trainer/npz.h"

#include <zlib.h>

#include <cstring>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/read_file.h"
#include "common/status_macros.h"

namespace psring::trainer {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndSignature = 0x06054b50;
// 1980-01-01 00:00, the earliest DOS time: archives do not depend on the clock.
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;

void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>(v >> 8));
}

void Put32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The largest expansion of deflate (RFC 1951: a 258-byte match in about 2 bits, plus block overhead).
constexpr uint32_t kMaxDeflateRatio = 1032;

uint16_t Get16(const std::string& s, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(s[at]) | (static_cast<uint8_t>(s[at + 1]) << 8));
}

uint32_t Get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

int64_t ElementSize(const std::string& descr) {
  if (descr.size() < 3) return -1;
  int64_t size = 0;
  if (!absl::SimpleAtoi(descr.substr(2), &size) || size < 0) return -1;
  return size;
}

template <typename T>
std::string RawBytes(absl::Span<const T> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// The value text after `'key':` in a .npy header dict, up to the next top-level comma.
absl::StatusOr<std::string> HeaderField(const std::string& header, const std::string& key,
                                        const std::string& name) {
  const std::string tag = absl::StrCat("'", key, "':");
  const size_t at = header.find(tag);
  if (at == std::string::npos) {
    return absl::DataLossError(absl::StrCat("array ", name, ": .npy header has no '", key, "': ", header));
  }
  size_t begin = at + tag.size();
  while (begin < header.size() && header[begin] == ' ') ++begin;
  size_t end = begin;
  if (end < header.size() && header[end] == '(') {
    end = header.find(')', begin);
    if (end == std::string::npos)
      return absl::DataLossError(absl::StrCat("array ", name, ": bad shape in ", header));
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  }
  return header.substr(begin, end - begin);
}

absl::StatusOr<std::string> Inflate(const std::string& compressed, size_t size, const std::string& what) {
  std::string out(size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return absl::InternalError("zlib inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  if (rc != Z_STREAM_END || z.avail_out != 0) {
    return absl::DataLossError(absl::StrCat(what, ": corrupt deflate data (zlib code ", rc, ")"));
  }
  return out;
}

}  // namespace

std::string EncodeNpy(const NpyArray& array) {
  std::string shape;
  if (array.shape.size() == 1) {
    shape = absl::StrCat("(", array.shape[0], ",)");
  } else {
    shape = absl::StrCat("(", absl::StrJoin(array.shape, ", "), ")");
  }
  std::string header =
      absl::StrCat("{'descr': '", array.descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64 and ended by '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kNpyMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  Put16(&out, static_cast<uint16_t>(header.size()));
  out += header;
  out += array.data;
  return out;
}

absl::StatusOr<NpyArray> DecodeNpy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kNpyMagic, 6) != 0) {
    return absl::DataLossError(absl::StrCat("array ", name, " is not a .npy file (bad magic)"));
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = Get16(bytes, 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return absl::DataLossError(absl::StrCat("array ", name, ": truncated .npy header"));
    header_len = Get32(bytes, 8);
    header_start = 12;
  } else {
    return absl::DataLossError(absl::StrCat("array ", name, ": unsupported .npy version ", major));
  }
  if (bytes.size() < header_start + header_len) {
    return absl::DataLossError(absl::StrCat("array ", name, ": truncated .npy header"));
  }
  const std::string header = bytes.substr(header_start, header_len);
  NpyArray array;
  ASSIGN_OR_RETURN(std::string descr, HeaderField(header, "descr", name));
  ASSIGN_OR_RETURN(std::string fortran, HeaderField(header, "fortran_order", name));
  ASSIGN_OR_RETURN(std::string shape, HeaderField(header, "shape", name));
  array.descr = std::string(absl::StripSuffix(absl::StripPrefix(descr, "'"), "'"));
  if (fortran != "False") {
    return absl::DataLossError(
        absl::StrCat("array ", name, " is in Fortran order; only C order is supported"));
  }
  const absl::string_view dims = absl::StripSuffix(absl::StripPrefix(shape, "("), ")");
  int64_t elements = 1;
  for (absl::string_view d : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v) || v < 0) {
      return absl::DataLossError(absl::StrCat("array ", name, ": bad shape ", shape));
    }
    array.shape.push_back(v);
    // Checked: a header's shape must not overflow into a small count that matches the data.
    if (__builtin_mul_overflow(elements, v, &elements)) {
      return absl::DataLossError(absl::StrCat("array ", name, ": shape ", shape, " has too many elements"));
    }
  }
  const int64_t element_size = ElementSize(array.descr);
  if (element_size < 0) return absl::DataLossError(absl::StrCat("array ", name, ": bad dtype ", array.descr));
  const size_t data_start = header_start + header_len;
  int64_t want_bytes = 0;
  if (__builtin_mul_overflow(elements, element_size, &want_bytes)) {
    return absl::DataLossError(absl::StrCat("array ", name, ": shape ", shape, " and dtype ", array.descr,
                                            " make more bytes than any file holds"));
  }
  const size_t want = static_cast<size_t>(want_bytes);
  if (bytes.size() - data_start != want) {
    return absl::DataLossError(absl::StrCat("array ", name, " of shape ", shape, " and dtype ", array.descr,
                                            " needs ", want, " data bytes but has ",
                                            bytes.size() - data_start));
  }
  array.data = bytes.substr(data_start);
  return array;
}

void NpzWriter::Add(const std::string& name, NpyArray array) { arrays_.emplace_back(name, std::move(array)); }

void NpzWriter::AddFloat32(const std::string& name, absl::Span<const float> values,
                           std::vector<int64_t> shape) {
  Add(name, NpyArray{"<f4", std::move(shape), RawBytes(values)});
}

void NpzWriter::AddInt64(const std::string& name, absl::Span<const int64_t> values) {
  Add(name, NpyArray{"<i8", {static_cast<int64_t>(values.size())}, RawBytes(values)});
}

void NpzWriter::AddInt64Scalar(const std::string& name, int64_t value) {
  Add(name, NpyArray{"<i8", {}, RawBytes(absl::MakeConstSpan(&value, 1))});
}

void NpzWriter::AddFloat32Scalar(const std::string& name, float value) {
  Add(name, NpyArray{"<f4", {}, RawBytes(absl::MakeConstSpan(&value, 1))});
}

void NpzWriter::AddString(const std::string& name, const std::string& value) {
  // NumPy has no zero-length byte-string dtype; "|S1" holding a NUL reads back as b''.
  Add(name, NpyArray{absl::StrCat("|S", std::max<size_t>(value.size(), 1)),
                     {},
                     value.empty() ? std::string(1, '\0') : value});
}

absl::StatusOr<std::string> NpzWriter::Serialize() const {
  std::string out;
  std::string central;
  for (const auto& [name, array] : arrays_) {
    const std::string file_name = name + ".npy";
    const std::string npy = EncodeNpy(array);
    if (out.size() + npy.size() + file_name.size() + 30 >= 0xffffffffull) {
      return absl::InvalidArgumentError(
          absl::StrCat("archive would exceed 4 GiB at array ", name, "; zip64 is not supported"));
    }
    const uint32_t crc = Crc32(npy);
    const uint32_t offset = static_cast<uint32_t>(out.size());
    const uint32_t size = static_cast<uint32_t>(npy.size());
    // Local file header: stored (method 0), sizes and CRC known up front, no data descriptor.
    Put32(&out, kLocalHeaderSignature);
    Put16(&out, 20);  // version needed: 2.0
    Put16(&out, 0);   // flags
    Put16(&out, 0);   // method: stored
    Put16(&out, 0);   // time
    Put16(&out, kDosDate);
    Put32(&out, crc);
    Put32(&out, size);
    Put32(&out, size);
    Put16(&out, static_cast<uint16_t>(file_name.size()));
    Put16(&out, 0);  // extra field length
    out += file_name;
    out += npy;
    // Central directory record for the same entry.
    Put32(&central, kCentralHeaderSignature);
    Put16(&central, 20);  // version made by
    Put16(&central, 20);  // version needed
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, kDosDate);
    Put32(&central, crc);
    Put32(&central, size);
    Put32(&central, size);
    Put16(&central, static_cast<uint16_t>(file_name.size()));
    Put16(&central, 0);  // extra
    Put16(&central, 0);  // comment
    Put16(&central, 0);  // disk number
    Put16(&central, 0);  // internal attributes
    Put32(&central, 0);  // external attributes
    Put32(&central, offset);
    central += file_name;
  }
  const uint32_t central_offset = static_cast<uint32_t>(out.size());
  out += central;
  Put32(&out, kEndSignature);
  Put16(&out, 0);
  Put16(&out, 0);
  Put16(&out, static_cast<uint16_t>(arrays_.size()));
  Put16(&out, static_cast<uint16_t>(arrays_.size()));
  Put32(&out, static_cast<uint32_t>(central.size()));
  Put32(&out, central_offset);
  Put16(&out, 0);  // comment length
  return out;
}

absl::Status NpzWriter::WriteAtomically(const std::string& path) const {
  ASSIGN_OR_RETURN(std::string bytes, Serialize());
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<NpzReader> NpzReader::Open(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path, absl::StrCat("cannot open ", path)));
  return Parse(bytes, path);
}

absl::StatusOr<NpzReader> NpzReader::Parse(const std::string& bytes, const std::string& path) {
  auto corrupt = [&path](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, " is not a valid .npz archive: ", why));
  };
  // The end-of-central-directory record is the last 22 bytes plus an optional comment of up to 64 KiB.
  if (bytes.size() < 22) return corrupt("shorter than a zip end record (truncated?)");
  size_t end = std::string::npos;
  const size_t lowest = bytes.size() > 22 + 0xffff ? bytes.size() - 22 - 0xffff : 0;
  for (size_t at = bytes.size() - 22 + 1; at-- > lowest;) {
    if (Get32(bytes, at) == kEndSignature) {
      end = at;
      break;
    }
  }
  if (end == std::string::npos) return corrupt("no zip end record (truncated?)");
  const uint16_t entries = Get16(bytes, end + 10);
  const uint32_t dir_size = Get32(bytes, end + 12);
  size_t at = Get32(bytes, end + 16);
  if (static_cast<uint64_t>(at) + dir_size > end) return corrupt("central directory out of range");
  NpzReader reader;
  reader.path_ = path;
  // Every entry's data must be its own: a zip bomb points many directory entries at one highly compressed
  // blob (65,535 x 1032:1 of a few MB is tens of GB). With disjoint data and a bound on the declared total,
  // what the archive can make us allocate stays below kMaxNpzUncompressedBytes.
  std::map<uint64_t, uint64_t> extents;  // data start -> end, of the entries seen so far
  uint64_t declared = 0;
  for (uint16_t e = 0; e < entries; ++e) {
    if (at + 46 > end || Get32(bytes, at) != kCentralHeaderSignature) return corrupt("bad central directory");
    const uint16_t method = Get16(bytes, at + 10);
    const uint32_t crc = Get32(bytes, at + 16);
    const uint32_t compressed = Get32(bytes, at + 20);
    const uint32_t size = Get32(bytes, at + 24);
    const uint16_t name_len = Get16(bytes, at + 28);
    const uint16_t extra_len = Get16(bytes, at + 30);
    const uint16_t comment_len = Get16(bytes, at + 32);
    const uint32_t local = Get32(bytes, at + 42);
    if (at + 46 + name_len > end) return corrupt("bad central directory");
    const std::string name = bytes.substr(at + 46, name_len);
    at += 46 + name_len + extra_len + comment_len;
    if (static_cast<uint64_t>(local) + 30 > bytes.size() || Get32(bytes, local) != kLocalHeaderSignature) {
      return corrupt(absl::StrCat("bad local header for ", name));
    }
    const size_t data = local + 30 + Get16(bytes, local + 26) + Get16(bytes, local + 28);
    if (data + compressed > bytes.size()) return corrupt(absl::StrCat("entry ", name, " is truncated"));
    if (method != 0 && method != 8) {
      return corrupt(
          absl::StrCat("entry ", name, " uses zip method ", method, "; only stored (0) and deflate (8) work"));
    }
    if (method == 0 && compressed != size) {
      return corrupt(absl::StrCat("stored entry ", name, " has a size of ", size, " bytes but ", compressed,
                                  " bytes of data (damaged central directory?)"));
    }
    // Deflate expands at most 1032:1, so a larger claim is corrupt; refused before allocating it.
    if (method == 8 && static_cast<uint64_t>(size) > uint64_t{kMaxDeflateRatio} * compressed + 64) {
      return corrupt(absl::StrCat("deflated entry ", name, " claims ", size, " bytes from ", compressed,
                                  " compressed ones, more than deflate can expand (damaged file?)"));
    }
    auto next = extents.lower_bound(local);
    if ((next != extents.end() && next->first < data + compressed) ||
        (next != extents.begin() && std::prev(next)->second > local)) {
      return corrupt(absl::StrCat("entry ", name, " overlaps another entry's data (a zip bomb?)"));
    }
    extents[local] = data + compressed;
    declared += size;
    if (declared > kMaxNpzUncompressedBytes) {
      return corrupt(absl::StrCat("its entries declare more than ", kMaxNpzUncompressedBytes >> 30,
                                  " GiB of arrays (at entry ", name, "); psring never writes such archives"));
    }
    std::string content = bytes.substr(data, compressed);
    if (method == 8) {
      ASSIGN_OR_RETURN(content, Inflate(content, size, absl::StrCat(path, ": entry ", name)));
    }
    if (Crc32(content) != crc) return corrupt(absl::StrCat("entry ", name, " fails its CRC-32 check"));
    const std::string key(absl::StripSuffix(name, ".npy"));
    ASSIGN_OR_RETURN(NpyArray array, DecodeNpy(content, absl::StrCat(path, ":", key)));
    reader.arrays_[key] = std::move(array);
  }
  return reader;
}

absl::StatusOr<NpyArray> NpzReader::Get(const std::string& name) const {
  auto it = arrays_.find(name);
  if (it == arrays_.end()) return absl::NotFoundError(absl::StrCat(path_, " has no array '", name, "'"));
  return it->second;
}

namespace {

absl::Status ExpectType(const std::string& path, const std::string& name, const NpyArray& a,
                        const std::string& descr, int ndim) {
  if (a.descr != descr || (ndim >= 0 && static_cast<int>(a.shape.size()) != ndim)) {
    return absl::DataLossError(absl::StrCat(path, ": array '", name, "' has dtype ", a.descr, " and ",
                                            a.shape.size(), " dimensions; expected ", descr,
                                            ndim >= 0 ? absl::StrCat(" with ", ndim, " dimensions") : ""));
  }
  return absl::OkStatus();
}

template <typename T>
std::vector<T> FromBytes(const std::string& data) {
  std::vector<T> v(data.size() / sizeof(T));
  std::memcpy(v.data(), data.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace

absl::StatusOr<std::vector<float>> NpzReader::Float32(const std::string& name) const {
  ASSIGN_OR_RETURN(NpyArray a, Get(name));
  RETURN_IF_ERROR(ExpectType(path_, name, a, "<f4", -1));
  return FromBytes<float>(a.data);
}

absl::StatusOr<std::vector<int64_t>> NpzReader::Int64(const std::string& name) const {
  ASSIGN_OR_RETURN(NpyArray a, Get(name));
  RETURN_IF_ERROR(ExpectType(path_, name, a, "<i8", 1));
  return FromBytes<int64_t>(a.data);
}

absl::StatusOr<int64_t> NpzReader::Int64Scalar(const std::string& name) const {
  ASSIGN_OR_RETURN(NpyArray a, Get(name));
  RETURN_IF_ERROR(ExpectType(path_, name, a, "<i8", 0));
  return FromBytes<int64_t>(a.data)[0];
}

absl::StatusOr<float> NpzReader::Float32Scalar(const std::string& name) const {
  ASSIGN_OR_RETURN(NpyArray a, Get(name));
  RETURN_IF_ERROR(ExpectType(path_, name, a, "<f4", 0));
  return FromBytes<float>(a.data)[0];
}

absl::StatusOr<std::string> NpzReader::String(const std::string& name) const {
  ASSIGN_OR_RETURN(NpyArray a, Get(name));
  if (a.descr.rfind("|S", 0) != 0 || !a.shape.empty()) {
    return absl::DataLossError(absl::StrCat(path_, ": array '", name, "' has dtype ", a.descr,
                                            "; expected a 0-d byte string |S<n>"));
  }
  // NumPy pads byte strings with NULs; they are not part of the value.
  return std::string(a.data.c_str());
}

}  // namespace psring::trainer
