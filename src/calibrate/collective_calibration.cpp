// `hardware calibrate --collectives`: collective sweeps on torch.distributed through the
// worker's Python, α–β segments fitted on every other size and checked on the rest
// (include/neuralcost/calibrate/collective_calibration.hpp, docs/distributed.md).
#include "neuralcost/calibrate/collective_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/python_worker/worker_backend.hpp"
#include "backends/python_worker/worker_process.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/hardware/host.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

constexpr double kMaxBus = 1e15;   // bytes/s: the cap of a fit whose slope is ~0 (latency only)
constexpr double kGoodFit = 0.05;  // a segment count is enough when no point is off by more

struct Line {
  double alpha = 0, beta = 0;  // t = alpha + beta × S
  double worst = 0;            // the largest relative error over its points
  double squares = 0;          // the sum of squared relative errors
};

/// Least squares on relative error over points [from, to), alpha ≥ 0, beta ≥ 0.
Line fit_line(const std::vector<std::pair<double, double>>& p, std::size_t from, std::size_t to) {
  double sw = 0, swx = 0, swxx = 0, swt = 0, swxt = 0;
  for (std::size_t i = from; i < to; ++i) {
    const double x = p[i].first, t = p[i].second, w = 1 / (t * t);
    sw += w, swx += w * x, swxx += w * x * x, swt += w * t, swxt += w * x * t;
  }
  Line l;
  const double det = sw * swxx - swx * swx;
  if (det > 0) {
    l.alpha = (swxx * swt - swx * swxt) / det;
    l.beta = (sw * swxt - swx * swt) / det;
  }
  if (det <= 0 || l.alpha < 0) {  // through the origin
    l.alpha = 0;
    l.beta = swxx > 0 ? swxt / swxx : 0;
  }
  if (l.beta < 0) {  // flat: latency only
    l.beta = 0;
    l.alpha = swt / sw;
  }
  for (std::size_t i = from; i < to; ++i) {
    const double e = (l.alpha + l.beta * p[i].first - p[i].second) / p[i].second;
    l.worst = std::max(l.worst, std::abs(e));
    l.squares += e * e;
  }
  return l;
}

/// The least sum of squares splitting [0, n) into k segments of at least `least` points;
/// `cut[k][j]` the start of the last segment of the best split of [0, j).
struct Split {
  std::vector<std::size_t> starts;
  double worst = 0;
  double squares = 0;
};

Split best_split(const std::vector<std::pair<double, double>>& p, int k, std::size_t least) {
  const std::size_t n = p.size();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> cost(k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> cut(k + 1, std::vector<std::size_t>(n + 1, 0));
  cost[0][0] = 0;
  for (int s = 1; s <= k; ++s) {
    for (std::size_t j = least * s; j <= n; ++j) {
      for (std::size_t i = least * (s - 1); i + least <= j; ++i) {
        if (cost[s - 1][i] == inf) continue;
        const double c = cost[s - 1][i] + fit_line(p, i, j).squares;
        if (c < cost[s][j]) cost[s][j] = c, cut[s][j] = i;
      }
    }
  }
  Split out;
  if (cost[k][n] == inf) return out;
  for (std::size_t j = n, s = k; s > 0; --s) {
    out.starts.insert(out.starts.begin(), cut[s][j]);
    j = cut[s][j];
  }
  for (std::size_t s = 0; s < out.starts.size(); ++s) {
    const std::size_t end = s + 1 < out.starts.size() ? out.starts[s + 1] : n;
    const Line l = fit_line(p, out.starts[s], end);
    out.worst = std::max(out.worst, l.worst);
    out.squares += l.squares;
  }
  return out;
}

/// The sizes of `c` over `ranks`: min_bytes × 2^k up to max_bytes, from one 4-byte element per
/// rank for the collectives whose buffer is in chunks (the worker rounds to whole chunks).
std::vector<double> sizes(const CollectiveCalibrationOptions& o, Collective c, int ranks) {
  const bool chunked = c == Collective::kReduceScatter || c == Collective::kAllGather || c == Collective::kAllToAll;
  double s = o.min_bytes;
  while (chunked && s < 4.0 * ranks) s *= 2;
  std::vector<double> out;
  for (; s <= o.max_bytes * (1 + 1e-9); s *= 2) out.push_back(s);
  return out;
}

constexpr std::size_t kLeastSizes = 6;  // 3 fitted, 3 held back

void check(const CollectiveCalibrationOptions& o) {
  if (o.ranks.empty()) throw Error(ErrorCode::kInvalidArgument, "--ranks: give at least one rank count");
  for (int r : o.ranks) {
    if (r < 2) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--ranks {}: a collective needs at least 2 ranks (a calibration with one rank measures "
                              "no link)",
                              r));
    }
    if (r > 64) throw Error(ErrorCode::kInvalidArgument, fmt::format("--ranks {}: at most 64 local processes", r));
  }
  for (std::size_t i = 0; i < o.ranks.size(); ++i) {
    if (std::find(o.ranks.begin(), o.ranks.begin() + static_cast<std::ptrdiff_t>(i), o.ranks[i]) !=
        o.ranks.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("--ranks {} is given twice", o.ranks[i]));
    }
  }
  // each rank holds a few buffers of the largest size (all-gather's output is ranks × it)
  if (o.max_bytes > 4.0 * (1ull << 30)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--max-bytes {:g} B is above 4 GiB: every rank process holds buffers of the largest size "
                            "(an all-gather's output is ranks times it)",
                            o.max_bytes));
  }
  if (!(o.min_bytes >= 4) || !(o.max_bytes >= o.min_bytes * 32)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--max-bytes must be at least 32 × the smallest size ({} B), so that there are sizes to "
                            "fit and sizes to check (got {} B)",
                            o.min_bytes, o.max_bytes));
  }
  if (o.rounds < 3) throw Error(ErrorCode::kInvalidArgument, fmt::format("--rounds must be >= 3, not {}", o.rounds));
  if (o.collectives.empty()) throw Error(ErrorCode::kInvalidArgument, "no collectives to calibrate");
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&now));
  return text;
}

}  // namespace

