#include "bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include "kernels/cpu_target.h"

namespace reprise::bench {

BenchFigure BenchFigure::Plain(std::string name, std::string label, double value,
                               std::string unit) {
  BenchFigure figure;
  figure.name = std::move(name);
  figure.label = std::move(label);
  figure.value = value;
  figure.unit = std::move(unit);
  return figure;
}

BenchFigure BenchFigure::AtLeast(std::string name, std::string label, double value,
                                 std::string unit, double threshold) {
  BenchFigure figure = Plain(std::move(name), std::move(label), value, std::move(unit));
  figure.target = fmt::format(">= {:g}", threshold);
  figure.met = !std::isnan(value) && value >= threshold;
  return figure;
}

BenchFigure BenchFigure::AtMost(std::string name, std::string label, double value, std::string unit,
                                double threshold) {
  BenchFigure figure = Plain(std::move(name), std::move(label), value, std::move(unit));
  figure.target = fmt::format("<= {:g}", threshold);
  figure.met = !std::isnan(value) && value <= threshold;
  return figure;
}

namespace {

std::string MetText(const BenchFigure& figure) {
  if (!figure.met) return "";
  return *figure.met ? "yes" : "NO";
}

int Precision(double value) {
  double magnitude = std::fabs(value);
  if (magnitude >= 100) return 0;
  if (magnitude >= 10) return 1;
  // Two significant digits below 0.1, so a small cost (0.0031 %) does not print as 0.00.
  if (magnitude > 0 && magnitude < 0.1 && std::isfinite(magnitude)) {
    return std::min(6, 1 - static_cast<int>(std::floor(std::log10(magnitude))));
  }
  return 2;
}

}  // namespace

std::string WorkloadText(const WorkloadResult& result) {
  std::string out;
  for (const auto& table : result.tables) out += table.ToText() + "\n";
  if (!result.figures.empty()) {
    BenchTable figures("[" + result.name + "] figures",
                       {{"figure", ""}, {"value", ""}, {"unit", ""}, {"target", ""}, {"met", ""}});
    for (const auto& figure : result.figures) {
      figures.AddRow({figure.label, BenchCell(figure.value, Precision(figure.value)), figure.unit,
                      figure.target, MetText(figure)});
    }
    out += figures.ToText() + "\n";
  }
  for (const auto& note : result.notes) out += "  note: " + note + "\n";
  if (!result.notes.empty()) out += "\n";
  return out;
}

BenchTable SummaryTable(const std::vector<WorkloadResult>& results) {
  BenchTable table(
      "summary",
      {{"workload", ""}, {"figure", ""}, {"value", ""}, {"unit", ""}, {"target", ""}, {"met", ""}});
  for (const auto& result : results) {
    for (const auto& figure : result.figures) {
      table.AddRow({result.name, figure.label, BenchCell(figure.value, Precision(figure.value)),
                    figure.unit, figure.target, MetText(figure)});
    }
  }
  return table;
}

nlohmann::json ReportJson(const nlohmann::json& machine, const nlohmann::json& settings,
                          const std::vector<WorkloadResult>& results) {
  nlohmann::json workloads = nlohmann::json::array();
  for (const auto& result : results) {
    nlohmann::json tables = nlohmann::json::array();
    for (const auto& table : result.tables) tables.push_back(table.ToJson());
    nlohmann::json figures = nlohmann::json::object();
    for (const auto& figure : result.figures) {
      nlohmann::json entry = {{"label", figure.label},
                              {"value", std::isfinite(figure.value) ? nlohmann::json(figure.value)
                                                                    : nlohmann::json(nullptr)},
                              {"unit", figure.unit}};
      if (!figure.target.empty()) entry["target"] = figure.target;
      if (figure.met) entry["met"] = *figure.met;
      figures[figure.name] = std::move(entry);
    }
    workloads.push_back({{"name", result.name},
                         {"seconds", result.seconds},
                         {"tables", std::move(tables)},
                         {"figures", std::move(figures)},
                         {"notes", result.notes}});
  }
  return {{"tool", "reprise bench"},
          {"version", "0.1.0"},
          {"machine", machine},
          {"settings", settings},
          {"workloads", std::move(workloads)}};
}

nlohmann::json DescribeMachine() {
  std::string cpu = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) cpu = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  return {{"cpu", cpu},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"best_cpu_target", std::string(kernels::CpuTargetName(kernels::BestCpuTarget()))}};
}

}  // namespace reprise::bench
