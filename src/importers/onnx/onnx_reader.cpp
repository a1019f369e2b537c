// Reading an .onnx file into a ModelProto, straight from the file descriptor (no copy of the
// file in memory). With structure_only, the weight payloads are never read: a streaming pass
// over the protobuf wire format copies the model field by field and skips (seeks over) the
// data of every large initializer, so a 100 MB ResNet-50 loads like its 40 KB graph.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format_lite.h>

#include <fmt/format.h>

#include "importers/onnx/onnx_graph.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::onnx_import {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;
using Wire = google::protobuf::internal::WireFormatLite;

constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{2} << 30;  // protobuf's own limit
/// Initializers up to this size are kept whole: shape tensors and other small constants that
/// shape inference reads.
constexpr std::uint32_t kKeepTensorBytes = 64 * 1024;

// field numbers of onnx.proto3
constexpr int kModelGraph = 7;
constexpr int kGraphInitializer = 5;
constexpr int kTensorDataType = 2;
constexpr int kTensorStringData = 6;
constexpr int kTensorRawData = 9;

bool is_payload_field(int field) {
  // float_data 4, int32_data 5, int64_data 7, raw_data 9, double_data 10, uint64_data 11,
  // external_data 13, data_location 14 (string_data 6 is kept: strings cannot be raw)
  return field == 4 || field == 5 || field == 7 || field == 9 || field == 10 || field == 11 || field == 13 ||
         field == 14;
}

/// Copies the field whose tag was just read from `in` to `out`; false on malformed input.
bool copy_field(std::uint32_t tag, CodedInputStream& in, CodedOutputStream& out) {
  out.WriteTag(tag);
  switch (Wire::GetTagWireType(tag)) {
    case Wire::WIRETYPE_VARINT: {
      std::uint64_t v = 0;
      if (!in.ReadVarint64(&v)) return false;
      out.WriteVarint64(v);
      return true;
    }
    case Wire::WIRETYPE_FIXED64: {
      std::uint64_t v = 0;
      if (!in.ReadLittleEndian64(&v)) return false;
      out.WriteLittleEndian64(v);
      return true;
    }
    case Wire::WIRETYPE_FIXED32: {
      std::uint32_t v = 0;
      if (!in.ReadLittleEndian32(&v)) return false;
      out.WriteLittleEndian32(v);
      return true;
    }
    case Wire::WIRETYPE_LENGTH_DELIMITED: {
      std::uint32_t length = 0;
      std::string bytes;
      if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, static_cast<int>(length))) return false;
      out.WriteVarint32(length);
      out.WriteString(bytes);
      return true;
    }
    default: return false;  // groups are not used by ONNX
  }
}

/// Skips the field whose tag was just read.
bool skip_field(std::uint32_t tag, CodedInputStream& in) {
  switch (Wire::GetTagWireType(tag)) {
    case Wire::WIRETYPE_VARINT: {
      std::uint64_t v = 0;
      return in.ReadVarint64(&v);
    }
    case Wire::WIRETYPE_FIXED64: return in.Skip(8);
    case Wire::WIRETYPE_FIXED32: return in.Skip(4);
    case Wire::WIRETYPE_LENGTH_DELIMITED: {
      std::uint32_t length = 0;
      return in.ReadVarint32(&length) && in.Skip(static_cast<int>(length));
    }
    default: return false;
  }
}

