// Interconnect and system specs (data/interconnects, data/systems), the measured segments a
// calibration writes, and the fit that makes them.
#include "neuralcost/hardware/interconnect.hpp"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neuralcost/calibrate/collective_calibration.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost {
namespace {

const char* kLink = R"({"schema_version": 1, "id": "test-link", "name": "a test link", "kind": "nvlink",
  "scope": "intra-node", "line_rate_bytes_per_second": 4.5e11, "bus_bandwidth_bytes_per_second": 3.7e11,
  "latency_seconds": 2e-6, "sources": {"line_rate_bytes_per_second": "test"}})";

std::string with(const std::string& field, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(kLink);
  j[field] = nlohmann::json::parse(value);
  return j.dump();
}

TEST(InterconnectTest, EveryBuiltInLinkHasASourcePerFigureAndEverySystemItsParts) {
  ASSERT_GE(builtin_interconnects().size(), 11u);
  for (const auto& s : builtin_interconnects()) {
    EXPECT_TRUE(s.sources.count("bus_bandwidth_bytes_per_second")) << s.id;
    EXPECT_TRUE(s.sources.count("latency_seconds")) << s.id;
    ASSERT_TRUE(s.line_rate_bytes_per_second) << s.id;
    EXPECT_TRUE(s.sources.count("line_rate_bytes_per_second")) << s.id;
    EXPECT_LE(s.bus_bandwidth_bytes_per_second, *s.line_rate_bytes_per_second) << s.id;
  }
  ASSERT_GE(builtin_systems().size(), 5u);
  for (const auto& s : builtin_systems()) {
    EXPECT_NE(HardwareDatabase::builtin().find(s.device), nullptr) << s.id;
    EXPECT_EQ(find_interconnect(s.intra_node).scope, "intra-node") << s.id;
    EXPECT_EQ(find_interconnect(s.inter_node).scope, "inter-node") << s.id;
  }
  // NVLink 4: NCCL's ring reaches about 370 of the 450 GB/s a direction
  const InterconnectSpec nvlink4 = find_interconnect("nvlink4-nvswitch");
  EXPECT_NEAR(nvlink4.bus_bandwidth_bytes_per_second, 3.7e11, 0.2e11);
  EXPECT_DOUBLE_EQ(*nvlink4.line_rate_bytes_per_second, 4.5e11);
  EXPECT_EQ(find_system("dgx-h100").devices_per_node, 8);
}

