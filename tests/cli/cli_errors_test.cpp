// Bad input to the CLI: one case per failure class, each with its exact error line, a non-zero
// exit and no crash (a crash would show as exit code >= 128).
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_run.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using ::testing::HasSubstr;

const std::string kBad = std::string(NEURALCOST_TEST_INPUTS) + "/bad/";
const std::string kGood = std::string(NEURALCOST_TEST_INPUTS) + "/good/";

/// Runs the CLI, expects exit code 1 and exactly one "error: ..." line on stderr.
void expect_error(const std::string& args, const std::string& message) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
  EXPECT_EQ(r.err, "error: " + message + "\n") << args;
  EXPECT_TRUE(r.out.empty()) << args;
}

/// Argument-syntax errors (found by CLI11): exit 1, an "error:" line naming the option.
void expect_usage_error(const std::string& args, const std::string& fragment) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << args;
  EXPECT_THAT(r.err, ::testing::StartsWith("error: ")) << args;
  EXPECT_THAT(r.err, HasSubstr(fragment)) << args;
}

TEST(CliErrorsTest, UnknownModel) {
  expect_error("analyze tranformer", "unknown model 'tranformer'; did you mean transformer?");
  expect_error("analyze --model resnet",
               "unknown model 'resnet'; accepted: reference (built-in reference networks: ff, cnn, rnn, lstm, "
               "transformer); decoder (decoder LLMs: a transformers config.json (llama, mistral, qwen2/3, mixtral, "
               "qwen2_moe/qwen3_moe, gemma/2, phi3, deepseek_v2/v3, gpt2, gpt_neox) or a preset (llama-3-8b, "
               "mixtral-8x7b, ...: docs/llm.md lists them), prefill, decode or a training step); onnx (ONNX files "
               "(*.onnx), via the ONNX library)");
}

TEST(CliErrorsTest, ProfiledDecoderOptionsThatDoNotApply) {
  // a decoder's config.json runs one phase in the torch worker; what does not size it is refused first
  const std::string smol = " " NEURALCOST_SOURCE_DIR "/data/decoders/smollm2-135m.json" + kTestRoof;
  expect_error("profile" + smol + " --seq 64",
               "--seq does not apply to the decoder " NEURALCOST_SOURCE_DIR
               "/data/decoders/smollm2-135m.json (--prompt sizes a prefill, --context a decode)");
  expect_error("profile" + smol + " --phase generate",
               "--phase 'generate': profile times one phase as its pass, prefill or decode (analyze --phase generate "
               "counts a whole generation)");
  expect_error("profile" + smol + " --phase decode --prompt 8",
               "--prompt does not apply to --phase decode (--prompt is prefill's, --context decode's)");
  expect_error("profile" + smol + " --phase decode --context 0", "--context must be at least 1 (got 0)");
  expect_error("profile" + smol + " --input-shape 1x8",
               "--input and --input-shape do not apply to the decoder " NEURALCOST_SOURCE_DIR
               "/data/decoders/smollm2-135m.json: its input is the token ids of --batch sequences (--prompt tokens "
               "each in prefill, 1 in decode)");
  expect_error("profile ff --phase decode" + kTestRoof,
               "--phase applies to decoder LLMs (a config.json) only, not to ff");
  expect_error("profile llama-3-8b" + kTestRoof,
               "llama-3-8b is a decoder preset, counted by `neural-cost analyze llama-3-8b`; profile runs a decoder "
               "from its config.json (random weights, built by transformers in the torch worker): give a config small "
               "enough for this machine");
  expect_error("profile" + smol + " --backend libtorch",
               "--backend libtorch cannot run " NEURALCOST_SOURCE_DIR
               "/data/decoders/smollm2-135m.json, a decoder LLM's config.json; the torch backend runs it (or leave out "
               "--backend)");
}

TEST(CliErrorsTest, TheLlmPageIsForOneDecoder) {
  expect_error("analyze llama-3-8b --format html --phase decode",
               "--phase does not apply with --format html (the LLM page of one decoder: both phases, --batch, "
               "--prompt, --context, --dtype, --weights, --hardware)");
  expect_error("analyze llama-3-8b,mistral-7b --format html",
               "--format html needs exactly one model, a decoder preset or config.json (its LLM page)");
  expect_error("analyze cnn --format html",
               "--format html: the model 'cnn' is not a decoder LLM (a preset such as llama-3-8b, or a config.json)");
  expect_error("analyze llama-3-8b --format html --context 9000",
               "--context 9000 and the step's new token are beyond the model's 8192 positions "
               "(max_position_embeddings)");
  expect_usage_error("profile --model ff --format html", "html");
}

