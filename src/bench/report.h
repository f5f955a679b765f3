// What a benchmark workload hands back (tables, headline figures against the project's targets,
// charts, notes on method) and how a run's results become text and JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/svg.h"
#include "bench/table.h"

namespace reprise::bench {

// One headline figure, with its target when the project has one.
struct BenchFigure {
  std::string name;   // key in JSON: "prefill_512_tok_s"
  std::string label;  // for people: "prefill, 512-token prompt"
  double value = 0;
  std::string unit;    // "tok/s", "%", "x"
  std::string target;  // ">= 450" or "" when none
  std::optional<bool> met;

  static BenchFigure Plain(std::string name, std::string label, double value, std::string unit);
  // met = value >= threshold (or <= for AtMost); NaN never meets a target.
  static BenchFigure AtLeast(std::string name, std::string label, double value, std::string unit,
                             double threshold);
  static BenchFigure AtMost(std::string name, std::string label, double value, std::string unit,
                            double threshold);
};

struct WorkloadResult {
  std::string name;  // "doc"
  std::vector<BenchTable> tables;
  std::vector<BenchFigure> figures;
  std::vector<ChartSpec> charts;
  std::vector<std::string> notes;  // how it was measured, printed under the tables
  double seconds = 0;              // wall time of the workload
};

// The workload's tables, notes and figures as printed on stdout.
std::string WorkloadText(const WorkloadResult& result);

// Every figure of every workload: workload, figure, value, unit, target, met.
BenchTable SummaryTable(const std::vector<WorkloadResult>& results);

// {"tool", "version", "machine", "settings", "workloads": [{"name", "seconds", "tables",
//  "figures": {name: {"label", "value", "unit", "target", "met"}}, "notes"}]}
nlohmann::json ReportJson(const nlohmann::json& machine, const nlohmann::json& settings,
                          const std::vector<WorkloadResult>& results);

// The CPU model name (from /proc/cpuinfo when readable), hardware threads and best kernel target.
nlohmann::json DescribeMachine();

}  // namespace reprise::bench
