// Importer for the five built-in reference networks (ff, cnn, rnn, lstm, transformer).
#pragma once

#include "neuralcost/importer.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {

/// The reference network's options of a request (model, batch, seq, width, depth, dtype).
ReferenceOptions reference_options_of(const ModelRequest& request);

class ReferenceImporter final : public Importer {
 public:
  std::string_view name() const override { return "reference"; }
  std::string_view description() const override {
    return "built-in reference networks: ff, cnn, rnn, lstm, transformer";
  }
  bool accepts(const ModelRequest& request) const override;
  OpGraph import(const ModelRequest& request) const override;
  bool applies(const ModelRequest& request, std::string_view option) const override;
};

}  // namespace neuralcost