TEST(CliErrorsTest, UnknownHardwareListsNearestIds) {
  const CliResult r = run_cli("analyze --model ff --hardware a100");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: unknown hardware 'a100'; nearest ids: a100-"));
  // "h100" names two parts: it resolves to neither, and both are offered first
  const CliResult h100 = run_cli("hardware show h100");
  EXPECT_EQ(h100.exit_code, 1);
  EXPECT_THAT(h100.err, ::testing::StartsWith("error: unknown hardware 'h100'; nearest ids: h100-sxm, h100-pcie, "));
}

TEST(CliErrorsTest, ParallelLayoutsAndSystemsThatCannotBe) {
  const std::string train = "analyze transformer --train ";
  expect_error(train + "--parallel dp=12 --system dgx-h100",
               "--parallel dp=12 does not divide into nodes of 8 devices (dgx-h100): use a multiple of 8");
  // tensor and pipeline parallel training is a decoder's (Megatron's layout)
  for (const char* layout : {"dp=8,tp=2", "tp=2", "dp=8,pp=2"}) {
    expect_error(train + "--parallel " + layout + " --system dgx-h100",
                 "--parallel with tp or pp (or --search --devices): the model 'transformer' is not a decoder LLM (a "
                 "preset such as "
                 "llama-3-8b, or a config.json)");
  }
  const std::string llm = "analyze llama-3-8b --train --precision bf16-mixed --prompt 256 --system dgx-h100 ";
  expect_error(llm + "--parallel dp=2,tp=2,pp=2 --global-batch 3",
               "--global-batch 3 is not a multiple of dp × micro-batch = 2 × 1");
  expect_error(llm + "--parallel pp=3,dp=8",
               "--parallel pp=3 does not divide the model's 32 layers into equal stages (--stage-layers N1,N2,... "
               "gives each stage's layers)");
  expect_error(llm + "--parallel pp=3,dp=8 --stage-layers 10,10,10",
               "--stage-layers adds up to 30 layers, but the "
               "model has 32");
  expect_error(llm + "--parallel pp=2,dp=8 --stage-layers 16,8,8",
               "--stage-layers gives 3 stage(s), but --parallel "
               "has pp=2");
  expect_error(llm + "--parallel tp=2 --stage-layers 32",
               "--stage-layers applies only with pipeline parallelism (pp > 1)");
  expect_error("analyze llama-3-8b --stage-layers 16,16",
               "--stage-layers applies only with --train and --parallel tp=N or pp=N (or --search --devices N)");
  expect_error(llm + "--parallel tp=2,pp=2 --zero zero3",
               "--zero zero3 with tensor or pipeline parallelism is not built: ddp or zero1 (a distributed "
               "optimizer); --parallel dp=N alone takes every stage");
  expect_error(llm + "--parallel tp=2,pp=2 --checkpoint selective",
               "--checkpoint selective: with tensor or pipeline parallelism none or full (each layer keeps its input "
               "and recomputes its forward pass)");
  expect_error(llm + "--parallel tp=2,pp=2 --virtual-stages 2 --global-batch 3",
               "the interleaved schedule needs micro-batches (3) in multiples of pp (2)");
  expect_error(llm + "--parallel tp=2 --virtual-stages 2",
               "--virtual-stages applies only with pipeline parallelism (pp > 1)");
  expect_error(llm + "--parallel dp=2,pp=2 --sequence-parallel",
               "--sequence-parallel splits the tokens over the tensor-parallel devices: it needs tp > 1");
  expect_error(
      "analyze llama-3-8b --train --precision bf16-mixed --prompt 100 --system dgx-h100 --parallel tp=8 "
      "--sequence-parallel",
      "--sequence-parallel: tp=8 does not divide the 100 tokens of a sequence (--prompt)");
  expect_error("analyze llama-3-8b --parallel tp=2 --system dgx-h100 --sequence-parallel",
               "--sequence-parallel applies only with --train and --parallel tp=N or pp=N (or --search --devices N)");
  expect_error(llm + "--search --devices 64 --global-batch 64 --sequence-parallel",
               "--sequence-parallel does not apply with --search --devices (it tries every layout, ZeRO stage, "
               "recomputation and sequence parallelism)");
  expect_error(llm + "--parallel tp=2,pp=2 --batch 1,2",
               "--parallel with tp or pp takes one --batch (the micro-batch)");
  expect_error(llm + "--parallel tp=2,pp=2 --memory-budget 80GB",
               "--memory-budget does not apply to a training step over tensor or pipeline parallelism (--batch is "
               "the micro-batch, --prompt the tokens a sequence, --system the devices)");
  expect_error("analyze llama-3-8b --parallel pp=2 --system dgx-h100",
               "--parallel with pp applies only with --train (tp=N alone is a decoder's prefill or decode)");
  expect_error(llm + "--parallel dp=8,ep=2", "--parallel ep=2: the model has no experts (a dense model)");
  expect_error("analyze mixtral-8x7b --parallel tp=2,ep=2 --system dgx-h100",
               "--parallel ep=2 applies only with --train (a mixture of experts' training step)");
  const std::string moe = "analyze mixtral-8x7b --train --precision bf16-mixed --prompt 256 --system dgx-h100 ";
  expect_error(moe + "--parallel dp=6,tp=4,ep=3", "--parallel ep=3 does not divide the 8 experts of a layer");
  expect_error(moe + "--parallel dp=2,tp=4,ep=4",
               "--parallel ep=4 must divide dp=2: the experts are split over data-parallel replicas (Megatron-Core's "
               "expert-model-parallel group)");
  expect_error(llm + "--search --devices 64", "--search needs --global-batch (sequences a step over every device)");
  expect_error(llm + "--parallel pp=2 --global-batch 0", "--global-batch 0 must be a positive integer below 2^31");
  expect_error(llm + "--parallel tp=2 --global-batch -1",
               "--global-batch -1 must be a positive integer below 2^31 (sequences a step over every replica)");
  expect_error(llm + "--search --devices 8 --global-batch 8 --batch 0",
               "--batch 0 (a micro-batch to try) must be a positive integer below 2^31");
  expect_error(llm + "--parallel dp=8 --zero zero3 --memory-budget 80GB",
               "--memory-budget does not apply with --parallel: each device's memory is judged against the system's "
               "device (its share of the model states under --zero); --search ranks the layouts that fit");
  expect_error(llm + "--parallel dp=2,dp=4", "--parallel 'dp=2,dp=4': dp is given twice");
  expect_error(llm + "--parallel ''", "--parallel '': expected dp=N[,tp=N,pp=N,ep=N] with positive integers");
  expect_error(llm + "--search --parallel dp=8,tp=2",
               "--search over tensor, pipeline and expert parallelism takes --devices N and tries every layout: "
               "leave out --parallel");
  expect_error(llm + "--search --devices 64 --global-batch 64 --parallel tp=2",
               "--parallel does not apply with --search --devices (it tries every layout, ZeRO stage, "
               "recomputation and sequence parallelism)");
  expect_error(llm + "--parallel tp=2 --devices 64", "--devices applies only with --search");
  expect_error("analyze llama-3-8b --global-batch 8",
               "--global-batch applies only with --train and --parallel tp=N or pp=N (or --search --devices N)");
  expect_error(train + "--parallel dp=0 --system dgx-h100",
               "--parallel 'dp=0': expected dp=N[,tp=N,pp=N,ep=N] with positive integers");
  expect_error("analyze llama-3-8b --parallel tp=3 --system dgx-h100",
               "llama-3-8b: --parallel tp=3 does not divide the model's 32 attention heads (tensor parallelism splits "
               "them evenly)");
  expect_error("analyze llama-3-8b --parallel tp=16 --system dgx-h100",
               "llama-3-8b: --parallel tp=16: tensor parallelism stays inside a node, which has 8 devices");
  expect_error("analyze transformer --parallel tp=2 --system dgx-h100",
               "--parallel tp=N: the model 'transformer' is not a decoder LLM (a preset such as llama-3-8b, or a "
               "config.json)");
  expect_error(train + "--parallel dp=8",
               "--parallel and --search --devices need --system (the devices and their links; `neural-cost hardware "
               "systems` lists them)");
  expect_error(train + "--parallel dp=8 --system dgx-h10",
               "unknown system 'dgx-h10' (did you mean 'dgx-h100'?); known: dgx-a100, dgx-h100, gb200-nvl72, "
               "hgx-h200, pcie-workstation (see `neural-cost hardware systems`)");
  expect_error(train + "--parallel dp=8 --system dgx-h100 --hardware h100-sxm",
               "--hardware does not apply with --system (the system names its device)");
  expect_error(train + "--parallel dp=8 --system dgx-h100 --zero zero4",
               "--zero 'zero4' is not one of ddp, zero1, zero2, zero3, fsdp");
  expect_error("analyze transformer --parallel dp=8 --system dgx-h100",
               "--parallel dp=N applies only with --train (tp=N is for a decoder's prefill or decode)");
  expect_error(train + "--system dgx-h100", "--system applies only with --parallel");
  expect_error("hardware calibrate --collectives --ranks 1",
               "--ranks 1: a collective needs at least 2 ranks (a calibration with one rank measures no link)");
  expect_error("hardware calibrate --collectives --counters",
               "--counters does not apply to --collectives (it measures the link between local processes on gloo; "
               "NCCL sweeps on GPUs are not built yet)");
  expect_error("hardware calibrate --ranks 2", "--ranks is for --collectives");
  expect_error("hardware calibrate --collectives --ranks 2,2", "--ranks names 2 twice");
  // a list names each item once: --batch 1,1 ran a cell twice (a results file with one cell twice
  // is ambiguous to report, compare and --resume)
  expect_error("analyze ff --batch 1,1", "--batch names 1 twice");
  expect_error("analyze ff,cnn --model ff", "--model names ff twice");
  expect_error("study ff --backend libtorch,libtorch" + kTestRoof, "--backend names libtorch twice");
  expect_error("hardware calibrate --collectives --max-bytes 1TB",
               "--max-bytes 1e+12 B is above 4 GiB: every rank process holds buffers of the largest size (an "
               "all-gather's output is ranks times it)");
  // what a calibration writes is checked before it measures (minutes), not after
  expect_error("hardware calibrate -o /nonexistent-nc/x",
               "-o /nonexistent-nc/x: cannot be written (/nonexistent-nc: No such file or directory)");
  expect_error("hardware calibrate --collectives --spec-output " + ::testing::TempDir(),
               "--spec-output " + ::testing::TempDir() + ": is a directory, not a file");
  expect_error("hardware calibrate --after-compute 20", "--after-compute is for --collectives");
  expect_error("hardware calibrate --collectives --after-compute -1",
               "--after-compute -1 must be from 0 to 10000 milliseconds");
}

