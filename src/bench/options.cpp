#include "bench/options.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"
#include "reprise/engine.h"

namespace reprise::bench {

const std::vector<std::string>& BenchWorkloadNames() {
  static const std::vector<std::string> names = {
      "kernels",    "prefill", "decode", "doc", "chat",         "multidoc", "unique",
      "concurrent", "tiers",   "sched",  "all", "side-channel", "soak"};
  return names;
}

bool WorkloadNeedsEngine(const std::string& workload) { return workload != "kernels"; }

bool RunsOverHttp(const std::string& workload) {
  return workload != "kernels" && workload != "sched" && workload != "tiers";
}

HostPort ParseHttpUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    throw Error(
        fmt::format("--url '{}' must start with http:// (e.g. http://127.0.0.1:8080)", url));
  }
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    throw Error(fmt::format("--url '{}' must name a server only, without a path", url));
  }
  HostPort result;
  size_t colon = rest.rfind(':');
  result.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    std::string port = rest.substr(colon + 1);
    auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), result.port);
    if (error != std::errc() || end != port.data() + port.size() || result.port < 1 ||
        result.port > 65535) {
      throw Error(fmt::format("--url '{}' has a bad port '{}'", url, port));
    }
  }
  if (result.host.empty()) throw Error(fmt::format("--url '{}' names no host", url));
  return result;
}

void ValidateBenchOptions(const BenchOptions& options) {
  const auto& names = BenchWorkloadNames();
  if (std::find(names.begin(), names.end(), options.workload) == names.end()) {
    std::string list;
    for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
    throw Error(fmt::format("unknown workload '{}' (one of: {})", options.workload, list));
  }
  if (options.repeat < 1) throw Error("--repeat must be at least 1");
  if (!options.kv_disk_size.empty() && options.kv_disk_path.empty()) {
    throw Error("--kv-disk-size needs --kv-disk-path");
  }
  if (!options.kv_disk_path.empty() && !options.url.empty()) {
    throw Error(
        "--kv-disk-path configures the in-process engine; with --url, start the server "
        "with it instead");
  }
  if (options.mmap_weights && !options.url.empty()) {
    throw Error(
        "--mmap configures the in-process engine; with --url, start the server with it "
        "instead");
  }
  if (options.threads < 0) throw Error("--threads must be 0 (every core) or more");
  if (options.max_batch_tokens < 1) throw Error("--max-batch-tokens must be at least 1");
  if (options.max_running_requests < 1) throw Error("--max-running-requests must be at least 1");
  if (!IsSchedulePolicy(options.schedule_policy)) {
    throw Error(fmt::format("unknown --schedule-policy '{}' ({})", options.schedule_policy,
                            kSchedulePolicyNames));
  }
  if (!IsEvictionPolicy(options.eviction_policy)) {
    throw Error(fmt::format("unknown --eviction-policy '{}' ({})", options.eviction_policy,
                            kEvictionPolicyNames));
  }
  if (!options.model.empty() && !options.make_model_shape.empty()) {
    throw Error("give either -m MODEL or --make-model SHAPE, not both");
  }
  if (!options.cpu_target.empty() && options.cpu_target != "scalar" &&
      options.cpu_target != "avx2" && options.cpu_target != "avx512") {
    throw Error(
        fmt::format("unknown --cpu-target '{}' (scalar, avx2 or avx512)", options.cpu_target));
  }
  if ((options.workload == "side-channel" || options.workload == "soak") && options.url.empty()) {
    throw Error(
        fmt::format("the {} benchmark runs against a server: give --url", options.workload));
  }
  if (!options.url.empty()) {
    ParseHttpUrl(options.url);
    if (!RunsOverHttp(options.workload)) {
      throw Error(
          fmt::format("the {} workload runs in process only; drop --url", options.workload));
    }
    return;
  }
  if (WorkloadNeedsEngine(options.workload) && options.model.empty() &&
      options.make_model_shape.empty()) {
    throw Error(
        fmt::format("the {} workload needs a model: -m MODEL.gguf, --make-model 135m, or --url",
                    options.workload));
  }
}

}  // namespace reprise::bench
