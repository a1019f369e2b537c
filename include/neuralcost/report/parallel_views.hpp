// The view of a data-parallel training step (`analyze --train --parallel dp=N --system ID`):
// step time and its limit, throughput, compute, each collective's link time and exposed share,
// per-device memory against the device's.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/parallel/data_parallel.hpp"
#include "neuralcost/parallel/serving_choice.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"
#include "neuralcost/report/format.hpp"

namespace neuralcost {

/// One model's step; with several (`steps[i]` of `reports[i]`), one after another (JSON: an array).
std::string render_data_parallel(const std::vector<TrainingReport>& reports, const std::vector<DataParallelStep>& steps,
                                 const DataParallelRequest& request, Format format);

/// A ranked search (rank_data_parallel): one row per configuration.
std::string render_data_parallel_search(const std::vector<TrainingReport>& reports,
                                        const std::vector<DataParallelCandidate>& ranked,
                                        const DataParallelRequest& request, Format format);
/// Tensor-parallel decoder steps, one per batch: the step over tp devices against one device, its
/// all-reduces and logit gather, and the shard's weights and KV cache per device.
std::string render_tensor_parallel(const std::vector<TensorParallelStep>& steps, const SystemSpec& system,
                                   const InterconnectSpec& link, Format format);

/// Serving capacity per tensor-parallel degree: weights and KV cache per device, the sequences of
/// `context` tokens that fit; the smallest degree that serves `batch` of them is named.
std::string render_serving_capacity(const std::string& model, std::int64_t context, std::int64_t batch,
                                    std::uint64_t budget, double reserve, const std::vector<ServingCapacity>& rows,
                                    Format format);

/// `analyze DECODER --phase decode --target-ms-per-token T`: every system × tp with its time per
/// output token, fit and cost per million tokens, and the cheapest that meets the target.
std::string render_serving_choice(const std::string& model, const DecoderRequest& request, double target_seconds,
                                  double reserve, const ServingChoice& choice, const std::string& currency,
                                  const std::string& price_origin, Format format);

}  // namespace neuralcost