TEST(CliErrorsTest, BadRoundOptionsAreOneErrorLine) {
  const std::string run = "profile --model ff --backend libtorch --hardware epyc-9654 ";
  expect_error(run + "--rounds 0", "--rounds must be 1 to 1000 (got 0)");
  expect_error(run + "--rounds 6 --preparations 7",
               "--preparations must be 1 to --rounds (6) (got 7): each preparation takes at least one round");
  expect_error(run + "--rounds 6 --max-rounds 3", "--max-rounds (3) must be at least --rounds (6)");
  expect_error(run + "--ok-within 0", "--ok-within must be more than 0 and less than 100 percent (got 0)");
  expect_error("study --model ff --backend libtorch --hardware epyc-9654 --time-limit -5 -o /nonexistent/s.jsonl",
               "--time-limit must be 0 (none) to 604800 seconds (got -5)");
}

TEST(CliErrorsTest, BatchZero) { expect_error("analyze --model ff --batch 0", "--batch must be at least 1 (got 0)"); }

TEST(CliErrorsTest, BatchNegative) {
  expect_error("analyze --model ff --batch -5", "--batch must be at least 1 (got -5)");
  expect_error("analyze --model ff --batch=-5", "--batch must be at least 1 (got -5)");
}

TEST(CliErrorsTest, BatchTooLargeForOptions) {
  expect_error("analyze --model ff --batch 1000000000000000",
               "--batch 1000000000000000 is too large (at most 1099511627776)");
}

