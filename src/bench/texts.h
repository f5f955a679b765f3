// Texts for the benchmark workloads: the markdown table of vLLM's automatic-prefix-caching example
// (seed 001) grown to any length, questions about it, and seeded prose that shares nothing
// between seeds. Deterministic: the same arguments give the same text on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace reprise::bench {

// The instruction and table header that open the long-table prompt.
std::string TablePreamble();

// Row `id` (1-based) of the table: rows 1..30 are the seed's, later rows are generated in the
// same form ("| 31 | Carl Indigo | 47 | Pilot | ... |\n").
std::string TableRow(int id);
int SeedTableRows();  // 30

// The preamble followed by rows 1..rows.
std::string TableDocument(int rows);

// The seed's question form about row `id`:
// "Question: what is the age of John Doe? Your answer: The age of John Doe is ".
// `kind` picks what is asked (0: age, 1: occupation, 2: country, 3: email, 4: phone), so five
// questions about five rows all differ from their first words on.
std::string TableQuestion(int id, int kind);

// `words` words of plain prose from a generator seeded with `seed`. The first word changes with
// the seed and cycles every 40 seeds, then the seed's number follows: texts of consecutive seeds
// differ from their first token.
std::string Prose(uint64_t seed, size_t words);

// The largest `units` in [1, max_units] whose make(units) counts at most `target` tokens (by
// bisection; `make` must grow with `units`), and its text. make(1) when even that is too long.
struct FittedText {
  std::string text;
  size_t units = 0;
  size_t tokens = 0;
};
FittedText FitToTokens(const std::function<std::string(size_t units)>& make, size_t target,
                       const std::function<size_t(const std::string&)>& count, size_t max_units);

}  // namespace reprise::bench
