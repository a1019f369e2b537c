// Weights stored in a narrower format than the dtype they compute in (weight-only quantization:
// GPTQ/AWQ int4, LLM.int8, fp8, NVFP4/MXFP4, bitsandbytes nf4): the storage bytes of a weight and
// the work to dequantize it. docs/llm.md, "Quantized weights".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuralcost {

/// How a weight [.., out, in] is stored (leading dimensions: experts). Values are packed at `bits`
/// each; each group of `group_size` consecutive values along `in` (within `block_rows` rows) shares
/// one scale of `scale_bits`, and, with zero points, one zero of `bits`; double quantization
/// stores the scales in 8 bits with one fp32 scale per `second_level_group` of them.
struct WeightQuantization {
  std::string name;                     ///< as given to parse_weight_quantization: "int4-g64"
  std::string format;                   ///< int8, int4, gptq-int4, gptq-int8, fp8, nvfp4, mxfp4, nf4, bnb-fp4
  int bits = 8;                         ///< bits of one stored value
  std::int64_t group_size = 0;          ///< values along `in` per scale; 0: one scale per output row
  std::int64_t block_rows = 1;          ///< rows sharing a scale (fp8's 128 x 128 blocks: 128)
  int scale_bits = 16;                  ///< bits of one scale: fp16 16, fp32 32, e4m3 or e8m0 8
  bool zero_points = false;             ///< a zero per group (asymmetric ints: AWQ, GPTQ with sym=false)
  std::int64_t second_level_group = 0;  ///< double quantization: scales per fp32 scale; 0: none
  bool tensor_scale = false;            ///< one fp32 scale per weight on top of the groups' (NVFP4)
  int index_bits_per_input = 0;         ///< GPTQ's g_idx: an int32 group index per input column
  int code_table_entries = 0;           ///< bitsandbytes: the fp32 code table stored with each weight

  /// Storage bytes of a weight of this shape (rank 2 or more; the last two are out, in).
  std::uint64_t bytes(const std::vector<std::int64_t>& shape) const;
  /// Scale groups of a weight of this shape.
  std::uint64_t groups(const std::vector<std::int64_t>& shape) const;
  /// FLOPs to dequantize a weight of this shape once: one multiply by its scale per value, one
  /// subtraction of its zero per value with zero points, and per group the second-level work
  /// (double quantization: one multiply and one add; NVFP4: the group scale times the tensor's).
  std::uint64_t dequantization_flops(const std::vector<std::int64_t>& shape) const;
  /// Average storage bits per value of a large weight [out, in] with in a multiple of the group.
  double bits_per_value() const;
  /// "int4 (groups of 128, fp16 scales, 4-bit zeros)" and the like.
  std::string describe() const;
  /// The spelling parse_weight_quantization reads back: "int4-g128", "nf4-dq", "fp8-block128".
  std::string spec() const;
};

/// Parses `--weights`: int8 (per output row, fp16 scales; int8-gN, -asym), int4 (groups of 128, fp16
/// scales and 4-bit zeros as AWQ; int4-gN, int4-channel, -sym for no zeros), gptq-int4 and gptq-int8
/// (GPTQ's checkpoints: zeros always stored, an int32 g_idx per input; -gN), fp8 (e4m3, one fp32 scale per
/// output row; fp8-block128: 128 x 128 blocks), nvfp4 (e2m1, groups of 16, e4m3 scales and an fp32
/// tensor scale), mxfp4 (e2m1, groups of 32, e8m0 scales), nf4 and bnb-fp4 (bitsandbytes: blocks of
/// 64, fp32 absmax; -dq: double quantization). Anything else is kInvalidArgument listing these.
WeightQuantization parse_weight_quantization(const std::string& spec);

}  // namespace neuralcost