TEST(CliErrorsTest, FlopCountThatWouldOverflowIsCaught) {
  const CliResult r = run_cli("analyze --model transformer --batch 1099511627776");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::MatchesRegex("error: .* overflows 64 bits.*\n"));
}

TEST(CliErrorsTest, BatchNotANumber) {
  expect_usage_error("analyze --model ff --batch lots", "--batch");
  expect_usage_error("analyze --model ff --batch 99999999999999999999999", "--batch");
}

TEST(CliErrorsTest, BadWidthForHeads) {
  expect_error("analyze --model transformer --width 130", "--width 130 must be divisible by the 4 attention heads");
}

TEST(CliErrorsTest, UnknownDtype) {
  expect_error("analyze --model ff --dtype fp4", "--dtype 'fp4' is not one of fp64, fp32, tf32, fp16, bf16, int8, fp8");
}

TEST(CliErrorsTest, HardwareWithoutThePeakForTheDtype) {
  expect_error("analyze --model ff --dtype fp16 --hardware " + kGood + "fp32_only.json",
               "hardware 'test-fp32-box' has no fp16 peak (it gives: fp32)");
}

TEST(CliErrorsTest, MissingHardwareFile) {
  expect_error("analyze --model ff --hardware " + kBad + "does_not_exist.json",
               "cannot open hardware spec file '" + kBad + "does_not_exist.json'");
}

TEST(CliErrorsTest, MalformedHardwareJson) {
  const CliResult r = run_cli("analyze --model ff --hardware " + kBad + "truncated.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: " + kBad + "truncated.json: malformed JSON at byte"));
}

