// `bench kernels`: prefill matmul GFLOP/s and decode matmul GB/s per weight type, beside the
// machine's FMA and streaming-read peaks measured on the same threads, the weights laid out as
// a model loaded into private memory has them (PreferredLayout).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <random>

#include "bench/peak.h"
#include "bench/stats.h"
#include "bench/warm_attention.h"
#include "bench/workloads.h"
#include "core/aligned_buffer.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/text.h"
#include "kernels/matmul.h"

namespace reprise::bench {

namespace {

using kernels::CpuTarget;
using kernels::WeightType;

constexpr WeightType kTypes[] = {WeightType::kF32,  WeightType::kF16,  WeightType::kBF16,
                                 WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1,
                                 WeightType::kQ5_0, WeightType::kQ5_1, WeightType::kQ4_K,
                                 WeightType::kQ5_K, WeightType::kQ6_K};

struct PrefillShape {
  std::string name;  // what in a model has this shape
  int64_t tokens;
  int64_t rows;  // n
  int64_t cols;  // k
};

CpuTarget TargetByName(const std::string& name) {
  if (name == "scalar") return CpuTarget::kScalar;
  if (name == "avx2") return CpuTarget::kAvx2;
  if (name == "avx512") return CpuTarget::kAvx512;
  return kernels::BestCpuTarget();
}

// A weight matrix of `rows` x `cols` in `type`: 64 distinct quantized random rows tiled over the
// matrix (the values do not change the speed; quantizing every row of a large matrix would).
AlignedBuffer<uint8_t> MakeWeights(WeightType type, int64_t rows, int64_t cols) {
  const size_t row_bytes = kernels::RowBytes(type, cols);
  AlignedBuffer<uint8_t> weights(row_bytes * static_cast<size_t>(rows));  // [rows][row_bytes]
  std::mt19937 random(1234);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> values(static_cast<size_t>(cols));
  const int64_t distinct = std::min<int64_t>(64, rows);
  for (int64_t r = 0; r < distinct; ++r) {
    for (float& v : values) v = normal(random);
    kernels::QuantizeRow(type, values.data(), cols, weights.data() + r * row_bytes);
  }
  for (int64_t r = distinct; r < rows; ++r) {
    std::copy_n(weights.data() + (r % distinct) * row_bytes, row_bytes,
                weights.data() + r * row_bytes);
  }
  return weights;
}

AlignedBuffer<float> MakeActivations(int64_t tokens, int64_t cols) {
  AlignedBuffer<float> x(static_cast<size_t>(tokens * cols));  // [tokens][cols]
  std::mt19937 random(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(random);
  return x;
}

// Seconds of each of `runs` timed calls, after one untimed call.
std::vector<double> TimeMatMul(CpuTarget target, const kernels::WeightView& w, const float* x,
                               int64_t tokens, float* y, ThreadPool& pool, int runs) {
  kernels::MatMulOnTarget(target, w, x, tokens, y, pool);
  std::vector<double> seconds;
  for (int run = 0; run < runs; ++run) {
    Clock::time_point start = Clock::now();
    kernels::MatMulOnTarget(target, w, x, tokens, y, pool);
    seconds.push_back(SecondsSince(start));
  }
  return seconds;
}

bool Fits(WeightType type, int64_t cols) {
  return cols % static_cast<int64_t>(kernels::BlockElements(type)) == 0;
}

std::string TypeName(WeightType type) {
  std::string name(kernels::WeightTypeName(type));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// The row-major matrix `w` (its bytes writable at `data`) laid out as a model loaded into private
// memory lays it out for `target` (a `--mmap` model keeps rows as stored).
kernels::WeightView AsLoaded(CpuTarget target, const kernels::WeightView& w, void* data) {
  const kernels::WeightLayout layout = kernels::PreferredLayout(target, w.type);
  if (layout == kernels::WeightLayout::kRowMajor) return w;
  return kernels::ArrangeRowGroups(w, layout, data);
}

}  // namespace

WorkloadResult RunKernelsWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "kernels";
  const CpuTarget target = TargetByName(context.options().cpu_target);
  if (!kernels::CpuTargetSupported(target)) {
    throw Error(
        fmt::format("--cpu-target {} is not supported on this CPU", context.options().cpu_target));
  }
  const CpuTarget peak_target = kernels::BestCpuTarget();
  ThreadPool pool(context.threads());
  const int runs = std::max(5, context.repeat() * 3);
  const std::vector<PrefillShape> shapes =
      context.quick() ? std::vector<PrefillShape>{{"135m ffn_up", 64, 1536, 576},
                                                  {"135m ffn_down", 64, 576, 1536}}
                      : std::vector<PrefillShape>{{"135m ffn_up", 512, 1536, 576},
                                                  {"135m ffn_down", 512, 576, 1536},
                                                  {"1b attn", 512, 2048, 2048}};
  // Decode reads a matrix several times the last-level cache, so it streams from memory.
  const size_t decode_bytes =
      std::clamp<size_t>(4 * LastLevelCacheBytes(), size_t{128} << 20, size_t{1} << 30);
  const int64_t decode_cols = 4096;
  const size_t read_bytes = decode_bytes;

  BenchProgress& progress = context.progress();
  const int types = static_cast<int>(std::size(kTypes));
  progress.Begin("kernels", 4 + types * (static_cast<int>(shapes.size()) + 1));
  progress.Step("FMA peak, 1 thread");
  ThreadPool one_thread(1);
  const double fma_one = MeasureFmaPeak(peak_target, one_thread, 0.004, context.Pick(40, 10));
  progress.Step("FMA peak, all threads");
  const double fma_peak = MeasureFmaPeak(peak_target, pool, 0.004, context.Pick(60, 15));
  progress.Step("read bandwidth peak");
  ReadBandwidthProbe read_probe(peak_target, pool, read_bytes);
  const double read_peak = read_probe.Best(context.Pick(45, 15));

  BenchTable peaks("[kernels] machine peaks (" + std::to_string(pool.num_threads()) + " threads, " +
                       std::string(kernels::CpuTargetName(peak_target)) + ")",
                   {{"probe", ""}, {"value", ""}, {"unit", ""}});
  peaks.AddRow({"FMA loop (f32), 1 thread", BenchCell(fma_one, 1), "GFLOP/s"});
  peaks.AddRow({fmt::format("FMA loop (f32), {} threads", pool.num_threads()),
                BenchCell(fma_peak, 1), "GFLOP/s"});
  peaks.AddRow(
      {fmt::format("streaming read ({} MiB)", read_bytes >> 20), BenchCell(read_peak, 1), "GB/s"});
  result.tables.push_back(std::move(peaks));

  std::vector<BenchColumn> prefill_columns = {{"type", ""}};
  for (const auto& shape : shapes) {
    std::string label =
        fmt::format("{} {}x{}x{}", shape.name, shape.tokens, shape.rows, shape.cols);
    prefill_columns.push_back({label, "GFLOP/s"});
    prefill_columns.push_back({"peak", "%"});
  }
  BenchTable prefill(
      "[kernels] prefill matmul (tokens x n x k, weights laid out as a loaded "
      "model's; best of " +
          std::to_string(runs) + ", " + std::string(kernels::CpuTargetName(target)) + ")",
      prefill_columns);
  BenchTable decode(
      fmt::format("[kernels] decode matmul (1 token x {} MiB of weights, k = {}; best "
                  "of {}, each run beside a pass of the read probe)",
                  decode_bytes >> 20, decode_cols, 4 * runs),
      {{"type", ""},
       {"rows", ""},
       {"time", "ms"},
       {"bandwidth", "GB/s"},
       {"read peak beside", "GB/s"},
       {"of read peak", "%"},
       {"GFLOP/s", ""}});
  ChartSpec prefill_chart{
      ChartKind::kBar,         "Prefill matmul", "weight type", "GFLOP/s", {}, {},
      {{"FMA peak", fma_peak}}};
  for (const auto& shape : shapes) {
    prefill_chart.series.push_back(
        {fmt::format("{}x{}x{}", shape.tokens, shape.rows, shape.cols), {}});
  }
  ChartSpec decode_chart{ChartKind::kBar,  "Decode matmul (1 token)", "weight type", "GB/s", {},
                         {{"decode", {}}}, {{"read peak", read_peak}}};

  for (WeightType type : kTypes) {
    const std::string name = TypeName(type);
    prefill_chart.categories.push_back(name);
    decode_chart.categories.push_back(name);
    std::vector<BenchCell> row = {name};
    for (size_t s = 0; s < shapes.size(); ++s) {
      const PrefillShape& shape = shapes[s];
      progress.Step(fmt::format("prefill {} {}", name, shape.name));
      if (!Fits(type, shape.cols)) {
        row.insert(row.end(), {BenchCell(), BenchCell()});
        prefill_chart.series[s].values.push_back(std::nan(""));
        continue;
      }
      AlignedBuffer<uint8_t> weights = MakeWeights(type, shape.rows, shape.cols);
      AlignedBuffer<float> x = MakeActivations(shape.tokens, shape.cols);
      AlignedBuffer<float> y(static_cast<size_t>(shape.tokens * shape.rows));  // [tokens][rows]
      const kernels::WeightView w =
          AsLoaded(target, {type, weights.data(), shape.rows, shape.cols}, weights.data());
      std::vector<double> seconds =
          TimeMatMul(target, w, x.data(), shape.tokens, y.data(), pool, runs);
      double flops = 2.0 * static_cast<double>(shape.tokens * shape.rows * shape.cols);
      double gflops = flops / Min(seconds) / 1e9;
      double percent = 100.0 * gflops / fma_peak;
      row.insert(row.end(), {BenchCell(gflops, 1), BenchCell(percent, 0)});
      prefill_chart.series[s].values.push_back(gflops);
      const bool headline = s + 1 == shapes.size();
      if (headline && (type == WeightType::kF32 || type == WeightType::kF16)) {
        result.figures.push_back(BenchFigure::AtLeast(
            fmt::format("prefill_{}_percent_of_fma_peak", AsciiLower(name)),
            fmt::format("prefill matmul {} ({}), % of FMA peak", name, shape.name), percent, "%",
            50));
      } else if (headline && (type == WeightType::kQ8_0 || type == WeightType::kQ4_0)) {
        result.figures.push_back(BenchFigure::AtLeast(
            fmt::format("prefill_{}_percent_of_fma_peak", AsciiLower(name)),
            fmt::format("prefill matmul {} ({}), % of FMA peak", name, shape.name), percent, "%",
            40));
      }
    }
    prefill.AddRow(std::move(row));

    progress.Step(fmt::format("decode {}", name));
    const size_t row_bytes = kernels::RowBytes(type, decode_cols);
    const int64_t rows = static_cast<int64_t>(decode_bytes / row_bytes);
    AlignedBuffer<uint8_t> weights = MakeWeights(type, rows, decode_cols);
    AlignedBuffer<float> x = MakeActivations(1, decode_cols);
    AlignedBuffer<float> y(static_cast<size_t>(rows));
    const kernels::WeightView w =
        AsLoaded(target, {type, weights.data(), rows, decode_cols}, weights.data());
    // Each run is paired with a pass of the read probe just before it, and the type is compared
    // with the best of its own passes: a shared machine's bandwidth drifts over the seconds the
    // whole benchmark takes, and a peak taken at another moment would flatter or wrong it.
    kernels::MatMulOnTarget(target, w, x.data(), 1, y.data(), pool);  // untimed first call
    double best = std::numeric_limits<double>::infinity();
    double beside_peak = 0;
    for (int run = 0; run < 4 * runs; ++run) {
      beside_peak = std::max(beside_peak, read_probe.Pass());
      Clock::time_point start = Clock::now();
      kernels::MatMulOnTarget(target, w, x.data(), 1, y.data(), pool);
      best = std::min(best, SecondsSince(start));
    }
    double bytes = static_cast<double>(row_bytes) * static_cast<double>(rows);
    double gbps = bytes / best / 1e9;
    double percent = 100.0 * gbps / beside_peak;
    decode.AddRow({name, rows, BenchCell(best * 1e3, 2), BenchCell(gbps, 1),
                   BenchCell(beside_peak, 1), BenchCell(percent, 0),
                   BenchCell(2.0 * static_cast<double>(rows * decode_cols) / best / 1e9, 1)});
    decode_chart.series[0].values.push_back(gbps);
    // Decode reads every weight once, so it should run near the read bandwidth: 85% for the
    // quantizations people download, 70% for the float types.
    const bool downloaded = type == WeightType::kQ8_0 || type == WeightType::kQ4_0 ||
                            type == WeightType::kQ4_K || type == WeightType::kQ5_K ||
                            type == WeightType::kQ6_K;
    if (downloaded || type == WeightType::kF16 || type == WeightType::kF32) {
      result.figures.push_back(
          BenchFigure::AtLeast(fmt::format("decode_{}_percent_of_read_peak", AsciiLower(name)),
                               fmt::format("decode matmul {}, % of read bandwidth", name), percent,
                               "%", downloaded ? 85 : 70));
    }
  }
  // The attention a warm turn adds to prefilling its new tokens alone (one layer).
  progress.Step("attention of a warm turn");
  const WarmAttentionShape attention_shape{.new_tokens = context.quick() ? 16 : 64,
                                           .cached = context.quick() ? 512 : 1600};
  BenchTable attention(
      fmt::format("[kernels] attention of a warm turn ({} new tokens over {} cached positions, "
                  "{} KV heads x {} query heads, head_dim {}; one layer, best of {})",
                  attention_shape.new_tokens, attention_shape.cached, attention_shape.kv_heads,
                  attention_shape.group, attention_shape.head_dim, runs),
      {{"K/V type", ""}, {"time", "ms"}, {"GFLOP/s", ""}, {"FMA peak", "%"}});
  for (const WarmAttentionTiming& timing : TimeWarmAttention(attention_shape, pool, runs)) {
    const double percent = 100.0 * timing.gflops / fma_peak;
    attention.AddRow({timing.kv_type, BenchCell(timing.seconds * 1e3, 3),
                      BenchCell(timing.gflops, 1), BenchCell(percent, 0)});
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("warm_attention_{}_percent_of_fma_peak", timing.kv_type),
        fmt::format("attention of a warm turn, {} K/V, % of FMA peak", timing.kv_type), percent,
        "%"));
  }
  // A decoding token's attention after a long context, its K/V read from memory as in a decode
  // step (the weights stream in between), against the read peak: the scattered block planes it
  // reads (each block holds every layer) are what bound it.
  progress.Step("attention of a decoding token");
  const WarmAttentionShape decode_shape{.new_tokens = 1,
                                        .cached = context.quick() ? 511 : 2047,
                                        .layers = context.quick() ? 4 : 16,
                                        .from_memory = true};
  BenchTable decode_attention(
      fmt::format("[kernels] attention of a decoding token (after {} positions, {} KV heads x {} "
                  "query heads, head_dim {}; {} layers' blocks, each layer's read from memory; per "
                  "layer, best of {})",
                  decode_shape.cached + 1, decode_shape.kv_heads, decode_shape.group,
                  decode_shape.head_dim, decode_shape.layers, runs),
      {{"K/V type", ""}, {"time", "us"}, {"K/V read", "GB/s"}, {"read peak", "%"}});
  for (const WarmAttentionTiming& timing : TimeWarmAttention(decode_shape, pool, runs)) {
    const double percent = 100.0 * timing.gbps / read_peak;
    decode_attention.AddRow({timing.kv_type, BenchCell(timing.seconds * 1e6, 1),
                             BenchCell(timing.gbps, 1), BenchCell(percent, 0)});
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("decode_attention_{}_percent_of_read_peak", timing.kv_type),
        fmt::format("attention of a decoding token, {} K/V, % of read bandwidth", timing.kv_type),
        percent, "%"));
  }
  progress.End();
  result.figures.insert(
      result.figures.begin(),
      {BenchFigure::Plain("fma_peak_gflops", "machine FMA peak", fma_peak, "GFLOP/s"),
       BenchFigure::Plain("read_peak_gbps", "machine read bandwidth", read_peak, "GB/s")});
  result.tables.push_back(std::move(prefill));
  result.tables.push_back(std::move(decode));
  result.tables.push_back(std::move(attention));
  result.tables.push_back(std::move(decode_attention));
  result.charts = {std::move(prefill_chart), std::move(decode_chart)};
  if (fma_peak < 0.85 * fma_one * pool.num_threads()) {
    result.notes.push_back(fmt::format(
        "the {}-thread FMA peak is {:.0f}% of {} x the 1-thread peak: the threads share FMA units "
        "(other work on the machine, or SMT siblings under a hypervisor), so figures against it "
        "are noisy",
        pool.num_threads(), 100.0 * fma_peak / (fma_one * pool.num_threads()), pool.num_threads()));
  }
  result.notes.insert(
      result.notes.begin(),
      {fmt::format("peaks use every thread of the pool ({}) with {} vectors; kernels run on {}{}",
                   pool.num_threads(), kernels::CpuTargetName(peak_target),
                   kernels::CpuTargetName(target),
                   kernels::MatMulExtensions(target).empty()
                       ? std::string()
                       : fmt::format(" (with {})", kernels::MatMulExtensions(target))),
       "every figure, peaks included, is the best of many short runs (a few ms each): on a shared "
       "machine the best run is the one least disturbed by other work",
       "quantized types count the same 2*n*k*tokens flops as float types; their int8 dot products "
       "(VNNI) do more per instruction than f32 FMA, so they may pass 100% of the f32 peak; \"-\" "
       "marks a shape whose k is not a multiple of the type's block",
       "decode runs alternate with passes of the read probe, and each type's % is of the best "
       "read pass beside its own runs (the machine peaks table's read figure is the probe alone, "
       "before the kernels)",
       "the read probe keeps the best of several loops, one of them reading four places of each "
       "thread's share at once; where that outruns one sequential stream, kernels that read a "
       "matrix in row groups (one stream per thread) cannot reach 100% of it",
       "decode weights are 64 quantized random rows tiled over the matrix; bytes = the weights' "
       "stored size",
       "attention counts 4 x head_dim flops per query head and position (scores and values); q8 "
       "K/V runs on int8 dot products and may pass 100% of the f32 peak; f16 and f32 are bound "
       "by it, which is why a warm chat turn costs more than its new tokens alone",
       "a decoding token's attention reads each KV head's key and value planes (2 KiB each at "
       "f16) from blocks that hold every layer, so its reads are short and scattered: it is "
       "bound by how memory answers those, well below the streaming read peak"});
  return result;
}

}  // namespace reprise::bench
