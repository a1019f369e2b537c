// Measured tensor-parallel steps against their prediction
// (include/neuralcost/calibrate/tensor_parallel_check.hpp).
#include "neuralcost/calibrate/tensor_parallel_check.hpp"

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/python_worker/worker_backend.hpp"
#include "backends/python_worker/worker_process.hpp"
#include "calibrate/decoder_steps.hpp"
#include "importers/decoder/decoder_importer.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/hardware/host.hpp"
#include "neuralcost/measure/load.hpp"
#include "neuralcost/parallel/model_parallel.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

}  // namespace

namespace decoder_steps {

std::string unbuilt_feature(const DecoderConfig& c, std::int64_t tokens) {
  if (c.experts > 0) return "a mixture of experts";
  if (c.latent) return "multi-head latent attention";
  if (c.layer_norm || !c.gated_mlp) return "LayerNorm and an ungated MLP (gpt2, gpt_neox)";
  if (c.learned_positions) return "learned positions";
  if (c.parallel_residual) return "a parallel residual";
  if (c.sandwich_norms || c.attention_softcap > 0 || c.final_softcap > 0) return "gemma2's extra norms and soft-caps";
  if (c.rotary_dims != c.head_dim) return "partial rotary positions";
  if (c.quantization) return "quantized weights";
  if (c.activation != "silu" && c.activation != "gelu_tanh" && c.activation != "gelu") {
    return fmt::format("the activation {}", c.activation);
  }
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::int64_t w = c.window_of(l);
    if (w > 0 && w < tokens) return fmt::format("a sliding window of {} tokens, shorter than the sequence", w);
  }
  return "";
}

ModelParallelRequest layout(int tp, int pp, std::int64_t batch, std::int64_t tokens, std::int64_t micro_batches,
                            const std::string& optimizer, const InterconnectSpec& link, bool sequence_parallel) {
  ModelParallelRequest r;
  r.sequence_parallel = sequence_parallel;
  r.dp = 1;
  r.tp = tp;
  r.pp = pp;
  r.micro_batch = batch;
  r.global_batch = batch * micro_batches;
  r.tokens = tokens;
  r.training.optimizer = parse_optimizer(optimizer);
  r.training.precision = Precision::kFp32;
  r.dtype = DType::kFp32;
  r.system.id = "local";
  r.system.device = "epyc-9654";
  r.system.devices_per_node = tp * pp;
  r.system.nics_per_node = 1;
  r.intra = r.inter = link;
  return r;
}

RoundFigure figure(const json& rounds, const char* key) {
  std::vector<double> medians;
  for (const json& round : rounds) medians.push_back(median(round.at(key).get<std::vector<double>>()));
  return round_figure(std::move(medians));
}

json worker_config(const DecoderConfig& c) {
  return {{"hidden", c.hidden},
          {"layers", c.layers},
          {"heads", c.heads},
          {"kv_heads", c.kv_heads},
          {"head_dim", c.head_dim},
          {"intermediate", c.intermediate},
          {"vocab", c.vocab},
          {"tied", c.tied_embeddings},
          {"qkv_bias", c.qkv_bias},
          {"output_bias", c.output_bias},
          {"mlp_bias", c.mlp_bias},
          {"qk_norm", c.qk_norm},
          {"activation", c.activation},
          {"norm_offset", c.norm_offset},
          {"embedding_scale", c.embedding_scale}};
}

json run_worker(const json& request, double deadline_seconds, const std::string& option, const std::string& what,
                std::vector<std::string>& notes) {
  if (auto why = worker::WorkerBackend("collectives", "torch", "", {"eager"}, "eager", {}).unavailable_reason()) {
    throw Error(ErrorCode::kNotFound, option + " needs the torch worker's Python: " + *why);
  }
  worker::WorkerProcess process({worker::python_interpreter(), "-m", "neuralcost_worker", "collectives"},
                                {{"PYTHONPATH", worker::worker_directory()}, {"PYTHONUNBUFFERED", "1"}},
                                "the collectives worker");
  json reply;
  const LoadReading start = read_load();
  try {
    reply = process.request(request, std::chrono::duration<double>(deadline_seconds + 60));
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} failed: {}", what, e.what()));
  }
  // other processes' CPU time and steal over the run's seconds; not the runnable tasks at its two
  // ends, which catch the worker's ranks as they start and end outside this process's tree
  LoadFigures during = load_since(start);
  during.other_runnable = -1;
  process.stop();
  for (const std::string& reason : load_reasons(during, "the steps")) notes.push_back(reason);
  return reply;
}

