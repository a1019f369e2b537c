// CUPTI range profiler (see range_profiler.hpp). The call sequence is CUPTI's documented one for
// the range-profiling API: initialise the profiler, enable it on the context, build a config image
// for the metrics on the host (from the chip's name and counter availability), size and initialise
// the counter-data image, set the config, start/stop, decode, evaluate per range.
#include "backends/cuda/range_profiler.hpp"

#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdint>
#include <cstdlib>

#include "backends/cuda/cuda_check.hpp"

namespace neuralcost::cuda {
namespace {

void check_cupti(CUptiResult rc, const char* what) {
  if (rc == CUPTI_SUCCESS) return;
  if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || rc == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) {
    throw CudaFailure(std::string(what) +
                      ": GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM): the NVIDIA "
                      "driver restricts them to administrators; run as root or load the driver with "
                      "NVreg_RestrictProfilingToAdminUsers=0");
  }
  const char* text = nullptr;
  cuptiGetResultString(rc, &text);
  throw CudaFailure(std::string(what) + ": " + (text ? text : "CUPTI error " + std::to_string(rc)));
}

template <typename T>
T params(std::size_t size) {
  T p{};
  p.structSize = size;
  return p;
}

}  // namespace

const std::vector<std::string>& counter_study_metrics() {
  static const std::vector<std::string> metrics{
      "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
      "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "lts__t_bytes.sum",
      "gpc__cycles_elapsed.max",
  };
  return metrics;
}

struct RangeProfiler::State {
  CUcontext ctx = nullptr;
  std::vector<std::string> metrics;
  std::vector<const char*> names;
  CUpti_RangeProfiler_Object* object = nullptr;
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<std::uint8_t> config, counter_data;
  std::size_t max_ranges = 0;
};

namespace {

void teardown(RangeProfiler::State* s) {
  if (s->host) {
    auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = s->host;
    cuptiProfilerHostDeinitialize(&p);
  }
  if (s->object) {
    auto p = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = s->object;
    cuptiRangeProfilerDisable(&p);
  }
  auto de = params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
  cuptiProfilerDeInitialize(&de);
  delete s;
}

}  // namespace

RangeProfiler::RangeProfiler(CUcontext ctx, int device, std::vector<std::string> metrics, std::size_t max_ranges)
    : s_(new State) {
  try {
    s_->ctx = ctx;
    s_->metrics = std::move(metrics);
    s_->max_ranges = max_ranges;
    for (const std::string& m : s_->metrics) s_->names.push_back(m.c_str());
    auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    check_cupti(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
    auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    chip.deviceIndex = static_cast<std::size_t>(device);
    check_cupti(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
    auto avail =
        params<CUpti_Profiler_GetCounterAvailability_Params>(CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
    avail.ctx = ctx;
    check_cupti(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
    std::vector<std::uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    check_cupti(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");

    // counter availability is read before the session starts: CUPTI refuses it while one is active
    auto enable = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    enable.ctx = ctx;
    check_cupti(cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable");
    s_->object = enable.pRangeProfilerObject;

    auto host = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip.pChipName;
    host.pCounterAvailabilityImage = availability.data();
    check_cupti(cuptiProfilerHostInitialize(&host), "cuptiProfilerHostInitialize");
    s_->host = host.pHostObject;
    auto add =
        params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    add.pHostObject = s_->host;
    add.ppMetricNames = s_->names.data();
    add.numMetrics = s_->names.size();
    check_cupti(cuptiProfilerHostConfigAddMetrics(&add),
                "cuptiProfilerHostConfigAddMetrics (a metric this chip lacks?)");
    auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    size.pHostObject = s_->host;
    check_cupti(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
    s_->config.resize(size.configImageSize);
    auto image =
        params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    image.pHostObject = s_->host;
    image.configImageSize = s_->config.size();
    image.pConfigImage = s_->config.data();
    check_cupti(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage");

    auto data = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    data.pRangeProfilerObject = s_->object;
    data.pMetricNames = s_->names.data();
    data.numMetrics = s_->names.size();
    data.maxNumOfRanges = max_ranges;
    data.maxNumRangeTreeNodes = static_cast<std::uint32_t>(max_ranges);
    check_cupti(cuptiRangeProfilerGetCounterDataSize(&data), "cuptiRangeProfilerGetCounterDataSize");
    s_->counter_data.resize(data.counterDataSize);
    auto prime = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    prime.pRangeProfilerObject = s_->object;
    prime.counterDataSize = s_->counter_data.size();
    prime.pCounterData = s_->counter_data.data();
    check_cupti(cuptiRangeProfilerCounterDataImageInitialize(&prime), "cuptiRangeProfilerCounterDataImageInitialize");
  } catch (...) {
    teardown(s_);  // a half-set-up session must not stay enabled on the context
    throw;
  }
}

RangeProfiler::~RangeProfiler() { teardown(s_); }

void RangeProfiler::start() {
  auto config = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  config.pRangeProfilerObject = s_->object;
  config.configSize = s_->config.size();
  config.pConfig = s_->config.data();
  config.counterDataImageSize = s_->counter_data.size();
  config.pCounterDataImage = s_->counter_data.data();
  config.range = CUPTI_AutoRange;          // one range per kernel
  config.replayMode = CUPTI_KernelReplay;  // CUPTI replays each kernel for every pass the metrics need
  config.maxRangesPerPass = s_->max_ranges;
  config.numNestingLevels = 1;
  config.minNestingLevel = 1;
  config.passIndex = 0;
  config.targetNestingLevel = 1;
  check_cupti(cuptiRangeProfilerSetConfig(&config), "cuptiRangeProfilerSetConfig");
  auto start = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  start.pRangeProfilerObject = s_->object;
  check_cupti(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart");
}

std::vector<RangeValues> RangeProfiler::stop() {
  auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  stop.pRangeProfilerObject = s_->object;
  check_cupti(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop");
  auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = s_->object;
  check_cupti(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData");
  if (decode.numOfRangeDropped > 0) {
    throw CudaFailure("CUPTI dropped " + std::to_string(decode.numOfRangeDropped) +
                      " ranges: more kernels than the counter data image holds");
  }
  auto info =
      params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s_->counter_data.data();
  info.counterDataImageSize = s_->counter_data.size();
  check_cupti(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");
  std::vector<RangeValues> out;
  std::vector<double> values(s_->names.size());
  for (std::size_t r = 0; r < info.numTotalRanges; ++r) {
    auto name = params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
    name.pCounterDataImage = s_->counter_data.data();
    name.counterDataImageSize = s_->counter_data.size();
    name.rangeIndex = r;
    name.rangeDelimiter = "/";
    check_cupti(cuptiRangeProfilerCounterDataGetRangeInfo(&name), "cuptiRangeProfilerCounterDataGetRangeInfo");
    auto eval = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    eval.pHostObject = s_->host;
    eval.pCounterDataImage = s_->counter_data.data();
    eval.counterDataImageSize = s_->counter_data.size();
    eval.rangeIndex = r;
    eval.ppMetricNames = s_->names.data();
    eval.numMetrics = s_->names.size();
    eval.pMetricValues = values.data();
    check_cupti(cuptiProfilerHostEvaluateToGpuValues(&eval), "cuptiProfilerHostEvaluateToGpuValues");
    RangeValues v;
    v.name = name.rangeName ? name.rangeName : "range " + std::to_string(r);
    for (std::size_t m = 0; m < s_->metrics.size(); ++m) v.metrics[s_->metrics[m]] = values[m];
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace neuralcost::cuda