TEST(CliErrorsTest, IncompleteHardwareJson) {
  expect_error("analyze --model ff --hardware " + kBad + "missing_bandwidth.json",
               kBad + "missing_bandwidth.json: field 'memory_bandwidth_bytes_per_second' is missing");
}

TEST(CliErrorsTest, NegativeBandwidth) {
  expect_error("hardware show " + kBad + "negative_bandwidth.json",
               kBad +
                   "negative_bandwidth.json: field 'memory_bandwidth_bytes_per_second' must be a positive number "
                   "(got -100000000000.0)");
}

TEST(CliErrorsTest, MisspelledField) {
  expect_error("hardware show " + kBad + "misspelled_field.json",
               kBad +
                   "misspelled_field.json: field 'memory_bandwith_bytes_per_second' is not a hardware spec field "
                   "(see docs/hardware.md)");
}

TEST(CliErrorsTest, NotAnObject) {
  expect_error("hardware show " + kBad + "not_an_object.json",
               kBad + "not_an_object.json: a hardware spec must be a JSON object");
}

TEST(CliErrorsTest, UnknownDtypeKeyInSpec) {
  expect_error("hardware show " + kBad + "sparse_dtype.json",
               kBad +
                   "sparse_dtype.json: field 'peak_flops_per_second.fp16_sparse' is not a dtype (use fp64, fp32, "
                   "tf32, fp16, bf16, int8, fp8)");
}

TEST(CliErrorsTest, UnknownDevice) {
  expect_error("profile --model ff --backend jax --device tpu",
               "--device 'tpu' is not a device name: cpu, or cuda:N for the N-th CUDA GPU");
  // and why, when the machine has no CUDA at all (gpu/cuda_devices.hpp)
  const CudaDevices& cuda = cuda_devices();
  expect_error("profile --model ff --backend jax --device cuda:0",
               "backend 'jax' has no device 'cuda:0' on this machine (devices: cpu)" +
                   (cuda.unavailable_reason ? ": cuda:0: CUDA is not available here: " + *cuda.unavailable_reason
                                            : std::string()));
}

TEST(CliErrorsTest, HardwareSpecOfAnotherKindOfDevice) {
  // a GPU's roofline for a cpu run is refused before anything runs, unless asked for
  expect_error("profile --model ff --backend jax --hardware h100-sxm",
               "the hardware spec 'h100-sxm' is a gpu (NVIDIA H100 SXM5 80GB), but the run is on cpu, a cpu: its "
               "roofline would not be this device's. Omit --hardware to use the device's own spec, or add "
               "--allow-hardware-mismatch to compare against another device's roofline");
}

TEST(CliErrorsTest, UnknownFormat) { expect_usage_error("analyze --model ff --format xml", "--format"); }

TEST(CliErrorsTest, UnwritableOutput) {
  const CliResult r = run_cli("analyze --model ff -o /nonexistent-dir/result.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: cannot write '/nonexistent-dir/result.json': No such file or directory\n");
}

TEST(CliErrorsTest, MissingSubcommand) { expect_usage_error("", "subcommand"); }

TEST(CliErrorsTest, AbsurdDepthIsAnErrorNotAnOutOfMemory) {
  expect_error("analyze --model ff --depth 100000000", "--depth 100000000 is too deep (at most 10000)");
}

TEST(CliErrorsTest, DirectoryAsHardwareSpec) {
  expect_error("analyze --model ff --hardware " + kBad, "hardware spec '" + kBad + "' is not a regular file");
}

TEST(CliErrorsTest, OptionsThatApplyToNoChosenModel) {
  expect_error("analyze ff --seq 64", "--seq does not apply to the built-in network 'ff' (it has no sequence)");
  expect_error("analyze --model ff,cnn --seq 64", "--seq does not apply to ff or cnn");
}

