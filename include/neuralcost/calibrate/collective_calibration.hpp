// Calibrating the link: sweeps of each collective on torch.distributed (gloo over local
// processes) from a few bytes to hundreds of megabytes, an α–β fit per collective, rank count and
// size segment, the fit checked on sizes it did not see, and an interconnect spec that
// collective_seconds() and `--system` use (docs/distributed.md, "Calibrating the link").
#pragma once

#include <string>
#include <vector>

#include "neuralcost/cost/collectives.hpp"
#include "neuralcost/hardware/interconnect.hpp"

namespace neuralcost {

struct CollectiveCalibrationOptions {
  std::vector<int> ranks = {2, 3};
  std::vector<Collective> collectives = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                                         Collective::kAllToAll, Collective::kBroadcast};
  double min_bytes = 4;
  double max_bytes = 256.0 * 1024 * 1024;  ///< sizes are min_bytes × 2^k up to this
  int rounds = 11;                         ///< timed rounds per size (the median is the point)
  double min_round_seconds = 0.02;         ///< calls per round: enough for this long
  /// > 0: one call a round, after this long of compute on every rank (as a training step issues
  /// its collectives: threads woken, caches cold); 0: back-to-back calls (the link's best)
  double after_compute_seconds = 0;
  double deadline_seconds = 3600;    ///< one sweep over one rank count
  std::string id = "gloo-loopback";  ///< the spec's id
};

/// One size of one collective: its rounds (per-call seconds, the slowest rank's) and median.
struct CollectivePoint {
  Collective collective = Collective::kAllReduce;
  int ranks = 2;
  double bytes = 0;
  int calls = 0;
  std::vector<double> seconds;
  double median_seconds = 0;
  bool held_back = false;        ///< not used in the fit: checks it
  double predicted_seconds = 0;  ///< from the fit
};

struct CollectiveCalibration {
  std::vector<CollectivePoint> points;
  InterconnectSpec link;  ///< kind loopback, with its measured segments
  std::string torch_version;
  std::string cpu;
  double wall_seconds = 0;
  std::vector<std::string> notes;
};

/// Runs the sweeps (the torch worker's Python, `python -m neuralcost_worker collectives`), fits
/// and checks them. Throws kInvalidArgument for a rank count below 2 or sizes out of order,
/// kUnavailable without a Python environment with torch, and kAborted when a rank dies or hangs
/// (its processes are stopped; the error says which sweep).
CollectiveCalibration calibrate_collectives(const CollectiveCalibrationOptions& options);

/// The α–β segments of one collective over `ranks` from its (bytes, seconds) points, sorted by
/// size: t = α + factor × S / B per segment, fitted by least squares on relative error (each
/// point's error as a share of its time), α ≥ 0. Up to `max_segments` contiguous segments of at
/// least 3 points, the fewest whose worst point is within 5 % (else the count of least BIC). A segment
/// spans its first to its last point; collective_seconds() interpolates between segments.
std::vector<CollectiveSegment> fit_collective_segments(Collective c, int ranks,
                                                       const std::vector<std::pair<double, double>>& points,
                                                       int max_segments = 4);

}  // namespace neuralcost