TEST(InterconnectTest, UnknownIdsNameTheNearest) {
  try {
    find_system("dgx-h10");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("did you mean 'dgx-h100'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(find_interconnect("nvlink9"), Error);
  EXPECT_THROW(find_interconnect("/no/such/link.json"), Error);
}

TEST(InterconnectTest, BadSpecsAreRefusedNamingTheField) {
  auto message = [](const std::string& text) {
    try {
      parse_interconnect_spec(text, "link.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(with("bus_bandwidth_bytes_per_second", "5e11")).find("above line_rate"), std::string::npos);
  EXPECT_NE(message(with("kind", "\"carrier-pigeon\"")).find("'kind'"), std::string::npos);
  EXPECT_NE(message(with("latency_seconds", "-1")).find("'latency_seconds'"), std::string::npos);
  EXPECT_NE(message(with("scope", "\"rack\"")).find("'scope'"), std::string::npos);
  EXPECT_NE(message(with("measured", R"([{"collective": "all_reduce", "ranks": 1, "segments": []}])"))
                .find("measured[0].ranks"),
            std::string::npos);
  EXPECT_NE(message("{").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(message(kLink), "accepted");
  // a key given twice: JSON parsers keep the last silently
  EXPECT_EQ(message(std::string(kLink).replace(1, 0, R"("latency_seconds": 1, )")),
            "link.json: 'latency_seconds' is given twice");
  try {
    find_interconnect(std::filesystem::temp_directory_path().string() + "/");
    ADD_FAILURE() << "a directory accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory, not a file"), std::string::npos) << e.what();
  }
}

TEST(InterconnectTest, AMeasuredLinkTimesFromItsSegmentsAndRoundTrips) {
  InterconnectSpec link = parse_interconnect_spec(kLink, "link.json");
  MeasuredCollective m;
  m.collective = Collective::kAllReduce;
  m.ranks = 2;
  m.segments = {{4, 65536, 3e-5, 1e9}, {65537, 1e8, 1e-4, 4e9}};
  m.held_back_max_error = 0.04;
  link.measured.push_back(m);
  std::string basis;
  // 2 ranks: factor 1
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kAllReduce, 2, 1024, 4, &basis), 3e-5 + 1024 / 1e9);
  EXPECT_EQ(basis, "measured");
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kAllReduce, 2, 1e6, 4, &basis), 1e-4 + 1e6 / 4e9);
  EXPECT_DOUBLE_EQ(collective_seconds(link, Collective::kAllReduce, 2, 1e9, 4, &basis), 1e-4 + 1e9 / 4e9);
  EXPECT_EQ(basis, "measured, extrapolated");
  // no fit for 4 ranks: the ring model on the link's figures
  EXPECT_NEAR(collective_seconds(link, Collective::kAllReduce, 4, 1e9, 4, &basis), 1.5e9 / 3.7e11 + 6 * 2e-6, 1e-12);
  EXPECT_EQ(basis, "model");
  const InterconnectSpec back = parse_interconnect_spec(interconnect_spec_json(link), "again.json");
  ASSERT_EQ(back.measured.size(), 1u);
  EXPECT_EQ(back.measured[0].segments.size(), 2u);
  EXPECT_DOUBLE_EQ(back.measured[0].segments[1].bus_bytes_per_second, 4e9);
  EXPECT_DOUBLE_EQ(*back.measured[0].held_back_max_error, 0.04);
}

TEST(CollectiveFitTest, RecoversTwoRegimesAndPredictsTheSizesBetween) {
  // a latency-bound protocol below 64 KiB, a bandwidth-bound one above, over 4 ranks (factor 1.5)
  const Collective c = Collective::kAllReduce;
  auto truth = [](double s) { return s < 65536 ? 2e-5 + 1.5 * s / 1e9 : 1e-4 + 1.5 * s / 6e9; };
  std::vector<std::pair<double, double>> fit, check;
  int k = 0;
  for (double s = 4; s <= 256.0 * 1024 * 1024; s *= 2, ++k) (k % 2 == 0 ? fit : check).emplace_back(s, truth(s));
  const auto segments = fit_collective_segments(c, 4, fit);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_NEAR(segments[0].latency_seconds, 2e-5, 2e-7);
  EXPECT_NEAR(segments[0].bus_bytes_per_second, 1e9, 1e7);
  EXPECT_NEAR(segments[1].bus_bytes_per_second, 6e9, 6e7);
  InterconnectSpec link = parse_interconnect_spec(kLink, "link.json");
  link.measured.push_back({c, 4, segments, std::nullopt});
  for (const auto& [s, t] : check) {
    // the one size between the regimes' fitted points may fall on either side of the boundary
    if (s > 16384 && s < 262144) continue;
    EXPECT_NEAR(collective_seconds(link, c, 4, s, 4) / t, 1.0, 0.01) << s;
  }
}

TEST(CollectiveFitTest, OneRegimeIsOneSegmentAndTooFewPointsAreRefused) {
  std::vector<std::pair<double, double>> p;
  for (double s = 4; s < 1e8; s *= 4) p.emplace_back(s, 5e-5 + s / 2e9);
  EXPECT_EQ(fit_collective_segments(Collective::kBroadcast, 2, p).size(), 1u);
  EXPECT_THROW(fit_collective_segments(Collective::kBroadcast, 2, {{4, 1e-5}, {8, 1e-5}}), Error);
}

}  // namespace
}  // namespace neuralcost