TEST(CliErrorsTest, TrainingOptionsWithoutTrain) {
  expect_error("analyze --model ff --optimizer sgd", "--optimizer applies only with --train");
  expect_error("analyze --model ff --memory-budget 24GB",
               "--memory-budget applies with --train or with --phase decode");
  expect_error("analyze llama-3-8b --phase decode --memory-budget 24GB --hardware h100-sxm",
               "--hardware does not apply with --phase decode --memory-budget (it counts bytes per device)");
  expect_error(
      "analyze llama-3-8b --phase decode --context 4096 --memory-budget 24GB --parallel tp=2 --system dgx-h100",
      "--memory-budget does not apply with --parallel tp=N (--phase decode --memory-budget without --parallel "
      "lists every tp)");
  expect_error("analyze --model ff --train --reserve 5%", "--reserve applies only with --memory-budget");
  expect_error("analyze llama-3-8b --phase decode --reserve 20%",
               "--reserve applies only with --memory-budget (--train or --phase decode) or --target-ms-per-token");
  expect_error("analyze mixtral-8x7b --phase decode --memory-budget 80GB --routing " +
                   std::string(NEURALCOST_TEST_INPUTS) + "/missing.json",
               "--routing does not apply with --phase decode --memory-budget (it counts bytes per device)");
  expect_error("analyze llama-3-8b --phase decode --context 0 --memory-budget 80GB",
               "--context 0 must be a positive integer below 2^31");
  expect_error("analyze llama-3-8b --phase generate --memory-budget 80GB",
               "--memory-budget does not apply with --phase generate");
  expect_error("analyze llama-3-8b --phase foo", "--phase 'foo' is not one of prefill, decode, generate");
}

TEST(CliErrorsTest, BadTrainingOptions) {
  expect_error("analyze --model ff --train --optimizer lion",
               "--optimizer 'lion' is not one of sgd, momentum, adam, adamw");
  expect_error("analyze --model ff --train --precision fp8",
               "--precision 'fp8' is not one of fp32, bf16-mixed, fp16-mixed");
  expect_error("analyze --model ff --train --checkpoint every:0",
               "--checkpoint 'every:0': K in every:K must be a positive integer");
  expect_error("analyze --model ff --train --precision bf16-mixed --dtype fp32",
               "--dtype fp32 contradicts --precision bf16-mixed (which computes in bf16)");
  expect_error("analyze --model ff --train --memory-budget -4GB", "--memory-budget '-4GB' must be positive");
}

TEST(CliErrorsTest, BadQuantizedWeights) {
  const std::string formats =
      "(formats: int8, int8-gN, int4, int4-gN, int4-channel, int4-sym, gptq-int4, fp8, "
      "fp8-block128, nvfp4, mxfp4, nf4, nf4-dq, bnb-fp4, bnb-fp4-dq)";
  expect_error("analyze --model llama-3-8b --weights int3", "--weights 'int3': unknown format 'int3' " + formats);
  expect_error("analyze --model llama-3-8b --weights fp8-sym",
               "--weights 'fp8-sym': 'sym' does not apply to fp8 " + formats);
  expect_error("analyze --model llama-3-8b --phase generate --weights nf4-g0",
               "--weights 'nf4-g0': 'g0' does not apply to nf4 " + formats);
  expect_error("analyze --model cnn --weights int4",
               "--weights does not apply to the built-in network 'cnn' (it is for decoder LLMs)");
  expect_error("analyze --model llama-3-8b --train --weights int4",
               "--weights does not apply with --train: training quantized weights (QLoRA and the like) is not modeled");
}

TEST(CliErrorsTest, BadKvCacheStorage) {
  expect_error("analyze --model llama-3-8b --phase decode --kv-cache fp4",
               "--kv-cache 'fp4' is not one of fp8, int8, fp16, bf16, fp32");
  expect_error("analyze --model cnn --kv-cache fp8",
               "--kv-cache does not apply to the built-in network 'cnn' (it is for decoder LLMs)");
  expect_error("analyze --model llama-3-8b --train --kv-cache fp8",
               "--kv-cache does not apply with --train: a training step keeps no KV cache");
  expect_error("analyze --model llama-3-8b --train --parallel dp=2,tp=2,pp=2 --system dgx-h100 --kv-cache int8",
               "--kv-cache does not apply with --train: a training step keeps no KV cache");
}

TEST(CliErrorsTest, BadActivationQuantization) {
  expect_error("analyze --model llama-3-8b --activations int4", "--activations 'int4' is not one of int8, fp8");
  expect_error("analyze --model llama-3-8b --weights int4 --activations int8",
               "--activations int8 needs int8 weights (--weights int8), not int4: an int8 GEMM multiplies two int8 "
               "operands and scales its sums per output row (int8 weights without zeros or groups)");
  expect_error("analyze --model cnn --activations fp8",
               "--activations does not apply to the built-in network 'cnn' (it is for decoder LLMs)");
  expect_error("analyze --model llama-3-8b --train --activations fp8",
               "--activations does not apply with --train: training with 8-bit activations is not modeled");
}