ModelParallelStep predicted_step(const DecoderConfig& config, const ModelParallelRequest& layout) {
  ShardCostCache cache(config, HardwareDatabase::builtin().get(layout.system.device));
  return model_parallel_step(cache, layout);
}

void check_fits_this_machine(const ModelParallelStep& step, int tp, double extra_bytes, const std::string& model) {
  double need = extra_bytes;
  for (const PipelineStage& st : step.stages) need += static_cast<double>(st.memory_upper_bytes()) * tp;
  const double have = static_cast<double>(describe_host().memory_bytes);
  if (have > 0 && need > 0.75 * have) {
    refuse(
        fmt::format("{} at this size needs about {:.3g} GB over its {} ranks (model states and activations by the "
                    "ledger), more than 3/4 of this machine's {:.3g} GB: a smaller --model, --batch or --prompt",
                    model, need / 1e9, step.devices, have / 1e9));
  }
}

}  // namespace decoder_steps

using namespace decoder_steps;

DecoderConfig tensor_parallel_check_config(const std::string& model, const std::string& option) {
  if (!model.empty()) return decoder_config_of(model, option + ": the model", {});
  return parse_decoder_config(json{{"model_type", "llama"},
                                   {"hidden_size", 256},
                                   {"num_hidden_layers", 4},
                                   {"num_attention_heads", 8},
                                   {"num_key_value_heads", 4},
                                   {"intermediate_size", 704},
                                   {"vocab_size", 4096},
                                   {"max_position_embeddings", 2048},
                                   {"tie_word_embeddings", false}},
                              "the built-in check decoder (llama, 4 layers, hidden 256)");
}

void check_tensor_parallel_request(const TensorParallelCheckRequest& r) {
  const DecoderConfig& c = r.config;
  const std::string model = r.model.empty() ? "the built-in decoder" : r.model;
  if (r.ranks < 2) refuse(fmt::format("--tensor-parallel {}: a tensor-parallel step needs at least 2 ranks", r.ranks));
  if (r.batch < 1 || r.tokens < 1) refuse("--batch and --prompt (tokens a sequence) must be at least 1");
  if (r.rounds < 1 || r.steps < 1) refuse("--rounds and the steps a round must be at least 1");
  if (r.tokens > c.max_positions && c.max_positions > 0) {
    refuse(fmt::format("--prompt {}: {} has {} positions", r.tokens, model, c.max_positions));
  }
  if (const std::string why = unbuilt_feature(c, r.tokens); !why.empty()) {
    refuse(fmt::format("--tensor-parallel runs Llama-family decoders split as Megatron-LM splits them; {} has {}",
                       model, why));
  }
  for (const auto& [what, n] : {std::pair<const char*, std::int64_t>{"attention heads", c.heads},
                                {"KV heads", c.kv_heads},
                                {"intermediate size", c.intermediate}}) {
    if (n % r.ranks != 0) {
      refuse(
          fmt::format("--tensor-parallel {}: {} has {} {}, which {} ranks do not share evenly (the worker "
                      "replicates none)",
                      r.ranks, model, n, what, r.ranks));
    }
  }
  if (r.sequence_parallel && r.tokens % r.ranks != 0) {
    refuse(
        fmt::format("--sequence-parallel: --tensor-parallel {} does not divide the {} tokens of a sequence "
                    "(--prompt)",
                    r.ranks, r.tokens));
  }
  std::vector<Collective> needed = {Collective::kAllReduce};
  if (r.sequence_parallel) needed.insert(needed.end(), {Collective::kAllGather, Collective::kReduceScatter});
  for (const Collective collective : needed) {
    if (r.link.measured_for(collective, r.ranks) == nullptr) {
      refuse(
          fmt::format("--link {} has no measured {} over {} ranks: calibrate this machine's link first "
                      "(`neural-cost hardware calibrate --collectives --ranks {} --spec-output FILE`)",
                      r.link.origin.empty() || r.link.origin == "built-in" ? r.link.id : r.link.origin,
                      collective_name(collective), r.ranks, r.ranks));
    }
  }
  // the model's own refusals, and whether the ranks fit this machine, before anything runs
  const ModelParallelStep step =
      predicted_step(c, layout(r.ranks, 1, r.batch, r.tokens, 1, r.optimizer, r.link, r.sequence_parallel));
  check_fits_this_machine(step, r.ranks, 16.0 * static_cast<double>(r.batch * r.tokens), model);
}