/// A TensorProto of `length` bytes without its payload. The checker wants exactly one value
/// field, so a one-byte raw_data stands in for the data that was not read.
bool strip_tensor(CodedInputStream& in, std::uint32_t length, std::string& result) {
  const auto limit = in.PushLimit(static_cast<int>(length));
  StringOutputStream sink(&result);
  CodedOutputStream out(&sink);
  bool strings = false;
  while (std::uint32_t tag = in.ReadTag()) {
    const int field = Wire::GetTagFieldNumber(tag);
    if (field == kTensorDataType && Wire::GetTagWireType(tag) == Wire::WIRETYPE_VARINT) {
      std::uint64_t type = 0;
      if (!in.ReadVarint64(&type)) return false;
      strings = type == onnx::TensorProto::STRING;
      out.WriteTag(tag);
      out.WriteVarint64(type);
      continue;
    }
    const bool keep = !is_payload_field(field) || (strings && field == kTensorStringData);
    if (!(keep ? copy_field(tag, in, out) : skip_field(tag, in))) return false;
  }
  if (!in.ConsumedEntireMessage()) return false;
  in.PopLimit(limit);
  if (!strings) {
    out.WriteTag(Wire::MakeTag(kTensorRawData, Wire::WIRETYPE_LENGTH_DELIMITED));
    out.WriteVarint32(1);
    out.WriteString(std::string(1, '\0'));
  }
  return true;
}

/// Copies a length-delimited message, passing the fields `field` of it to `nested`.
template <typename Nested>
bool copy_message(CodedInputStream& in, std::uint32_t length, int field, const Nested& nested, std::string& result) {
  const auto limit = in.PushLimit(static_cast<int>(length));
  StringOutputStream sink(&result);
  CodedOutputStream out(&sink);
  while (std::uint32_t tag = in.ReadTag()) {
    if (Wire::GetTagFieldNumber(tag) != field || Wire::GetTagWireType(tag) != Wire::WIRETYPE_LENGTH_DELIMITED) {
      if (!copy_field(tag, in, out)) return false;
      continue;
    }
    std::uint32_t inner = 0;
    std::string filtered;
    if (!in.ReadVarint32(&inner) || !nested(in, inner, filtered)) return false;
    out.WriteTag(tag);
    out.WriteVarint32(static_cast<std::uint32_t>(filtered.size()));
    out.WriteString(filtered);
  }
  if (!in.ConsumedEntireMessage()) return false;
  in.PopLimit(limit);
  return true;
}

bool read_structure(CodedInputStream& in, std::uint32_t length, std::string& result) {
  const auto initializer = [](CodedInputStream& s, std::uint32_t n, std::string& r) {
    if (n > kKeepTensorBytes) return strip_tensor(s, n, r);
    if (!s.ReadString(&r, static_cast<int>(n))) return false;
    onnx::TensorProto t;  // a small tensor whose data is in an external file: that is not read either
    if (t.ParseFromString(r) && t.data_location() == onnx::TensorProto::EXTERNAL) {
      t.clear_external_data();
      t.clear_data_location();
      t.set_raw_data(std::string(1, '\0'));
      r = t.SerializeAsString();
    }
    return true;
  };
  const auto graph = [&](CodedInputStream& s, std::uint32_t n, std::string& r) {
    return copy_message(s, n, kGraphInitializer, initializer, r);
  };
  return copy_message(in, length, kModelGraph, graph, result);
}

}  // namespace

onnx::ModelProto read_model(const std::string& path, bool structure_only) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kNotFound, fmt::format("cannot open ONNX file '{}'", path));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxFileBytes) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: larger than 2 GiB (store weights as external data)", path));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kNotFound, fmt::format("cannot open ONNX file '{}'", path));
  google::protobuf::io::FileInputStream file(fd);
  file.SetCloseOnDelete(true);
  onnx::ModelProto model;
  bool parsed = false;
  if (structure_only) {
    CodedInputStream in(&file);
    in.SetTotalBytesLimit(static_cast<int>(kMaxFileBytes - 1));
    std::string structure;
    parsed = read_structure(in, static_cast<std::uint32_t>(size), structure) && model.ParseFromString(structure);
  } else {
    parsed = model.ParseFromZeroCopyStream(&file);
  }
  if (!parsed) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not an ONNX model (the protobuf does not parse)", path));
  }
  if (!model.has_graph() || model.ir_version() <= 0) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not an ONNX model (field '{}' is missing)", path,
                                                  model.has_graph() ? "ir_version" : "graph"));
  }
  return model;
}

}  // namespace neuralcost::onnx_import