TEST(CliErrorsTest, BadLatentAttentionMode) {
  expect_error("analyze --model deepseek-v3 --phase decode --mla absorbd",
               "--mla 'absorbd' is not one of absorbed, expanded");
  expect_error("analyze --model llama-3-8b --phase decode --mla absorbed",
               "--mla applies to multi-head latent attention (deepseek_v2, deepseek_v3); llama has none");
  expect_error("analyze --model cnn --mla absorbed",
               "--mla does not apply to the built-in network 'cnn' (it is for decoder LLMs)");
  expect_error("analyze --model deepseek-v3 --train --mla absorbed",
               "--mla does not apply with --train: a training step computes latent attention as transformers does");
}

TEST(CliErrorsTest, BadRoutingHistogram) {
  expect_error("analyze --model mixtral-8x7b --phase decode --routing /nonexistent/routing.json",
               "--routing /nonexistent/routing.json: cannot be read");
  expect_error("analyze --model llama-3-8b --phase decode --routing /nonexistent/routing.json",
               "--routing applies to models with experts; this llama has none");
  expect_error("analyze --model cnn --routing /nonexistent/routing.json",
               "--routing does not apply to the built-in network 'cnn' (it is for decoder LLMs)");
}

TEST(CliErrorsTest, BadSpeculativeDecodingOptions) {
  expect_error("analyze --model llama-3-8b --acceptance 0.5", "--acceptance applies only with --draft");
  expect_error("analyze --model llama-3-8b --draft-tokens 3", "--draft-tokens applies only with --draft");
  expect_error("analyze --model llama-3-70b --draft ff",
               "--draft 'ff' is not a decoder LLM (a preset such as llama-3-8b, or a config.json)");
  expect_error("analyze --model llama-3-70b --draft llama-3-8b --acceptance 2", "--acceptance 2 must be from 0 to 1");
  expect_error("analyze --model llama-3-70b --draft llama-3-8b --draft-tokens 100",
               "--draft-tokens 100 must be from 1 to 64");
  expect_error("analyze --model llama-3-70b --draft llama-3-8b --phase prefill",
               "--draft estimates decode steps: --phase must be decode (or left out)");
  expect_error("analyze --model llama-3-70b --model llama-2-7b --draft llama-3-8b",
               "--draft needs exactly one target model (a decoder preset or config.json)");
  expect_error("analyze --model llama-3-70b --draft llama-3-8b --train", "--train does not apply with --draft");
  expect_error("analyze --model llama-3-70b --draft llama-3-8b --target-ms-per-token 10",
               "--target-ms-per-token does not apply with --draft");
  expect_error("analyze --model llama-3-8b --draft llama-3-8b --context 8188",
               "llama-3-8b: a decode step of 5 new token(s) at context 8188 reaches 8193 positions, beyond the "
               "model's 8192 (max_position_embeddings)");
  expect_error(
      "analyze --model llama-3-70b --draft mistral-7b",
      "--draft mistral-7b has a vocabulary of 32000 tokens and llama-3-70b one of 128256: a draft must share the "
      "target's tokenizer");
}

TEST(CliErrorsTest, BadGenerationOptions) {
  expect_error("analyze --model llama-3-8b --generate 5", "--generate applies only with --phase generate");
  expect_error("analyze --model llama-3-8b --phase generate --context 5",
               "--context does not apply with --phase generate");
  expect_error("analyze --model ff --phase generate",
               "--phase generate: the model 'ff' is not a decoder LLM (a preset such as llama-3-8b, or a config.json)");
  expect_error("analyze --model llama-3-8b --phase generate --generate 0",
               "--generate 0 must be a positive integer below 2^31");
  expect_error("analyze --model llama-3-8b --model llama-2-7b --phase generate",
               "--phase generate needs exactly one model (a decoder preset or config.json)");
  expect_error("analyze --model llama-3-8b --price-per-hour 2",
               "--price-per-hour applies only with --phase generate (the cost command prices measured runs)");
  expect_error("analyze --model llama-3-8b --phase generate --currency EUR",
               "--currency applies only with --price-per-hour");
  expect_error("analyze --model llama-3-8b --draft llama-3-8b --price-per-hour 2",
               "--price-per-hour does not apply with --draft");
  // the cheapest system for a latency target
  expect_error("analyze --model llama-3-8b --target-ms-per-token 20",
               "--target-ms-per-token applies with --phase decode");
  expect_error("analyze --model llama-3-8b --phase decode --target-ms-per-token 0",
               "--target-ms-per-token 0 must be more than 0 milliseconds");
  expect_error("analyze --model llama-3-8b --phase decode --target-ms-per-token 20 --hardware a100",
               "--hardware does not apply with --target-ms-per-token (it tries every built-in system and each "
               "device's own memory)");
  expect_error("analyze --model llama-3-8b --phase decode --target-ms-per-token 20 --batch 1,8",
               "--target-ms-per-token takes one --batch (the sequences served at once)");
  expect_error("analyze --model ff --phase decode --target-ms-per-token 20",
               "--target-ms-per-token: the model 'ff' is not a decoder LLM (a preset such as llama-3-8b, or a "
               "config.json)");
  expect_error("analyze --model llama-3-8b --phase decode --target-ms-per-token 20 --price-file /nonexistent.json",
               "cannot open price file '/nonexistent.json'");
  expect_error("analyze --model llama-3-8b --price-file p.json",
               "--price-file applies only with --target-ms-per-token (the cost command prices measured runs)");
}