std::vector<CollectiveSegment> fit_collective_segments(Collective c, int ranks,
                                                       const std::vector<std::pair<double, double>>& points,
                                                       int max_segments) {
  if (points.size() < 3) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a fit of {} needs at least 3 sizes, not {}", collective_name(c), points.size()));
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!(points[i].second > 0) || (i > 0 && !(points[i].first > points[i - 1].first))) {
      throw Error(ErrorCode::kInvalidArgument, "a fit's points must have positive times and increasing sizes");
    }
  }
  // the fewest segments that fit every point within 5 %; when none do (noise), the count with the
  // least BIC (n ln(SSE/n) + p ln n, p = 3k − 1: α and B per segment and the boundaries), so that
  // a segment more must explain more than noise
  const std::size_t least = 3;
  const double n = static_cast<double>(points.size());
  Split chosen;
  double chosen_bic = 0;
  for (int k = 1; k <= max_segments && least * k <= points.size(); ++k) {
    const Split s = best_split(points, k, least);
    if (s.starts.empty()) continue;
    const double bic = n * std::log(std::max(s.squares, 1e-300) / n) + (3.0 * k - 1) * std::log(n);
    if (s.worst <= kGoodFit) {
      chosen = s;
      break;
    }
    if (chosen.starts.empty() || bic < chosen_bic) chosen = s, chosen_bic = bic;
  }
  const double factor = bus_bandwidth_factor(c, ranks);
  std::vector<CollectiveSegment> out;
  for (std::size_t s = 0; s < chosen.starts.size(); ++s) {
    const std::size_t from = chosen.starts[s];
    const std::size_t to = s + 1 < chosen.starts.size() ? chosen.starts[s + 1] : points.size();
    const Line l = fit_line(points, from, to);
    CollectiveSegment seg;
    seg.latency_seconds = l.alpha;
    seg.bus_bytes_per_second = std::max(1.0, l.beta > factor / kMaxBus ? factor / l.beta : kMaxBus);
    seg.min_bytes = points[from].first;
    seg.max_bytes = points[to - 1].first;
    out.push_back(seg);
  }
  return out;
}