void predict_tensor_parallel(TensorParallelCheck& out) {
  const TensorParallelCheckRequest& request = out.request;
  const ModelParallelStep step =
      predicted_step(request.config, layout(request.ranks, 1, request.batch, request.tokens, 1, request.optimizer,
                                            request.link, request.sequence_parallel));
  const PipelineStage& stage = step.stages.front();
  out.predicted_calls = stage.tensor_calls;
  out.predicted_link_seconds = step.tensor_seconds;
  out.predicted_parameters = stage.parameters;
  if (out.parameters != 0 && out.parameters != out.predicted_parameters) {
    out.notes.push_back(fmt::format("a rank ran {} parameters, the shard's graph has {}: they are not the same model",
                                    out.parameters, out.predicted_parameters));
  }
  // Megatron's collectives sit between the GEMMs that need them: each is waited for
  out.predicted_step_seconds = out.compute.median + out.predicted_link_seconds;
  out.notes.push_back(fmt::format(
      "predicted: the collectives of tp={}{} in fp32 on the calibrated link, each waited for (it "
      "sits between the GEMMs that need it), added to the measured step without communication (the same kernels, "
      "the collectives skipped)",
      request.ranks, request.sequence_parallel ? " with sequence parallelism" : ""));
  for (const std::string& n : step.notes) {
    if (n.find("padded") != std::string::npos) out.notes.push_back(n);  // the vocabulary's rows a rank holds
  }
  for (const std::string& a : step.approximations) {
    if (a.rfind("tensor parallelism:", 0) == 0 || a.rfind("sequence parallelism:", 0) == 0) {
      out.notes.push_back("the model's " + a);
    }
  }
}

TensorParallelCheck check_tensor_parallel(const TensorParallelCheckRequest& request) {
  check_tensor_parallel_request(request);
  TensorParallelCheck out;
  out.request = request;
  const json reply = run_worker({{"cmd", "tp_steps"},
                                 {"ranks", request.ranks},
                                 {"config", worker_config(request.config)},
                                 {"batch", request.batch},
                                 {"tokens", request.tokens},
                                 {"sequence_parallel", request.sequence_parallel},
                                 {"optimizer", request.optimizer},
                                 {"rounds", request.rounds},
                                 {"steps", request.steps},
                                 {"deadline_seconds", request.deadline_seconds}},
                                request.deadline_seconds, "--tensor-parallel",
                                fmt::format("the tensor-parallel steps over {} ranks", request.ranks), out.notes);
  out.torch_version = reply.value("torch", std::string("?"));
  out.parameters = reply.at("parameters").get<std::uint64_t>();
  out.collectives_per_step = reply.at("calls_per_step").get<int>();
  out.call_bytes = reply.at("call_bytes").get<std::vector<double>>();
  out.collectives = reply.at("collectives").get<std::vector<std::string>>();
  const json& rounds = reply.at("rounds");
  out.step = figure(rounds, "step_seconds");
  out.compute = figure(rounds, "compute_seconds");
  out.link = figure(rounds, "link_seconds");
  out.wait = figure(rounds, "wait_seconds");
  predict_tensor_parallel(out);
  return out;
}

}  // namespace neuralcost