TEST(CliErrorsTest, BudgetThatCannotHoldBatchOne) {
  const CliResult r = run_cli("analyze --model ff --train --memory-budget 1MB");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: --memory-budget 1 MB cannot hold batch 1: it needs 2.71 MB"));
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace neuralcost

namespace neuralcost {
namespace {

TEST(CliErrorsTest, TrainingOptionsNeedTrainAndKnownValues) {
  expect_error("profile ff --optimizer adam", "--optimizer applies to training runs only: add --train");
  expect_error("study ff --learning-rate 0.1", "--learning-rate applies to training runs only: add --train");
  expect_error("profile ff --train --optimizer lion", "--optimizer 'lion' is not one of sgd, momentum, adam, adamw");
  expect_error("profile ff --train --optimizer sgd --betas 0.9,0.99",
               "--betas does not apply to --optimizer sgd (only to adam, adamw)");
  expect_error("profile ff --train --betas 0.9", "--betas '0.9' is not B1,B2 (e.g. 0.9,0.999)");
  expect_error("profile ff --train --learning-rate -1", "--learning-rate must be more than 0 and at most 10 (got -1)");
  expect_error("profile ff --train --precision fp16-mixed",
               "--precision fp16-mixed: measured training steps run fp32 or bf16-mixed (fp16 needs loss scaling, "
               "which is not measured; analyze --train counts it)");
  expect_error("profile ff --train --checkpoint every:4",
               "--checkpoint every:4: measured training steps run without checkpointing only (analyze --train "
               "counts it)");
  expect_error("profile ff,/nonexistent/model.pt --train",
               "--train runs the built-in networks only (ff, cnn, rnn, lstm, transformer), not the model file "
               "'/nonexistent/model.pt'");
}

// What profile and study would get wrong for every run alike is said before any run: sizes of
// the built-in networks, inputs they do not take, NaN where NaN stands for "not given", more
// threads than CPUs; a --resume of a file that is not there; a spec that names a field twice.
TEST(CliErrorsTest, WhatEveryRunWouldFailOnIsSaidBeforeAnyRun) {
  for (const std::string command : {"profile", "study"}) {
    expect_error(command + " ff --width 0" + kTestRoof, "--width 0 must be a positive integer below 2^31");
    expect_error(command + " ff --input-shape 1x2" + kTestRoof,
                 "--input and --input-shape apply to model files, not to the built-in network ff (its input is "
                 "--batch, --seq, --width)");
    expect_error(command + " ff --train --learning-rate nan" + kTestRoof, "--learning-rate nan is not a number");
  }
  const CliResult threads = run_cli("profile ff --threads 4096" + kTestRoof);
  EXPECT_EQ(threads.exit_code, 1);
  EXPECT_THAT(threads.err, ::testing::MatchesRegex("error: --threads 4096 is more than the [0-9]+ CPUs this process "
                                                   "may run on\n"));
  expect_error("study ff --backend libtorch --resume -o /nonexistent-nc/study.jsonl" + kTestRoof,
               "--resume: '/nonexistent-nc/study.jsonl' does not exist (nothing to resume; leave out --resume to "
               "start)");
  const std::string spec = ::testing::TempDir() + "/nc_spec_twice.json";
  std::string text = slurp(kGood + "test_cpu_2core.json");
  text.insert(text.find('{') + 1, "\"id\": \"other\", ");
  std::ofstream(spec) << text;
  expect_error("hardware show " + spec, spec + ": 'id' is given twice");
  std::remove(spec.c_str());
}

TEST(CliErrorsTest, WarmUpsThatWouldNeverEndAreOneErrorLine) {
  for (const std::string command : {"profile", "study"}) {
    expect_error(command + " ff --warmup 2000000" + kTestRoof,
                 "--warmup must be at most 1,000,000 passes (got 2000000)");
    expect_error(command + " ff --warmup-seconds 1e9" + kTestRoof,
                 "--warmup-seconds must be at most 3600 (got 1000000000)");
  }
  expect_usage_error("profile ff --warmup 99999999999" + kTestRoof, "--warmup");  // beyond an int
}

}  // namespace
}  // namespace neuralcost