CollectiveCalibration calibrate_collectives(const CollectiveCalibrationOptions& options) {
  check(options);
  if (auto why = worker::WorkerBackend("collectives", "torch", "", {"eager"}, "eager", {}).unavailable_reason()) {
    throw Error(ErrorCode::kNotFound, "--collectives needs the torch worker's Python: " + *why);
  }
  const auto started = std::chrono::steady_clock::now();
  CollectiveCalibration out;
  const HostDescription host = describe_host();
  out.cpu = host.model;
  worker::WorkerProcess process({worker::python_interpreter(), "-m", "neuralcost_worker", "collectives"},
                                {{"PYTHONPATH", worker::worker_directory()}, {"PYTHONUNBUFFERED", "1"}},
                                "the collectives worker");
  const json hello = process.request({{"cmd", "hello"}}, std::chrono::seconds(120));
  out.torch_version = hello.value("torch", std::string("?"));
  if (!hello.value("gloo", false)) {
    throw Error(ErrorCode::kUnimplemented, fmt::format("torch {} was built without gloo", out.torch_version));
  }
  InterconnectSpec& link = out.link;
  link.id = options.id;
  link.name = fmt::format("gloo over loopback, local processes on {}", out.cpu);
  link.kind = "loopback";
  link.scope = "intra-node";
  const std::string source = fmt::format(
      "measured on {} by `neural-cost hardware calibrate --collectives` (torch {}, "
      "gloo, {} rounds a size, the median{})",
      today(), out.torch_version, options.rounds,
      options.after_compute_seconds > 0 ? fmt::format("; one call a round after {:g} ms of compute on every rank",
                                                      options.after_compute_seconds * 1e3)
                                        : "");
  for (int ranks : options.ranks) {
    json points = json::array();
    for (Collective c : options.collectives) {
      for (double s : sizes(options, c, ranks)) points.push_back({{"collective", collective_name(c)}, {"bytes", s}});
    }
    json reply;
    try {
      reply = process.request({{"cmd", "sweep"},
                               {"ranks", ranks},
                               {"rounds", options.rounds},
                               {"min_round_seconds", options.min_round_seconds},
                               {"compute_seconds", options.after_compute_seconds},
                               {"points", points},
                               {"deadline_seconds", options.deadline_seconds}},
                              std::chrono::duration<double>(options.deadline_seconds + 60));
    } catch (const Interrupted&) {
      throw;  // Ctrl-C: the command ends with the signal's status, its workers ended
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("the sweep over {} ranks failed: {}", ranks, e.what()));
    }
    for (const json& p : reply.at("points")) {
      CollectivePoint point;
      point.collective = *collective_from_name(p.at("collective").get<std::string>());
      point.ranks = ranks;
      point.bytes = p.at("bytes").get<double>();
      point.calls = p.at("calls").get<int>();
      point.seconds = p.at("seconds").get<std::vector<double>>();
      point.median_seconds = median(point.seconds);
      out.points.push_back(point);
    }
  }
  process.stop();
  // fit every other size, check on the rest
  for (int ranks : options.ranks) {
    for (Collective c : options.collectives) {
      // the sizes the worker ran, each once (rounding to whole chunks can make two sizes one)
      std::vector<CollectivePoint*> mine;
      for (auto& p : out.points) {
        if (p.collective == c && p.ranks == ranks && (mine.empty() || p.bytes > mine.back()->bytes)) {
          mine.push_back(&p);
        }
      }
      if (mine.size() < kLeastSizes) {
        out.notes.push_back(
            fmt::format("{} over {} ranks: {} distinct sizes, too few to fit and check (raise "
                        "--max-bytes)",
                        collective_name(c), ranks, mine.size()));
        continue;
      }
      std::vector<std::pair<double, double>> fit;
      for (std::size_t i = 0; i < mine.size(); ++i) {
        mine[i]->held_back = i % 2 == 1;
        if (!mine[i]->held_back) fit.emplace_back(mine[i]->bytes, mine[i]->median_seconds);
      }
      MeasuredCollective m;
      m.collective = c;
      m.ranks = ranks;
      m.segments = fit_collective_segments(c, ranks, fit);
      link.measured.push_back(m);
      double worst = 0;
      for (CollectivePoint* p : mine) {
        p->predicted_seconds = collective_seconds(link, c, ranks, p->bytes, 4);
        if (p->held_back) worst = std::max(worst, std::abs(p->predicted_seconds / p->median_seconds - 1));
      }
      link.measured.back().held_back_max_error = worst;
    }
  }
  // the link's summary figures: the all-reduce of the most ranks, its largest and smallest segments
  const MeasuredCollective* ar = nullptr;
  for (const auto& m : link.measured) {
    if (m.collective == Collective::kAllReduce && (ar == nullptr || m.ranks > ar->ranks)) ar = &m;
  }
  if (link.measured.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "no collective had enough distinct sizes to fit: raise --max-bytes");
  }
  const MeasuredCollective& summary = ar != nullptr ? *ar : link.measured.back();
  link.bus_bandwidth_bytes_per_second = summary.segments.back().bus_bytes_per_second;
  const CollectiveCost shape =
      collective_cost(summary.collective, CollectiveAlgorithm::kRing, summary.ranks, 0, 4, LinkRoof{1, 0});
  link.latency_seconds = summary.segments.front().latency_seconds / std::max(1, shape.latency_steps);
  link.sources["bus_bandwidth_bytes_per_second"] = fmt::format(
      "{}: {} over {} ranks, the largest sizes' segment", source, collective_name(summary.collective), summary.ranks);
  link.sources["latency_seconds"] =
      fmt::format("{}: the smallest sizes' α of {} over {} ranks / its {} ring steps", source,
                  collective_name(summary.collective), summary.ranks, shape.latency_steps);
  link.sources["measured"] = source + "; each fitted on every other size and checked on the sizes between";
  link.notes.push_back(
      fmt::format("{} vCPUs shared by {} rank processes: the ranks' own compute and the machine's "
                  "other load are in these times",
                  host.logical_cpus, fmt::join(options.ranks, " or ")));
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace neuralcost
